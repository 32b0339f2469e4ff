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
  // W X and W, written in place on a host backend, uploaded from host copies otherwise
  std::vector<T> xo_host, w_host;
  if (!c.host_memory()) {
    xo_host.resize(numel_);
    w_host.resize(numel_);
  }
  T* xo = c.host_memory() ? observed_x_.get() : xo_host.data();
  T* w = c.host_memory() ? weight_.get() : w_host.data();
  double sum = 0.0;
  std::size_t count = 0;
  for (std::size_t i = 0; i < numel_; ++i) {
    const bool seen = observed.data()[i] != 0;
    xo[i] = seen ? x.data()[i] : T(0);
    w[i] = seen ? T(1) : T(0);
    if (!seen) continue;
    sum += static_cast<double>(xo[i]);
    ++count;
    if (weighted) {
      observed_at_.push_back(static_cast<index_t>(i));
      observed_values_.push_back(xo[i]);
    }
  }
  mean_ = count > 0 ? static_cast<T>(sum / static_cast<double>(count)) : T(0);
  if (!c.host_memory()) {
    c.upload(observed_x_.get(), xo, numel_);
    c.upload(weight_.get(), w, numel_);
  }
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
  c.fill(model_.get(), numel_, mean_);
  c.masked_fill(numel_, weight_.get(), observed_x_.get(), model_.get(), filled_.get());
  filled_op_.data_changed();
}

template <class T>
double MaskedOperand<T>::end_sweep(std::span<const T* const> factors, const T* lambda,
                                   index_t rank) {
  Compute<T>& c = this->c_;
  full_.form(factors, lambda, rank, model_.get());
  // F = W X + (1 - W) M: the data where observed, the model elsewhere; the residual
  // W X - W M is the one over the observed entries.
  const double resid2 =
      c.masked_fill(numel_, weight_.get(), observed_x_.get(), model_.get(), filled_.get());
  filled_op_.data_changed();
  return resid2;
}

template class MaskedOperand<float>;
template class MaskedOperand<double>;

}  // namespace tenfold::detail
