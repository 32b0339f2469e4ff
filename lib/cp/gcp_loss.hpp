// The elementwise losses of GCP (include/tenfold/gcp.hpp): f(x, m) and df/dm at one
// entry (loss_at, with the standard library's functions), and over a block of entries
// (loss_sum, vectorised for the Gaussian, Poisson and Bernoulli losses).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tenfold/gcp.hpp"
#include "tenfold/tensor.hpp"

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
      // log(1 + e^m) - x m = (max(m, 0) - x m) + log1p(e), e = e^-|m| (exact first part
      // for x in {0, 1}); df/dm = logistic(m) - x = q ((1 - x) - x e) for m >= 0 and
      // q (e (1 - x) - x) below, q = 1 / (1 + e): no cancellation for binary x.
      const double e = std::exp(-std::abs(m));
      const double q = 1.0 / (1.0 + e);
      return {(std::max(m, 0.0) - x * m) + std::log1p(e),
              q * (m >= 0.0 ? (1.0 - x) - x * e : e * (1.0 - x) - x)};
    }
    case GcpLoss::gaussian:
      break;
  }
  const double r = m - x;
  return {r * r, 2.0 * r};
}

/// Sum of f(x[i], m[i]) over i in [0, n) where observed[i] != 0 (every i when observed is
/// null), and y[i] = df/dm there (0 elsewhere; x may be anything there). The sum runs in
/// a fixed order for given n (the same bits on every call on one machine). Agrees with
/// loss_at to a few units in the last place.
template <class T>
double loss_sum(GcpLoss loss, double huber_delta, const T* x, const T* m,
                const std::uint8_t* observed, index_t n, T* y);

}  // namespace tenfold::detail
