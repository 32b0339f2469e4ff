#include <cmath>
#include <string>
#include <vector>

#include "attention/heads.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

using tenfold::detail::Compute;
using tenfold::detail::Op;

// P = W^T Z + b 1^T (H d x n): every token's projection, plus the bias when given.
template <class T>
Matrix<T> project(Compute<T>& c, const Matrix<T>& w, const std::vector<T>& bias,
                  const Matrix<T>& z) {
  Matrix<T> p(w.cols(), z.cols());
  c.gemm(Op::trans, Op::none, w.cols(), z.cols(), w.rows(), T(1), w.data(), w.rows(), z.data(),
         z.rows(), T(0), p.data(), p.rows());
  if (!bias.empty()) {
    for (index_t j = 0; j < p.cols(); ++j)
      for (index_t i = 0; i < p.rows(); ++i) p(i, j) += bias[static_cast<std::size_t>(i)];
  }
  return p;
}

}  // namespace

template <class T>
Tensor<T> scores(const QueryKeyLayer<T>& layer, const Matrix<T>& queries, const Matrix<T>& keys) {
  layer.validate();
  detail::check_tokens(queries, layer.input_dim(), "queries");
  detail::check_tokens(keys, layer.input_dim(), "keys");
  const index_t h = layer.heads, d = layer.head_dim, s = layer.key_dim();
  const index_t nq = queries.cols(), nk = keys.cols();
  const auto host = tenfold::detail::make_compute<T>(tenfold::Backend::cpu);
  Compute<T>& c = *host;
  const Matrix<T> q = project(c, layer.query_weight, layer.query_bias, queries);
  const Matrix<T> k = project(c, layer.key_weight, layer.key_bias, keys);
  // S_h (n_k x n_q) = K_h^T Q_h / sqrt(d), K_h and Q_h the rows h d ... (h+1) d - 1.
  Tensor<T> out({nk, nq, h});
  c.gemm_strided_batched(Op::trans, Op::none, nk, nq, d,
                         static_cast<T>(1.0 / std::sqrt(static_cast<double>(d))), k.data(), s, d,
                         q.data(), s, d, T(0), out.data(), nk, nk * nq, h);
  return out;
}

template <class T>
Tensor<T> scores(const CollaborativeLayer<T>& layer, const Matrix<T>& queries,
                 const Matrix<T>& keys) {
  layer.validate();
  detail::check_tokens(queries, layer.input_dim(), "queries");
  detail::check_tokens(keys, layer.input_dim(), "keys");
  const index_t h = layer.heads(), r = layer.rank();
  const index_t nq = queries.cols(), nk = keys.cols();
  const auto host = tenfold::detail::make_compute<T>(tenfold::Backend::cpu);
  Compute<T>& c = *host;
  // Qt = X^T W~_Q (n_q x R), Kt = Y^T W~_K (n_k x R)
  Matrix<T> qt(nq, r), kt(nk, r), qm(nq, r);
  c.gemm(Op::trans, Op::none, nq, r, queries.rows(), T(1), queries.data(), queries.rows(),
         layer.query.data(), layer.query.rows(), T(0), qt.data(), nq);
  c.gemm(Op::trans, Op::none, nk, r, keys.rows(), T(1), keys.data(), keys.rows(), layer.key.data(),
         layer.key.rows(), T(0), kt.data(), nk);
  // C = Y^T V (n_k x H): the content term of every key and head.
  Matrix<T> content(nk, h);
  if (layer.content.size() > 0) {
    c.gemm(Op::trans, Op::none, nk, h, keys.rows(), T(1), keys.data(), keys.rows(),
           layer.content.data(), layer.content.rows(), T(0), content.data(), nk);
  }
  Tensor<T> out({nk, nq, h});
  std::vector<T> m(static_cast<std::size_t>(r));
  for (index_t g = 0; g < h; ++g) {
    // S_h = scale Kt diag(m_h) Qt^T + c_h 1^T
    for (index_t j = 0; j < r; ++j) m[static_cast<std::size_t>(j)] = layer.mixing(g, j);
    c.copy(qm.data(), qt.data(), static_cast<std::size_t>(qm.size()));
    c.scale_columns(nq, r, qm.data(), nq, m.data());
    T* sh = out.data() + g * nk * nq;
    c.gemm(Op::none, Op::trans, nk, nq, r, static_cast<T>(layer.context_scale), kt.data(), nk,
           qm.data(), nq, T(0), sh, nk);
    for (index_t i = 0; i < nq; ++i)
      for (index_t j = 0; j < nk; ++j) sh[j + i * nk] += content(j, g);
  }
  return out;
}

template Tensor<float> scores<float>(const QueryKeyLayer<float>&, const Matrix<float>&,
                                     const Matrix<float>&);
template Tensor<double> scores<double>(const QueryKeyLayer<double>&, const Matrix<double>&,
                                       const Matrix<double>&);
template Tensor<float> scores<float>(const CollaborativeLayer<float>&, const Matrix<float>&,
                                     const Matrix<float>&);
template Tensor<double> scores<double>(const CollaborativeLayer<double>&, const Matrix<double>&,
                                       const Matrix<double>&);

}  // namespace tenfold::attention
