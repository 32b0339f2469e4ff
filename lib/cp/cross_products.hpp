// The products of a model's factor matrices with CP-ALS's factors, kept between sweeps.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "core/compute.hpp"

namespace tenfold::detail {

/// P_m = F_m^T U_m (k_m x R) for a tensor given as a model whose mode-m factor F_m
/// (I_m x k_m) is on the backend, U_m the CP factors: the Kruskal operand's A_m^T U_m
/// and the Tucker operand's U_m^T A_m. Each P_m is kept until U_m changes (changed(m))
/// or R does.
template <class T>
class CrossProducts {
 public:
  CrossProducts() = default;
  /// f[m] must stay valid as long as the products are used.
  CrossProducts(std::vector<const T*> f, std::vector<index_t> rows, std::vector<index_t> cols)
      : f_(std::move(f)),
        rows_(std::move(rows)),
        cols_(std::move(cols)),
        p_(f_.size()),
        valid_(f_.size(), false) {}

  /// P_m of every mode, brought up to date where stale except that of mode `skip`
  /// (allocated, not read by an update of that mode).
  std::vector<const T*> get(Compute<T>& c, int skip, std::span<const T* const> u, index_t rank) {
    if (rank != rank_) valid_.assign(f_.size(), false);
    rank_ = rank;
    std::vector<const T*> p(f_.size());
    for (std::size_t m = 0; m < f_.size(); ++m) {
      T* pm = ensure(c, p_[m], static_cast<std::size_t>(cols_[m] * rank));
      if (static_cast<int>(m) != skip && !valid_[m]) {
        // P_m = F_m^T U_m
        c.gemm(Op::trans, Op::none, cols_[m], rank, rows_[m], T(1), f_[m], rows_[m], u[m], rows_[m],
               T(0), pm, cols_[m]);
        valid_[m] = true;
      }
      p[m] = pm;
    }
    return p;
  }

  void changed(int m) { valid_[static_cast<std::size_t>(m)] = false; }

 private:
  std::vector<const T*> f_;
  std::vector<index_t> rows_, cols_;
  std::vector<Buffer<T>> p_;
  std::vector<bool> valid_;
  index_t rank_ = 0;
};

}  // namespace tenfold::detail
