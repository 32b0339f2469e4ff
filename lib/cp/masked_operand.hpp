// A dense tensor with missing entries as a CP-ALS operand, by EM (expectation
// maximisation, as TensorLy's parafac(mask=...)). The loop sees the filled tensor
//   F = W * X + (1 - W) * M
// (W the 0/1 mask of observed entries, M the current model; before the first sweep M
// is the mean of the observed entries). After every sweep F takes the new model, and
// the residual reported is over the observed entries only. With the weighted solver
// the loop's updates are instead row-wise least squares over the observed entries
// (masked_weighted.cpp); the filled tensor then serves only the nvecs start.
#pragma once

#include <cstdint>
#include <vector>

#include "cp/dense_operand.hpp"
#include "cp/full_model.hpp"

namespace tenfold::detail {

template <class T>
class MaskedOperand final : public CpOperand<T> {
 public:
  /// Copies x (with 0 at missing entries) and the mask to the backend (and, with
  /// `weighted`, keeps a host copy of both); missing entries of x are not read.
  MaskedOperand(Compute<T>& c, TensorView<const T> x, TensorView<const std::uint8_t> observed,
                bool weighted = false);

  const std::vector<index_t>& dims() const override { return filled_op_.dims(); }
  /// ||W X||^2.
  double norm_squared() override { return norm_observed2_; }
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override {
    filled_op_.mttkrp(n, factors, rank, out);
  }
  void factor_changed(int m) override { filled_op_.factor_changed(m); }
  void mode_gram(int n, T* out) override { filled_op_.mode_gram(n, out); }
  double end_sweep(std::span<const T* const> factors, const T* lambda, index_t rank) override;
  void reset() override;
  /// The filled tensor F (backend memory), for operands that view parts of it (CMTF).
  const T* filled() const { return filled_.get(); }
  bool updates_factors() const override { return weighted_; }
  /// Row i of U_n: (sum_j k_j k_j^T + ridge I) u_i = sum_j x_j k_j over the observed
  /// entries j of slice i, k_j the Hadamard product of the other factors' rows.
  void update_factor(int n, std::span<const T* const> factors, index_t rank, double ridge,
                     T* out) override;
  /// The filled tensor's MTTKRP buffers, and end_sweep's: the Khatri-Rao products of the
  /// two blocks of modes (and a scratch of the larger) that form the model.
  double workspace_elements(index_t rank, bool mode_grams) const override;

 private:
  std::size_t numel_ = 0;
  Buffer<T> observed_x_;  // W X (0 at missing entries)
  Buffer<T> weight_;      // W (1 observed, 0 missing)
  Buffer<T> filled_;      // F
  Buffer<T> model_;       // scratch: the full model
  double norm_observed2_ = 0.0;
  bool weighted_ = false;
  std::vector<index_t> observed_at_;  // weighted: linear indices of the observed entries
  std::vector<T> observed_values_;    // weighted: X at those entries
  T mean_ = 0;
  DenseOperand<T> filled_op_;  // views filled_
  FullModel<T> full_;
};

}  // namespace tenfold::detail
