// A CP operand seen with its modes reversed: mode n of the view is mode N-1-n of the
// operand. A C-order array read in place is the column-major tensor with its modes
// reversed; through this view the ALS loop numbers the modes by NumPy axis, so that
// the start, the sweep order and every tie follow the axes without a copy.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "core/layout.hpp"
#include "cp/operand.hpp"

namespace tenfold::detail {

template <class T>
class ReversedOperand final : public CpOperand<T> {
 public:
  ReversedOperand(Compute<T>& c, CpOperand<T>& inner)
      : CpOperand<T>(c), inner_(inner), dims_(reversed(inner.dims())) {}

  const std::vector<index_t>& dims() const override { return dims_; }
  double norm_squared() override { return inner_.norm_squared(); }
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override {
    inner_.mttkrp(flip(n), flipped(factors), rank, out);
  }
  void factor_changed(int m) override { inner_.factor_changed(flip(m)); }
  void mode_gram(int n, T* out) override { inner_.mode_gram(flip(n), out); }
  bool gram_eigenvectors(int n, const T* gram, index_t r, T* out) override {
    return inner_.gram_eigenvectors(flip(n), gram, r, out);
  }
  double end_sweep(std::span<const T* const> factors, const T* lambda, index_t rank) override {
    return inner_.end_sweep(flipped(factors), lambda, rank);
  }
  double model_error2(std::span<const T* const> factors, const T* lambda, index_t rank) override {
    return inner_.model_error2(flipped(factors), lambda, rank);
  }
  bool updates_factors() const override { return inner_.updates_factors(); }
  void update_factor(int n, std::span<const T* const> factors, index_t rank, double ridge,
                     T* out) override {
    inner_.update_factor(flip(n), flipped(factors), rank, ridge, out);
  }
  void reset() override { inner_.reset(); }
  double workspace_elements(index_t rank, bool mode_grams) const override {
    return inner_.workspace_elements(rank, mode_grams);
  }

 private:
  int flip(int n) const { return this->order() - 1 - n; }
  std::span<const T* const> flipped(std::span<const T* const> factors) {
    factors_.assign(factors.rbegin(), factors.rend());
    return factors_;
  }

  CpOperand<T>& inner_;
  std::vector<index_t> dims_;
  std::vector<const T*> factors_;
};

/// run(operand) on `x` in NumPy axis order: x itself, or (reversed) its ReversedOperand.
template <class T, class Run>
auto run_in_axis_numbering(Compute<T>& c, CpOperand<T>& x, bool reversed, Run&& run) {
  if (!reversed) return run(x);
  ReversedOperand<T> view(c, x);
  return run(static_cast<CpOperand<T>&>(view));
}

}  // namespace tenfold::detail
