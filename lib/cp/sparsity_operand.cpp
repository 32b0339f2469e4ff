#include "cp/sparsity_operand.hpp"

#include <algorithm>
#include <cmath>
#include <complex>

namespace tenfold::detail {

template <class T>
SparsityOperand<T>::SparsityOperand(Compute<T>& c, TensorView<const T> x, index_t sparse_entries)
    : CpOperand<T>(c),
      dense_(c, x),
      full_(c, x.dims()),
      numel_(static_cast<std::size_t>(x.numel())),
      sparse_entries_(sparse_entries),
      residual_(c, numel_) {}

template <class T>
double SparsityOperand<T>::workspace_elements(index_t rank, bool mode_grams) const {
  // (the residual on the backend, and its host copy and magnitudes, counted alike)
  const double host = 1.0 + static_cast<double>(sizeof(double)) / static_cast<double>(sizeof(T));
  return dense_.workspace_elements(rank, mode_grams) + (1.0 + host) * static_cast<double>(numel_) +
         full_.workspace_elements(rank);
}

template <class T>
double SparsityOperand<T>::model_error2(std::span<const T* const> factors, const T* lambda,
                                        index_t rank) {
  if (static_cast<std::size_t>(sparse_entries_) >= numel_) return 0.0;  // S is the residual
  Compute<T>& c = this->c_;
  // R = M - X (the sign does not matter)
  full_.form(factors, lambda, rank, residual_.get());
  c.axpy(numel_, T(-1), dense_.data(), residual_.get());
  host_.resize(numel_);
  c.download(host_.data(), residual_.get(), numel_);
  // bound = the k-th largest |r|; ||R - S||^2 = sum of r^2 over |r| < bound
  magnitude_.resize(numel_);
  std::transform(host_.begin(), host_.end(), magnitude_.begin(),
                 [](T v) { return static_cast<double>(std::abs(v)); });
  const auto kth = magnitude_.begin() + static_cast<std::ptrdiff_t>(sparse_entries_ - 1);
  std::nth_element(magnitude_.begin(), kth, magnitude_.end(), std::greater<>());
  const double bound = *kth;
  double resid2 = 0.0;
  for (T v : host_) {
    const double a = static_cast<double>(std::abs(v));
    if (a < bound) resid2 += a * a;
  }
  return resid2;
}

template class SparsityOperand<float>;
template class SparsityOperand<double>;
template class SparsityOperand<std::complex<float>>;
template class SparsityOperand<std::complex<double>>;

}  // namespace tenfold::detail
