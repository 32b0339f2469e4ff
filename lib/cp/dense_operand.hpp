// Dense tensor as a CP-ALS operand: the dimension-tree MTTKRP of core/dense_mttkrp.hpp.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "core/dense_mttkrp.hpp"
#include "cp/operand.hpp"

namespace tenfold::detail {

template <class T>
class DenseOperand final : public CpOperand<T> {
 public:
  /// Views `x` on a host backend; copies it to the device once otherwise.
  DenseOperand(Compute<T>& c, TensorView<const T> x) : CpOperand<T>(c), x_(c, x) {}
  /// Views a tensor that is already in backend memory (it must outlive the operand).
  DenseOperand(Compute<T>& c, const T* backend_data, std::vector<index_t> dims)
      : CpOperand<T>(c), x_(c, backend_data, std::move(dims)) {}

  const std::vector<index_t>& dims() const override { return x_.dims(); }
  double norm_squared() override { return x_.tensor().norm_squared(); }
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override {
    x_.mttkrp(n, factors, rank, out);
  }
  void factor_changed(int m) override { x_.factor_changed(m); }
  void mode_gram(int n, T* out) override { x_.mode_gram(n, out); }
  /// Drops every cached contraction (the tensor's entries changed).
  void data_changed() { x_.data_changed(); }
  double workspace_elements(index_t rank, bool /*mode_grams*/) const override {
    return x_.workspace_elements(rank);
  }
  /// The tensor in backend memory.
  const T* data() const { return x_.tensor().data(); }

 private:
  DenseMttkrp<T> x_;
};

}  // namespace tenfold::detail
