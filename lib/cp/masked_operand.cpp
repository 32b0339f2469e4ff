#include "cp/masked_operand.hpp"

#include <algorithm>
#include <cmath>

namespace tenfold::detail {

template <class T>
MaskedOperand<T>::MaskedOperand(Compute<T>& c, TensorView<const T> x,
                                TensorView<const std::uint8_t> observed, bool weighted)
    : CpOperand<T>(c),
      numel_(static_cast<std::size_t>(x.numel())),
      observed_x_(c, numel_),
      weight_(c, numel_),
      filled_(c, numel_),
      model_(c, numel_),
      weighted_(weighted),
      filled_op_(c, filled_.get(), x.dims()),
      full_(c, x.dims()) {
  std::vector<T> xo(numel_), w(numel_);
  double sum = 0.0;
  std::size_t count = 0;
  for (std::size_t i = 0; i < numel_; ++i) {
    if (observed.data()[i] == 0) continue;
    xo[i] = x.data()[i];
    w[i] = T(1);
    sum += static_cast<double>(xo[i]);
    ++count;
    if (weighted) {
      observed_at_.push_back(static_cast<index_t>(i));
      observed_values_.push_back(xo[i]);
    }
  }
  mean_ = count > 0 ? static_cast<T>(sum / static_cast<double>(count)) : T(0);
  c.upload(observed_x_.get(), xo.data(), numel_);
  c.upload(weight_.get(), w.data(), numel_);
  norm_observed2_ = c.sum_squares(numel_, observed_x_.get());
  reset();
}

template <class T>
double MaskedOperand<T>::workspace_elements(index_t rank, bool mode_grams) const {
  return filled_op_.workspace_elements(rank, mode_grams) + full_.workspace_elements(rank);
}

template <class T>
void MaskedOperand<T>::reset() {
  Compute<T>& c = this->c_;
  // F = W X + (1 - W) mean
  c.fill(filled_.get(), numel_, mean_);
  c.copy(model_.get(), weight_.get(), numel_);
  c.hadamard(numel_, filled_.get(), model_.get());         // model = W mean
  c.axpy(numel_, T(-1), model_.get(), filled_.get());      // filled = (1 - W) mean
  c.axpy(numel_, T(1), observed_x_.get(), filled_.get());  // filled += W X
  filled_op_.data_changed();
}

template <class T>
double MaskedOperand<T>::end_sweep(std::span<const T* const> factors, const T* lambda,
                                   index_t rank) {
  Compute<T>& c = this->c_;
  full_.form(factors, lambda, rank, model_.get());
  // F = W X - W M  (the residual on the observed entries), then F += M.
  c.copy(filled_.get(), observed_x_.get(), numel_);
  c.axpy(numel_, T(-1), model_.get(), filled_.get());
  c.hadamard(numel_, weight_.get(), filled_.get());
  const double resid2 = c.sum_squares(numel_, filled_.get());
  c.axpy(numel_, T(1), model_.get(), filled_.get());
  filled_op_.data_changed();
  return resid2;
}

template class MaskedOperand<float>;
template class MaskedOperand<double>;

}  // namespace tenfold::detail
