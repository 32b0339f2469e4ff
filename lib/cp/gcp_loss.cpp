#include "cp/gcp_loss.hpp"

#include <bit>

#include "core/instantiate.hpp"
#include "core/simd.hpp"

namespace tenfold::detail {
namespace {

// Adding kShifter to |v| < 2^51 rounds v to an integer in the low bits of the sum.
constexpr double kShifter = 0x1.8p52;
constexpr double kLn2Hi = 6.93147180369123816490e-01;  // low 32 bits zero: n * kLn2Hi exact
constexpr double kLn2Lo = 1.90821492927058770002e-10;  // ln 2 - kLn2Hi

// 2^k for an integer-valued k in [-1022, 1023]: its exponent field written directly.
TENFOLD_INLINE_INTO_CLONE inline double pow2(double k) {
  const std::int64_t bits =
      std::bit_cast<std::int64_t>(k + kShifter) - std::bit_cast<std::int64_t>(kShifter) + 1023;
  return std::bit_cast<double>(bits << 52);
}

// e^a, branch-free (the loops calling it vectorise): n = round(a / ln 2), r = a - n ln 2
// (|r| <= ln 2 / 2, Cody and Waite's two-part ln 2), e^r by its Taylor series to r^13
// (remainder below 1e-17 relative), times 2^n as 2^h 2^(n-h), h = round(n / 2), so that
// both factors are normal numbers down to the subnormal results. a is clamped to
// [-746, 710] first: below, 0; above, inf; NaN stays NaN.
TENFOLD_INLINE_INTO_CLONE inline double exp_of(double a) {
  constexpr double log2e = 1.4426950408889634;
  a = std::min(std::max(a, -746.0), 710.0);
  const double n = (a * log2e + kShifter) - kShifter;
  const double r = (a - n * kLn2Hi) - n * kLn2Lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const double h = (n * 0.5 + kShifter) - kShifter;
  return p * pow2(h) * pow2(n - h);
}

// log(1 + e) for 0 <= e <= 1, given q = 1 / (1 + e) computed from u = fl(1 + e):
// log(1 + e) = log(u) + log(1 + c / u) with c = e - (u - 1) exact, ~ log(u) + c q.
// log(u) = k ln 2 + log(f), f = u / 2^k in [sqrt(1/2), sqrt(2)], and log(f) = 2 atanh(s)
// = 2 (s + s^3/3 + s^5/5 + ...), s = (f - 1) / (f + 1), |s| <= 0.172, to s^23 (the next
// term below 1e-18 relative).
TENFOLD_INLINE_INTO_CLONE inline double log1p_unit(double e, double u, double q) {
  constexpr double sqrt2 = 1.4142135623730951;
  const double c = e - (u - 1.0);
  const bool big = u > sqrt2;
  const double f = big ? 0.5 * u : u;
  const double k = big ? 1.0 : 0.0;
  const double s = (f - 1.0) / (f + 1.0);
  const double z = s * s;
  double p = 2.0 / 23.0;
  p = p * z + 2.0 / 21.0;
  p = p * z + 2.0 / 19.0;
  p = p * z + 2.0 / 17.0;
  p = p * z + 2.0 / 15.0;
  p = p * z + 2.0 / 13.0;
  p = p * z + 2.0 / 11.0;
  p = p * z + 2.0 / 9.0;
  p = p * z + 2.0 / 7.0;
  p = p * z + 2.0 / 5.0;
  p = p * z + 2.0 / 3.0;
  const double log_f = 2.0 * s + s * z * p;
  return k * kLn2Hi + (log_f + (k * kLn2Lo + c * q));
}

// The losses of loss_at with exp_of and log1p_unit in place of std::exp and std::log1p.
struct Poisson {
  TENFOLD_INLINE_INTO_CLONE LossAt operator()(double x, double m) const {
    const double e = exp_of(m);
    return {e - x * m, e - x};
  }
};
struct Bernoulli {
  TENFOLD_INLINE_INTO_CLONE LossAt operator()(double x, double m) const {
    const double e = exp_of(-std::abs(m));
    const double u = 1.0 + e;
    const double q = 1.0 / u;
    return {(std::max(m, 0.0) - x * m) + log1p_unit(e, u, q),
            q * (m >= 0.0 ? (1.0 - x) - x * e : e * (1.0 - x) - x)};
  }
};
struct Gaussian {
  TENFOLD_INLINE_INTO_CLONE LossAt operator()(double x, double m) const {
    const double r = m - x;
    return {r * r, 2.0 * r};
  }
};
struct Scalar {
  GcpLoss loss;
  double huber_delta;
  LossAt operator()(double x, double m) const { return loss_at(loss, x, m, huber_delta); }
};

// loss_sum for one loss: chunks of kChunk entries, f of each kept in a buffer and added
// into kLanes running sums (entry i into lane i mod kLanes; the lanes summed at the end).
template <bool kMasked, class T, class Loss>
TENFOLD_INLINE_INTO_CLONE inline double sum_of(Loss loss, const T* x, const T* m,
                                               const std::uint8_t* observed, index_t n, T* y) {
  constexpr index_t kChunk = 256, kLanes = 8;
  double f[kChunk];
  double lanes[kLanes] = {};
  for (index_t i0 = 0; i0 < n; i0 += kChunk) {
    const index_t len = std::min(kChunk, n - i0);
    for (index_t i = 0; i < len; ++i) {
      double xi = static_cast<double>(x[i0 + i]), mi = static_cast<double>(m[i0 + i]);
      if constexpr (kMasked) {
        // Unobserved: the loss at (0, 0) (finite for every loss) times 0, without branches.
        const double w = observed[i0 + i] != 0 ? 1.0 : 0.0;
        xi = w * (w == 0.0 ? 0.0 : xi);
        mi = w * (w == 0.0 ? 0.0 : mi);
        const LossAt l = loss(xi, mi);
        f[i] = w * l.f;
        y[i0 + i] = static_cast<T>(w * l.d);
      } else {
        const LossAt l = loss(xi, mi);
        f[i] = l.f;
        y[i0 + i] = static_cast<T>(l.d);
      }
    }
    for (index_t i = len; i < (len + kLanes - 1) / kLanes * kLanes; ++i) f[i] = 0.0;
    for (index_t i = 0; i < len; i += kLanes)
      for (index_t j = 0; j < kLanes; ++j) lanes[j] += f[i + j];
  }
  double sum = 0.0;
  for (double s : lanes) sum += s;
  return sum;
}

template <class T, class Loss>
TENFOLD_SIMD_CLONES double sum_with(Loss loss, const T* x, const T* m, const std::uint8_t* observed,
                                    index_t n, T* y) {
  return observed != nullptr ? sum_of<true>(loss, x, m, observed, n, y)
                             : sum_of<false>(loss, x, m, observed, n, y);
}

}  // namespace

template <class T>
double loss_sum(GcpLoss loss, double huber_delta, const T* x, const T* m,
                const std::uint8_t* observed, index_t n, T* y) {
  switch (loss) {
    case GcpLoss::gaussian:
      return sum_with(Gaussian{}, x, m, observed, n, y);
    case GcpLoss::poisson:
      return sum_with(Poisson{}, x, m, observed, n, y);
    case GcpLoss::bernoulli:
      return sum_with(Bernoulli{}, x, m, observed, n, y);
    default:
      return sum_with(Scalar{loss, huber_delta}, x, m, observed, n, y);
  }
}

#define TENFOLD_INSTANTIATE_LOSS_SUM(T)                                                          \
  template double loss_sum<T>(GcpLoss, double, const T*, const T*, const std::uint8_t*, index_t, \
                              T*);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_LOSS_SUM)

}  // namespace tenfold::detail
