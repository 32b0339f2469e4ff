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
  /// For complex T: out = X_(n) conj(K), the product the least-squares update needs
  /// (docs/algorithms.md, "Complex tensors"), as X_(n) times the Khatri-Rao product of
  /// the conjugated factors.
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override {
    if constexpr (is_complex_v<T>) {
      x_.mttkrp(n, conjugated(factors, rank), rank, out);
    } else {
      x_.mttkrp(n, factors, rank, out);
    }
  }
  void factor_changed(int m) override { x_.factor_changed(m); }
  void mode_gram(int n, T* out) override { x_.mode_gram(n, out); }
  /// Drops every cached contraction (the tensor's entries changed).
  void data_changed() { x_.data_changed(); }
  double workspace_elements(index_t rank, bool /*mode_grams*/) const override {
    double conj_copies = 0.0;  // complex: the conjugated factors
    if constexpr (is_complex_v<T>) {
      for (index_t d : dims()) conj_copies += static_cast<double>(d) * static_cast<double>(rank);
    }
    return x_.workspace_elements(rank) + conj_copies;
  }
  /// The tensor in backend memory.
  const T* data() const { return x_.tensor().data(); }

 private:
  // conj(U_m) for every mode m (U_n too, unread, so that the layout is fixed), in conj_.
  std::span<const T* const> conjugated(std::span<const T* const> factors, index_t rank) {
    std::size_t total = 0;
    for (index_t d : dims()) total += static_cast<std::size_t>(d * rank);
    T* p = ensure(this->c_, conj_, total);
    conj_ptrs_.clear();
    for (std::size_t m = 0; m < factors.size(); ++m) {
      const auto size = static_cast<std::size_t>(dims()[m] * rank);
      this->c_.copy(p, factors[m], size);
      this->c_.conjugate(size, p);
      conj_ptrs_.push_back(p);
      p += size;
    }
    return conj_ptrs_;
  }

  DenseMttkrp<T> x_;
  Buffer<T> conj_;
  std::vector<const T*> conj_ptrs_;
};

}  // namespace tenfold::detail
