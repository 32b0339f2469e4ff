#include "cp/tucker_operand.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/multilinear.hpp"
#include "cp/cp_als.hpp"
#include "tenfold/error.hpp"

namespace tenfold {
namespace detail {

template <class T>
TuckerOperand<T>::TuckerOperand(Compute<T>& c, const TTensor<T>& x)
    : CpOperand<T>(c), dims_(x.dims()), ranks_(x.ranks()), core_(c, x.core.view()) {
  const std::size_t order = dims_.size();
  for (std::size_t m = 0; m < order; ++m) {
    const Matrix<T>& f = x.factors[m];
    u_.emplace_back(c, static_cast<std::size_t>(f.size()));
    c.upload(u_.back().get(), f.data(), static_cast<std::size_t>(f.size()));
    // Gamma_m = U_m^T U_m
    gamma_.emplace_back(c, static_cast<std::size_t>(ranks_[m] * ranks_[m]));
    c.syrk(Op::trans, ranks_[m], dims_[m], T(1), u_.back().get(), dims_[m], T(0),
           gamma_.back().get(), ranks_[m]);
  }
  std::vector<const T*> u;
  for (const Buffer<T>& um : u_) u.push_back(um.get());
  b_ = CrossProducts<T>(std::move(u), dims_, ranks_);
}

template <class T>
const T* TuckerOperand<T>::weighted_core(int skip) {
  std::vector<ModeProduct<T>> products;
  for (int m = 0; m < this->order(); ++m) {
    const index_t r = ranks_[static_cast<std::size_t>(m)];
    if (m != skip)
      products.push_back({m, Op::none, gamma_[static_cast<std::size_t>(m)].get(), r, r});
  }
  std::vector<index_t> shape = ranks_;
  return ttm_chain<T>(this->c_, core_.data(), shape, products, w0_, w1_);
}

template <class T>
double TuckerOperand<T>::norm_squared() {
  if (norm_squared_ < 0.0) {
    // ||X||^2 = <G, G x_0 Gamma_0 ... x_{N-1} Gamma_{N-1}>
    const T* w = weighted_core(-1);
    norm_squared_ = std::max(
        0.0, this->c_.dot(static_cast<std::size_t>(checked_numel(ranks_)), core_.data(), w));
  }
  return norm_squared_;
}

template <class T>
void TuckerOperand<T>::factor_changed(int m) {
  b_.changed(m);
  core_.factor_changed(m);
}

template <class T>
void TuckerOperand<T>::mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) {
  Compute<T>& c = this->c_;
  // B_m = U_m^T A_m (r_m x R)
  const std::vector<const T*> b = b_.get(c, n, factors, rank);
  // M_n = U_n MTTKRP_G(n; {B_m})
  const auto ni = static_cast<std::size_t>(n);
  T* mg = ensure(c, m_, static_cast<std::size_t>(ranks_[ni] * rank));
  core_.mttkrp(n, b, rank, mg);
  c.gemm(Op::none, Op::none, dims_[ni], rank, ranks_[ni], T(1), u_[ni].get(), dims_[ni], mg,
         ranks_[ni], T(0), out, dims_[ni]);
}

template <class T>
double TuckerOperand<T>::workspace_elements(index_t rank, bool mode_grams) const {
  const double r = static_cast<double>(rank);
  double ranks = 0.0, rmax = 0.0, gram = 0.0;
  for (std::size_t m = 0; m < dims_.size(); ++m) {
    const double rm = static_cast<double>(ranks_[m]);
    ranks += rm;
    rmax = std::max(rmax, rm);
    gram = std::max(gram, rm * rm + static_cast<double>(dims_[m]) * rm);
  }
  // b_ (U_m^T A_m per mode), m_, the core's MTTKRP buffers, the two weighted-core
  // buffers; mode_gram's H and U_n H.
  return ranks * r + rmax * r + core_.workspace_elements(rank, false) +
         2.0 * static_cast<double>(checked_numel(ranks_)) + (mode_grams ? gram : 0.0);
}

template <class T>
void TuckerOperand<T>::mode_gram(int n, T* out) {
  Compute<T>& c = this->c_;
  const auto ni = static_cast<std::size_t>(n);
  const index_t in = dims_[ni], rn = ranks_[ni];
  // H = G_(n) W_(n)^T (r_n x r_n), W = G x_{m != n} Gamma_m
  const T* w = weighted_core(n);
  T* h = ensure(c, h_, static_cast<std::size_t>(rn * rn));
  detail::mode_gram(c, core_.data(), ranks_, n, h, w);
  // X_(n) X_(n)^T = U_n H U_n^T
  T* uh = ensure(c, uh_, static_cast<std::size_t>(in * rn));
  c.gemm(Op::none, Op::none, in, rn, rn, T(1), u_[ni].get(), in, h, rn, T(0), uh, in);
  c.gemm(Op::none, Op::trans, in, in, rn, T(1), uh, in, u_[ni].get(), in, T(0), out, in);
}

template class TuckerOperand<float>;
template class TuckerOperand<double>;

}  // namespace detail

template <class T>
CpResult<T> cp_als(const TTensor<T>& x, const CpOptions& options, CpStart<T> initial_factors) {
  // Row-major: the model in NumPy axis order (core reversed, factors reversed).
  return detail::cp_als_of_model<detail::TuckerOperand>(
      x, options, initial_factors, "a Tucker model of ", [](const TTensor<T>& t) {
        return TTensor<T>(detail::reverse_modes(t.core.view()), detail::reversed(t.factors));
      });
}

template CpResult<float> cp_als<float>(const TTensor<float>&, const CpOptions&, CpStart<float>);
template CpResult<double> cp_als<double>(const TTensor<double>&, const CpOptions&, CpStart<double>);

}  // namespace tenfold
