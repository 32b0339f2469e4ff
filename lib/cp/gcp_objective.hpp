// The objective of GCP (include/tenfold/gcp.hpp) and its gradient, for gcp.cpp and the
// tests' finite-difference check.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dense_mttkrp.hpp"
#include "tenfold/gcp.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold::detail {

// f(x, m) and df/dm.
struct LossAt {
  double f, d;
};

inline LossAt loss_at(GcpLoss loss, double x, double m) {
  switch (loss) {
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

// Objective and gradient of the factors packed mode by mode (column-major, I_n x R each).
template <class T>
class GcpObjective {
 public:
  GcpObjective(Compute<T>& c, TensorView<const T> x, GcpLoss loss, index_t rank)
      : c_(c), x_(x), loss_(loss), r_(rank), y_(x.dims()) {}

  // F(u); grad = dF/du. Non-finite F (overflow of exp) is returned as is.
  double evaluate(const std::vector<double>& u, std::vector<double>& grad) {
    KTensor<T> k(std::vector<T>(static_cast<std::size_t>(r_), T(1)), factors(u));
    const Tensor<T> m = k.full();
    double f = 0.0;
    for (index_t i = 0; i < x_.numel(); ++i) {
      const LossAt l = loss_at(loss_, static_cast<double>(x_[i]), static_cast<double>(m[i]));
      f += l.f;
      y_[i] = static_cast<T>(l.d);
    }
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

  std::vector<Matrix<T>> factors(const std::vector<double>& u) const {
    std::vector<Matrix<T>> f;
    std::size_t at = 0;
    for (int n = 0; n < x_.order(); ++n) {
      Matrix<T> a(x_.dim(n), r_);
      for (T& v : a.values()) v = static_cast<T>(u[at++]);
      f.push_back(std::move(a));
    }
    return f;
  }

 private:
  Compute<T>& c_;
  TensorView<const T> x_;
  GcpLoss loss_;
  index_t r_;
  Tensor<T> y_;
};

}  // namespace tenfold::detail
