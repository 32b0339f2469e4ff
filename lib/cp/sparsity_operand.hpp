// A dense tensor whose CP error is TensorLy's with sparsity (robust CP, TensorLy 0.10's
// parafac(sparsity=k)): the sweeps fit X itself, and the error of a model M is that of
// X - M - S, S = sparsify(X - M) the residual's k largest-magnitude entries (all entries
// with |r| >= the k-th largest |r|, ties included), i.e. the 2-norm of the residual's
// other entries. It is measured from the formed model (O(numel R) per sweep, as
// TensorLy's) and the selection runs on the host.
#pragma once

#include <vector>

#include "cp/dense_operand.hpp"
#include "cp/full_model.hpp"

namespace tenfold::detail {

template <class T>
class SparsityOperand final : public CpOperand<T> {
 public:
  /// `sparse_entries` >= 1: k above.
  SparsityOperand(Compute<T>& c, TensorView<const T> x, index_t sparse_entries);

  const std::vector<index_t>& dims() const override { return dense_.dims(); }
  double norm_squared() override { return dense_.norm_squared(); }
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override {
    dense_.mttkrp(n, factors, rank, out);
  }
  void factor_changed(int m) override { dense_.factor_changed(m); }
  void mode_gram(int n, T* out) override { dense_.mode_gram(n, out); }
  double end_sweep(std::span<const T* const> factors, const T* lambda, index_t rank) override {
    return model_error2(factors, lambda, rank);
  }
  double model_error2(std::span<const T* const> factors, const T* lambda, index_t rank) override;
  /// The dense MTTKRP's, the formed model (and its host copy and magnitudes) and the
  /// Khatri-Rao products that form it.
  double workspace_elements(index_t rank, bool mode_grams) const override;

 private:
  DenseOperand<T> dense_;
  FullModel<T> full_;
  std::size_t numel_;
  index_t sparse_entries_;
  Buffer<T> residual_;
  std::vector<T> host_;
  std::vector<double> magnitude_;
};

}  // namespace tenfold::detail
