#include "core/scaling.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/instantiate.hpp"
#include "core/scalar.hpp"
#include "core/simd.hpp"
#include "core/thread_pool.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

// The largest bit pattern of |p[i]| (sign bit cleared): patterns order as the
// magnitudes do, and one above the largest finite value's is Inf or NaN. An integer
// maximum, so the loop vectorises.
TENFOLD_SIMD_CLONES std::uint64_t max_magnitude_bits(const double* p, std::size_t n) {
  std::uint64_t m = 0;
  for (std::size_t i = 0; i < n; ++i)
    m = std::max<std::uint64_t>(m, std::bit_cast<std::uint64_t>(p[i]) & 0x7fffffffffffffffULL);
  return m;
}

TENFOLD_SIMD_CLONES std::uint32_t max_magnitude_bits(const float* p, std::size_t n) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i)
    m = std::max(m, std::bit_cast<std::uint32_t>(p[i]) & 0x7fffffffU);
  return m;
}

}  // namespace

template <class T>
Magnitudes magnitudes(TensorView<const T> x) {
  using R = real_t<T>;
  // (a complex array is an array of twice as many reals)
  const auto* p = reinterpret_cast<const R*>(x.data());
  const std::size_t n = static_cast<std::size_t>(x.numel()) * (is_complex_v<T> ? 2 : 1);
  using U = decltype(max_magnitude_bits(p, 0));
  constexpr std::size_t kChunks = 64;
  std::array<U, kChunks> part{};
  const std::size_t chunk = (n + kChunks - 1) / kChunks;
  const auto scan = [&](index_t c) {
    const std::size_t lo = std::min(n, static_cast<std::size_t>(c) * chunk);
    part[static_cast<std::size_t>(c)] = max_magnitude_bits(p + lo, std::min(n, lo + chunk) - lo);
  };
  if (n > 32768) {
    parallel_for(kChunks, scan);
  } else {
    for (std::size_t c = 0; c < kChunks; ++c) scan(static_cast<index_t>(c));
  }
  const R peak = std::bit_cast<R>(*std::max_element(part.begin(), part.end()));
  return {static_cast<double>(peak), std::isfinite(peak)};
}

namespace {

// The scaling of an input of real type R whose largest magnitude is `peak`.
template <class R>
Balancing balancing_of(R peak) {
  Balancing b;
  b.max_abs = static_cast<double>(peak);
  if (peak == R(0)) return b;
  // peak = m 2^k with m in [1/2, 1)
  int k = 0;
  std::frexp(peak, &k);
  constexpr int q = std::numeric_limits<R>::max_exponent / 4;
  if (k - 1 < -q || k > q) b.exponent = -k;
  return b;
}

}  // namespace

template <class T>
Balancing balancing(TensorView<const T> x, const std::uint8_t* observed) {
  using R = real_t<T>;
  if (observed == nullptr) return balancing_of(static_cast<R>(magnitudes(x).max_abs));
  const T* p = x.data();
  R peak = 0;
  for (index_t i = 0; i < x.numel(); ++i) {
    if (observed[i] != 0) peak = std::max(peak, R(std::abs(p[i])));
  }
  return balancing_of(peak);
}

template <class T>
Balancing checked_balancing(TensorView<const T> x, const char* what) {
  const Magnitudes m = magnitudes(x);
  if (!m.finite) check_finite(x, what);  // finds the entry, names it and throws
  return balancing_of(static_cast<real_t<T>>(m.max_abs));
}

template <class T>
Tensor<T> scaled(TensorView<const T> x, int e) {
  Tensor<T> y(x.dims());
  const T* p = x.data();
  for (index_t i = 0; i < x.numel(); ++i) y[i] = times_power_of_two(p[i], e);
  return y;
}

template <class U>
void scale_back(std::span<U> v, int e, const Balancing& b, const std::string& what) {
  if (e == 0) return;
  using R = real_t<U>;
  R before = 0, peak = 0;
  for (U& a : v) {
    before = std::max(before, R(std::abs(a)));
    a = times_power_of_two(a, -e);
    peak = std::max(peak, R(std::abs(a)));
  }
  const bool overflow = !std::isfinite(peak);
  if (!overflow && !(before > R(0) && peak < std::numeric_limits<R>::min())) return;
  const bool is_float = sizeof(R) == sizeof(float);
  char magnitude[32];
  std::snprintf(magnitude, sizeof magnitude, "%.3g", b.max_abs);
  throw NumericalError(what + " of this tensor (largest |x| = " + magnitude + ") " +
                       (overflow ? "exceed" : "fall below") + " the range of " +
                       (is_float   ? "float; decompose it in double"
                        : overflow ? "double; scale the tensor down"
                                   : "double; scale the tensor up"));
}

#define TENFOLD_INSTANTIATE_SCALING(T)                                       \
  template Magnitudes magnitudes<T>(TensorView<const T>);                    \
  template Balancing balancing<T>(TensorView<const T>, const std::uint8_t*); \
  template Balancing checked_balancing<T>(TensorView<const T>, const char*); \
  template Tensor<T> scaled<T>(TensorView<const T>, int);                    \
  template void scale_back<T>(std::span<T>, int, const Balancing&, const std::string&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_SCALING)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_SCALING)

}  // namespace tenfold::detail
