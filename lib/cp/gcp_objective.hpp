// The objective of GCP (include/tenfold/gcp.hpp) and its gradient, for gcp.cpp and the
// tests' finite-difference check.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dense_mttkrp.hpp"
#include "core/thread_pool.hpp"
#include "cp/gcp_loss.hpp"
#include "cp/gcp_setup.hpp"
#include "tenfold/gcp.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold::detail {

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
      const index_t begin = b * block, len = std::min(x_.numel(), begin + block) - begin;
      partial[static_cast<std::size_t>(b)] =
          loss_sum(loss_, huber_delta_, x_.data() + begin, m.data() + begin,
                   masked ? observed_.data() + begin : nullptr, len, y_.data() + begin);
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
