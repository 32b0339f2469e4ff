#include "cp/line_search.hpp"

#include <algorithm>
#include <cmath>
#include <complex>

namespace tenfold::detail {

namespace {
constexpr int kMaxFailures = 4;
}

template <class T>
LineSearch<T>::LineSearch(Compute<T>& c, const std::vector<index_t>& dims, index_t rank)
    : c_(c), dims_(dims), r_(rank) {
  const auto rr = static_cast<std::size_t>(rank * rank);
  index_t imax = 0;
  for (index_t d : dims) {
    prev_.emplace_back(c, static_cast<std::size_t>(d * rank));
    cand_.emplace_back(c, static_cast<std::size_t>(d * rank));
    cand_ptrs_.push_back(cand_.back().get());
    imax = std::max(imax, d);
  }
  gram_ = Buffer<T>(c, rr);
  v_ = Buffer<T>(c, rr);
  m_ = Buffer<T>(c, static_cast<std::size_t>(imax * rank));
}

template <class T>
void LineSearch<T>::remember(std::span<T* const> u, const T* lambda, int last) {
  for (std::size_t n = 0; n < dims_.size(); ++n) {
    const index_t in = dims_[n];
    c_.copy(prev_[n].get(), u[n], static_cast<std::size_t>(in * r_));
    if (static_cast<int>(n) == last) c_.scale_columns(in, r_, prev_[n].get(), in, lambda);
  }
}

template <class T>
double LineSearch<T>::jump(CpOperand<T>& x, int iter, double resid2, double norm_x2,
                           std::span<T* const> u, std::span<T* const> gram, T* lambda, int last) {
  const double j = std::pow(static_cast<double>(iter - 1), 1.0 / power_);
  const auto rr = static_cast<std::size_t>(r_ * r_);
  const int order = static_cast<int>(dims_.size());
  // C_n = P_n + j (U_n - P_n), with U_last diag(lambda); V = *_n C_n^T C_n.
  for (int n = 0; n < order; ++n) {
    const auto ni = static_cast<std::size_t>(n);
    const index_t in = dims_[ni];
    const auto size = static_cast<std::size_t>(in * r_);
    T* cn = cand_[ni].get();
    c_.copy(cn, u[ni], size);
    if (n == last) c_.scale_columns(in, r_, cn, in, lambda);
    c_.axpy(size, T(-1), prev_[ni].get(), cn);
    c_.copy(m_.get(), prev_[ni].get(), size);
    c_.axpy(size, static_cast<T>(j), cn, m_.get());
    c_.copy(cn, m_.get(), size);
    c_.syrk(Op::trans, r_, in, T(1), cn, in, T(0), n == 0 ? v_.get() : gram_.get(), r_);
    if (n > 0) c_.hadamard(rr, gram_.get(), v_.get());
    x.factor_changed(n);
  }
  // ||X - C||^2 = ||X||^2 + 1^T V 1 - 2 <MTTKRP_last(C), C_last>
  const auto lastu = static_cast<std::size_t>(last);
  const index_t il = dims_[lastu];
  x.mttkrp(last, cand_ptrs_, r_, m_.get());
  const double inner = c_.dot(static_cast<std::size_t>(il * r_), m_.get(), cand_[lastu].get());
  std::vector<T> v(rr);
  c_.download(v.data(), v_.get(), rr);
  double norm_c2 = 0.0;
  for (T e : v) norm_c2 += static_cast<double>(real_part(e));  // 1^T V 1 is real
  const double cand_resid2 = norm_x2 + norm_c2 - 2.0 * inner;
  for (int n = 0; n < order; ++n) x.factor_changed(n);
  if (!(std::isfinite(cand_resid2) && cand_resid2 < resid2)) {
    if (++failures_ == kMaxFailures) {
      power_ += 1.0;
      failures_ = 0;
    }
    return resid2;
  }
  failures_ = 0;
  ++accepted_;
  for (int n = 0; n < order; ++n) {
    const auto ni = static_cast<std::size_t>(n);
    const index_t in = dims_[ni];
    c_.copy(u[ni], cand_[ni].get(), static_cast<std::size_t>(in * r_));
    if (n == last) c_.normalize_columns(ColumnNorm::max_or_one, in, r_, u[ni], in, lambda);
    c_.syrk(Op::trans, r_, in, T(1), u[ni], in, T(0), gram[ni], r_);
  }
  return cand_resid2;
}

template class LineSearch<float>;
template class LineSearch<double>;
template class LineSearch<std::complex<float>>;
template class LineSearch<std::complex<double>>;

}  // namespace tenfold::detail
