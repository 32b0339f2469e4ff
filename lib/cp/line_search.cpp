#include "cp/line_search.hpp"

#include <algorithm>
#include <cmath>
#include <complex>

#include "core/names.hpp"

namespace tenfold {

namespace {
constexpr detail::Named<CpLineSearchRule> cp_line_search_rules[] = {
    {CpLineSearchRule::tenfold, "tenfold"}, {CpLineSearchRule::tensorly, "tensorly"}};
}  // namespace

std::string_view to_string(CpLineSearchRule rule) {
  return detail::name_of<CpLineSearchRule>(cp_line_search_rules, rule);
}

CpLineSearchRule parse_cp_line_search_rule(std::string_view name) {
  return detail::parse_named<CpLineSearchRule>(cp_line_search_rules, name, "line search rule");
}

namespace detail {

namespace {
constexpr int kMaxFailures = 4;
}

template <class T>
LineSearch<T>::LineSearch(Compute<T>& c, const std::vector<index_t>& dims, index_t rank,
                          CpLineSearchRule rule, const std::vector<int>& fixed_modes)
    : c_(c), dims_(dims), r_(rank), rule_(rule), fixed_(dims.size(), false) {
  for (int n : fixed_modes) fixed_[static_cast<std::size_t>(n)] = true;
  const auto rr = static_cast<std::size_t>(rank * rank);
  const auto r = static_cast<std::size_t>(rank);
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
  scale_ = Buffer<T>(c, r);
  // TensorLy's factors start as the given ones (a start's weights reach no update).
  d_.assign(dims.size(), std::vector<double>(r, 1.0));
}

template <class T>
void LineSearch<T>::factor_updated(int n, const T* lambda) {
  if (!tensorly()) return;
  std::vector<double>& dn = d_[static_cast<std::size_t>(n)];
  if (lambda == nullptr) {
    std::fill(dn.begin(), dn.end(), 1.0);
    return;
  }
  // TensorLy's update solves with its unnormalised factors:
  // U_n^TL = (U_n diag(s_n)) / prod_{m != n} d_m, so d_n = s_n / prod_{m != n} d_m.
  std::vector<T> s(static_cast<std::size_t>(r_));
  c_.download(s.data(), lambda, s.size());
  for (std::size_t j = 0; j < s.size(); ++j) {
    double p = 1.0;
    for (std::size_t m = 0; m < d_.size(); ++m)
      if (m != static_cast<std::size_t>(n)) p *= d_[m][j];
    dn[j] = static_cast<double>(real_part(s[j])) / p;  // weights are real
  }
}

template <class T>
void LineSearch<T>::remember(std::span<T* const> u, const T* lambda, int last) {
  for (std::size_t n = 0; n < dims_.size(); ++n) {
    const index_t in = dims_[n];
    c_.copy(prev_[n].get(), u[n], static_cast<std::size_t>(in * r_));
    if (tensorly()) {
      const std::vector<T> d(d_[n].begin(), d_[n].end());
      c_.upload(scale_.get(), d.data(), d.size());
      c_.scale_columns(in, r_, prev_[n].get(), in, scale_.get());
    } else if (static_cast<int>(n) == last) {
      c_.scale_columns(in, r_, prev_[n].get(), in, lambda);
    }
  }
}

template <class T>
double LineSearch<T>::jump(CpOperand<T>& x, int iter, double resid2, double previous_resid2,
                           double norm_x2, std::span<T* const> u, std::span<T* const> gram,
                           T* lambda, int last) {
  const double j = std::pow(static_cast<double>(iter - 1), 1.0 / power_);
  const auto rr = static_cast<std::size_t>(r_ * r_);
  const int order = static_cast<int>(dims_.size());
  // C_n = P_n + j (U_n - P_n), U_n at the scales P_n has (Tenfold: U_last diag(lambda);
  // TensorLy: U_n diag(d_n)); V = *_n C_n^T C_n.
  for (int n = 0; n < order; ++n) {
    const auto ni = static_cast<std::size_t>(n);
    const index_t in = dims_[ni];
    const auto size = static_cast<std::size_t>(in * r_);
    T* cn = cand_[ni].get();
    c_.copy(cn, u[ni], size);
    if (tensorly()) {
      const std::vector<T> d(d_[ni].begin(), d_[ni].end());
      c_.upload(scale_.get(), d.data(), d.size());
      c_.scale_columns(in, r_, cn, in, scale_.get());
    } else if (n == last) {
      c_.scale_columns(in, r_, cn, in, lambda);
    }
    c_.axpy(size, T(-1), prev_[ni].get(), cn);
    c_.copy(m_.get(), prev_[ni].get(), size);
    c_.axpy(size, static_cast<T>(j), cn, m_.get());
    c_.copy(cn, m_.get(), size);
    c_.syrk(Op::trans, r_, in, T(1), cn, in, T(0), n == 0 ? v_.get() : gram_.get(), r_);
    if (n > 0) c_.hadamard(rr, gram_.get(), v_.get());
    x.factor_changed(n);
  }
  // The operand's own error of C, or ||X - C||^2 = ||X||^2 + 1^T V 1 - 2 <MTTKRP_last(C), C_last>
  c_.fill(scale_.get(), static_cast<std::size_t>(r_), T(1));
  double cand_resid2 = x.model_error2(cand_ptrs_, scale_.get(), r_);
  if (cand_resid2 < 0.0) {
    const auto lastu = static_cast<std::size_t>(last);
    const index_t il = dims_[lastu];
    x.mttkrp(last, cand_ptrs_, r_, m_.get());
    const double inner = c_.dot(static_cast<std::size_t>(il * r_), m_.get(), cand_[lastu].get());
    std::vector<T> v(rr);
    c_.download(v.data(), v_.get(), rr);
    double norm_c2 = 0.0;
    for (T e : v) norm_c2 += static_cast<double>(real_part(e));  // 1^T V 1 is real
    cand_resid2 = norm_x2 + norm_c2 - 2.0 * inner;
  }
  for (int n = 0; n < order; ++n) x.factor_changed(n);
  const double reference = tensorly() ? previous_resid2 : resid2;
  if (!(std::isfinite(cand_resid2) && cand_resid2 < reference)) {
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
    // A fixed factor's candidate is P_n (its step is zero): U_n stays as it is.
    if (fixed_[ni]) continue;
    c_.copy(u[ni], cand_[ni].get(), static_cast<std::size_t>(in * r_));
    if (n == last) c_.normalize_columns(ColumnNorm::max_or_one, in, r_, u[ni], in, lambda);
    c_.syrk(Op::trans, r_, in, T(1), u[ni], in, T(0), gram[ni], r_);
    // TensorLy's factors are now C_n: d_n = 1, and C_last = U_last diag(lambda).
    if (!tensorly()) continue;
    if (n != last) {
      std::fill(d_[ni].begin(), d_[ni].end(), 1.0);
      continue;
    }
    std::vector<T> l(static_cast<std::size_t>(r_));
    c_.download(l.data(), lambda, l.size());
    d_[ni].resize(l.size());
    std::transform(l.begin(), l.end(), d_[ni].begin(),
                   [](T w) { return static_cast<double>(real_part(w)); });  // norms: real
  }
  return cand_resid2;
}

template class LineSearch<float>;
template class LineSearch<double>;
template class LineSearch<std::complex<float>>;
template class LineSearch<std::complex<double>>;

}  // namespace detail
}  // namespace tenfold
