#include "cp/full_model.hpp"

#include <algorithm>
#include <complex>

#include "core/dense_mttkrp.hpp"

namespace tenfold::detail {

template <class T>
FullModel<T>::FullModel(Compute<T>& c, const std::vector<index_t>& dims) : c_(c), dims_(dims) {
  index_t numel = 1;
  for (index_t d : dims) numel *= d;
  index_t best = numel;
  index_t lead = 1;
  for (int h = 1; h < static_cast<int>(dims.size()); ++h) {
    lead *= dims[static_cast<std::size_t>(h - 1)];
    const index_t worst = std::max(lead, numel / lead);
    if (worst < best) {
      best = worst;
      split_ = h;
    }
  }
}

template <class T>
double FullModel<T>::workspace_elements(index_t rank) const {
  double lead = 1.0, rest = 1.0;
  for (std::size_t m = 0; m < dims_.size(); ++m)
    (static_cast<int>(m) < split_ ? lead : rest) *= static_cast<double>(dims_[m]);
  return (lead + 2.0 * std::max(lead, rest) + rest) * static_cast<double>(rank);
}

template <class T>
void FullModel<T>::form(std::span<const T* const> factors, const T* lambda, index_t rank, T* out) {
  const int order = static_cast<int>(dims_.size());
  index_t rows = 1, cols = 1;
  for (int m = 0; m < order; ++m) (m < split_ ? rows : cols) *= dims_[static_cast<std::size_t>(m)];
  // M = (KR(U_{split-1}, ..., U_0) diag(lambda)) KR(U_{N-1}, ..., U_split)^T
  const T* kl = khatri_rao_range(c_, dims_, factors, 0, split_, rank, kr_, kr_tmp_);
  T* a = ensure(c_, lead_, static_cast<std::size_t>(rows * rank));
  c_.copy(a, kl, static_cast<std::size_t>(rows * rank));
  c_.scale_columns(rows, rank, a, rows, lambda);
  const T* kt = khatri_rao_range(c_, dims_, factors, split_, order, rank, kr_, kr_tmp_);
  c_.gemm(Op::none, Op::trans, rows, cols, rank, T(1), a, rows, kt, cols, T(0), out, rows);
}

template class FullModel<float>;
template class FullModel<double>;
template class FullModel<std::complex<float>>;
template class FullModel<std::complex<double>>;

}  // namespace tenfold::detail
