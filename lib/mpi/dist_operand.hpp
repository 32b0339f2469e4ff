// The distributed dense tensor as a CP-ALS operand: the local dimension-tree MTTKRP on
// the block, then a sum within the mode's slice and an all-gather within its fibre.
#pragma once

#include <vector>

#include "cp/dense_operand.hpp"
#include "cp/factor_cache.hpp"
#include "cp/operand.hpp"
#include "tenfold/mpi.hpp"

namespace tenfold::mpi::detail {

using tenfold::detail::Compute;
using tenfold::detail::Op;

template <class T>
class DistDenseOperand final : public tenfold::detail::CpOperand<T> {
 public:
  DistDenseOperand(Compute<T>& c, const DistTensor<T>& x);

  const std::vector<index_t>& dims() const override { return x_.dims; }
  double norm_squared() override;
  /// out (I_n x R, every process) from the replicated factors (I_m x R each).
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override;
  void factor_changed(int m) override;
  void mode_gram(int n, T* out) override;
  double workspace_elements(index_t rank, bool mode_grams) const override;

 private:
  const DistTensor<T>& x_;
  tenfold::detail::DenseOperand<T> local_;
  std::vector<tenfold::detail::Buffer<T>> slices_;  // this block's rows of each factor
  tenfold::detail::FactorCache cache_;              // which slices_ are current
  double norm_squared_ = -1.0;
  tenfold::detail::Buffer<T> partial_;
};

/// out (I_n x I_n, every process) = X_(n) X_(n)^T of the distributed tensor.
template <class T>
void distributed_mode_gram(Compute<T>& c, const DistTensor<T>& x, int n, T* out);

}  // namespace tenfold::mpi::detail
