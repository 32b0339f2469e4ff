// The objective of GCP (include/tenfold/gcp.hpp) and its gradient, for gcp.cpp and the
// tests' finite-difference check.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dense_mttkrp.hpp"
#include "core/thread_pool.hpp"
#include "cp/gcp_setup.hpp"
#include "tenfold/gcp.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold::detail {

// f(x, m) and df/dm.
struct LossAt {
  double f, d;
};

// The shift that keeps the gamma and rayleigh losses finite at m = 0 (the Toolbox's).
inline constexpr double gcp_eps = 1e-10;

inline LossAt loss_at(GcpLoss loss, double x, double m, double huber_delta) {
  switch (loss) {
    case GcpLoss::gamma: {
      const double q = 1.0 / (m + gcp_eps);
      return {x * q + std::log(m + gcp_eps), q - x * q * q};
    }
    case GcpLoss::rayleigh: {
      constexpr double pi = 3.14159265358979323846;
      const double q = 1.0 / (m + gcp_eps);
      return {2.0 * std::log(m + gcp_eps) + (pi / 4.0) * (x * q) * (x * q),
              2.0 * q - (pi / 2.0) * x * x * q * q * q};
    }
    case GcpLoss::huber: {
      const double r = m - x;
      if (std::abs(r) < huber_delta) return {r * r, 2.0 * r};
      return {2.0 * huber_delta * std::abs(r) - huber_delta * huber_delta,
              r > 0.0 ? 2.0 * huber_delta : -2.0 * huber_delta};
    }
    case GcpLoss::poisson: {
      const double e = std::exp(m);
      return {e - x * m, e - x};
    }
    case GcpLoss::bernoulli: {
      // log(1 + e^m) = max(m, 0) + log1p(e^-|m|); its derivative, the logistic function
      const double e = std::exp(-std::abs(m));
      const double sigma = m >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
      return {std::max(m, 0.0) + std::log1p(e) - x * m, sigma - x};
    }
    case GcpLoss::gaussian:
      break;
  }
  const double r = m - x;
  return {r * r, 2.0 * r};
}

// Objective and gradient of the factors packed mode by mode (column-major, I_n x R each),
// over the entries `observed` marks non-zero (all when it is empty).
template <class T>
class GcpObjective {
 public:
  GcpObjective(Compute<T>& c, TensorView<const T> x, TensorView<const std::uint8_t> observed,
               GcpLoss loss, double huber_delta, index_t rank)
      : c_(c),
        x_(x),
        observed_(observed),
        loss_(loss),
        huber_delta_(huber_delta),
        r_(rank),
        y_(x.dims()) {}

  // F(u); grad = dF/du. Non-finite F (overflow of exp) is returned as is.
  double evaluate(const std::vector<double>& u, std::vector<double>& grad) {
    const KTensor<T> k = gcp_model<T>(x_.dims(), r_, u);
    const Tensor<T> m = k.full();
    // F and Y in fixed blocks of entries on the thread pool; F the blocks' sums in block
    // order (the same bits for any thread count).
    const bool masked = observed_.data() != nullptr;
    constexpr index_t block = 1 << 15;
    const index_t n_blocks = (x_.numel() + block - 1) / block;
    std::vector<double> partial(static_cast<std::size_t>(n_blocks));
    parallel_for(n_blocks, [&](index_t b) {
      double sum = 0.0;
      const index_t end = std::min(x_.numel(), (b + 1) * block);
      for (index_t i = b * block; i < end; ++i) {
        if (masked && observed_[i] == 0) {
          y_[i] = T(0);
          continue;
        }
        const LossAt l =
            loss_at(loss_, static_cast<double>(x_[i]), static_cast<double>(m[i]), huber_delta_);
        sum += l.f;
        y_[i] = static_cast<T>(l.d);
      }
      partial[static_cast<std::size_t>(b)] = sum;
    });
    double f = 0.0;
    for (double p : partial) f += p;
    if (!std::isfinite(f)) return f;
    DenseMttkrp<T> y(c_, y_.view());
    std::vector<const T*> ptrs;
    for (const Matrix<T>& a : k.factors) ptrs.push_back(a.data());
    grad.assign(u.size(), 0.0);
    std::vector<T> g;
    std::size_t at = 0;
    for (int n = 0; n < x_.order(); ++n) {
      g.resize(static_cast<std::size_t>(x_.dim(n) * r_));
      y.mttkrp(n, ptrs, r_, g.data());
      std::copy(g.begin(), g.end(), grad.begin() + static_cast<std::ptrdiff_t>(at));
      at += g.size();
    }
    return f;
  }

 private:
  Compute<T>& c_;
  TensorView<const T> x_;
  TensorView<const std::uint8_t> observed_;
  GcpLoss loss_;
  double huber_delta_;
  index_t r_;
  Tensor<T> y_;
};

}  // namespace tenfold::detail
