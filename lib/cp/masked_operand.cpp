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
      filled_op_(c, filled_.get(), x.dims()) {
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
  // The model splits into two blocks of modes as balanced in size as possible.
  const auto& dims = x.dims();
  const int order = x.order();
  index_t best = x.numel();
  index_t lead = 1;
  for (int h = 1; h < order; ++h) {
    lead *= dims[static_cast<std::size_t>(h - 1)];
    const index_t worst = std::max(lead, x.numel() / lead);
    if (worst < best) {
      best = worst;
      split_ = h;
    }
  }
  reset();
}

template <class T>
double MaskedOperand<T>::workspace_elements(index_t rank, bool mode_grams) const {
  double lead = 1.0, rest = 1.0;
  const auto& d = dims();
  for (std::size_t m = 0; m < d.size(); ++m)
    (static_cast<int>(m) < split_ ? lead : rest) *= static_cast<double>(d[m]);
  return filled_op_.workspace_elements(rank, mode_grams) +
         (lead + 2.0 * std::max(lead, rest) + rest) * static_cast<double>(rank);
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
  const auto& dims = filled_op_.dims();
  const int order = static_cast<int>(dims.size());
  index_t rows = 1;
  for (int m = 0; m < split_; ++m) rows *= dims[static_cast<std::size_t>(m)];
  const index_t cols = static_cast<index_t>(numel_) / rows;
  // M = (KR(U_{split-1}, ..., U_0) diag(lambda)) KR(U_{N-1}, ..., U_split)^T
  const T* kl = khatri_rao_range(c, dims, factors, 0, split_, rank, kr_, kr_tmp_);
  T* a = ensure(c, lead_, static_cast<std::size_t>(rows * rank));
  c.copy(a, kl, static_cast<std::size_t>(rows * rank));
  c.scale_columns(rows, rank, a, rows, lambda);
  const T* kt = khatri_rao_range(c, dims, factors, split_, order, rank, kr_, kr_tmp_);
  c.gemm(Op::none, Op::trans, rows, cols, rank, T(1), a, rows, kt, cols, T(0), model_.get(), rows);
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
