#include "cp/kruskal_operand.hpp"

#include <algorithm>

#include "cp/dense_operand.hpp"

namespace tenfold::detail {

template <class T>
KruskalOperand<T>::KruskalOperand(Compute<T>& c, const KTensor<T>& x)
    : CpOperand<T>(c), dims_(x.dims()), s_(x.rank()) {
  for (const Matrix<T>& f : x.factors) {
    if (c.host_memory()) {
      a_.push_back(f.data());
      continue;
    }
    a_copy_.emplace_back(c, static_cast<std::size_t>(f.size()));
    c.upload(a_copy_.back().get(), f.data(), static_cast<std::size_t>(f.size()));
    a_.push_back(a_copy_.back().get());
  }
  mu_ = Buffer<T>(c, static_cast<std::size_t>(s_));
  c.upload(mu_.get(), x.weights.data(), static_cast<std::size_t>(s_));
  cross_ = CrossProducts<T>(a_, dims_, std::vector<index_t>(dims_.size(), s_));
}

template <class T>
void KruskalOperand<T>::weighted_product(int n, const std::vector<const T*>& blocks, index_t cols,
                                         T* w) {
  Compute<T>& c = this->c_;
  const auto size = static_cast<std::size_t>(s_ * cols);
  // mu_cols = mu 1^T (S x cols): every column is mu (filled once per width).
  T* mc = ensure(c, mu_cols_, size);
  if (mu_cols_width_ != cols) {
    for (index_t j = 0; j < cols; ++j) c.copy(mc + j * s_, mu_.get(), static_cast<std::size_t>(s_));
    mu_cols_width_ = cols;
  }
  // W = diag(mu) (*_{m != n} block_m)
  c.copy(w, mc, size);
  for (int m = 0; m < this->order(); ++m) {
    if (m != n) c.hadamard(size, blocks[static_cast<std::size_t>(m)], w);
  }
}

template <class T>
double KruskalOperand<T>::norm_squared() {
  Compute<T>& c = this->c_;
  const auto ss = static_cast<std::size_t>(s_ * s_);
  // W = *_m G_m, G_m = A_m^T A_m
  Buffer<T> w(c, ss), g(c, ss);
  for (int m = 0; m < this->order(); ++m) {
    const index_t rows = dims_[static_cast<std::size_t>(m)];
    c.syrk(Op::trans, s_, rows, T(1), a_[static_cast<std::size_t>(m)], rows, T(0),
           m == 0 ? w.get() : g.get(), s_);
    if (m > 0) c.hadamard(ss, g.get(), w.get());
  }
  // ||X||^2 = mu^T W mu = sum_j <mu, W(:, j) mu_j>, every sum in double.
  c.scale_columns(s_, s_, w.get(), s_, mu_.get());
  double sum = 0.0;
  for (index_t j = 0; j < s_; ++j)
    sum += c.dot(static_cast<std::size_t>(s_), mu_.get(), w.get() + j * s_);
  return sum;
}

template <class T>
void KruskalOperand<T>::mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) {
  Compute<T>& c = this->c_;
  // C_m = A_m^T U_m (S x R)
  const std::vector<const T*> blocks = cross_.get(c, n, factors, rank);
  T* w = ensure(c, w_, static_cast<std::size_t>(s_ * rank));
  weighted_product(n, blocks, rank, w);
  // out = A_n W
  const auto ni = static_cast<std::size_t>(n);
  c.gemm(Op::none, Op::none, dims_[ni], rank, s_, T(1), a_[ni], dims_[ni], w, s_, T(0), out,
         dims_[ni]);
}

template <class T>
double KruskalOperand<T>::workspace_elements(index_t rank, bool mode_grams) const {
  const double s = static_cast<double>(s_), r = static_cast<double>(rank);
  const double order = static_cast<double>(dims_.size());
  double imax = 0.0;
  for (index_t d : dims_) imax = std::max(imax, static_cast<double>(d));
  // cross_ (one S x R per mode), w_ and mu_cols_; the norm's two S x S temporaries;
  // mode_gram's N - 1 Grams, W and A_n W, with mu_cols_ grown to S x S.
  const double mttkrp = (order + 2.0) * s * r;
  const double grams = mode_grams ? (order + 1.0) * s * s + imax * s : 0.0;
  return mttkrp + std::max(2.0 * s * s, grams);
}

template <class T>
void KruskalOperand<T>::mode_gram(int n, T* out) {
  Compute<T>& c = this->c_;
  const auto ss = static_cast<std::size_t>(s_ * s_);
  const auto ni = static_cast<std::size_t>(n);
  std::vector<Buffer<T>> grams;
  std::vector<const T*> blocks(dims_.size());
  for (int m = 0; m < this->order(); ++m) {
    if (m == n) continue;
    grams.emplace_back(c, ss);
    c.syrk(Op::trans, s_, dims_[static_cast<std::size_t>(m)], T(1), a_[static_cast<std::size_t>(m)],
           dims_[static_cast<std::size_t>(m)], T(0), grams.back().get(), s_);
    blocks[static_cast<std::size_t>(m)] = grams.back().get();
  }
  // X_(n) X_(n)^T = A_n diag(mu) (*_{m!=n} G_m) diag(mu) A_n^T
  Buffer<T> w(c, ss), aw(c, static_cast<std::size_t>(dims_[ni] * s_));
  weighted_product(n, blocks, s_, w.get());
  c.scale_columns(s_, s_, w.get(), s_, mu_.get());
  c.gemm(Op::none, Op::none, dims_[ni], s_, s_, T(1), a_[ni], dims_[ni], w.get(), s_, T(0),
         aw.get(), dims_[ni]);
  c.gemm(Op::none, Op::trans, dims_[ni], dims_[ni], s_, T(1), aw.get(), dims_[ni], a_[ni],
         dims_[ni], T(0), out, dims_[ni]);
}

template class KruskalOperand<float>;
template class KruskalOperand<double>;

}  // namespace tenfold::detail
