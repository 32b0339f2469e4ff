#include <cmath>
#include <string>

#include "attention/heads.hpp"
#include "core/names.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

using tenfold::detail::Op;

std::string shape(const char* what, index_t rows, index_t cols) {
  return std::string(what) + " is " + std::to_string(rows) + "x" + std::to_string(cols);
}

template <class T>
void check_finite_matrix(const Matrix<T>& m, const char* what) {
  if (m.size() > 0) check_finite(TensorView<const T>(m.data(), {m.rows(), m.cols()}), what);
}

template <class T>
void check_bias(const std::vector<T>& bias, index_t key_dim, const char* what) {
  if (bias.empty()) return;
  if (static_cast<index_t>(bias.size()) != key_dim) {
    throw DimensionMismatch(std::string(what) + " has " + std::to_string(bias.size()) +
                            " entries, expected H d = " + std::to_string(key_dim));
  }
  check_finite(TensorView<const T>(bias.data(), {key_dim}), what);
}

}  // namespace

template <class T>
void QueryKeyLayer<T>::validate() const {
  if (heads < 1) throw InvalidArgument("heads must be at least 1, got " + std::to_string(heads));
  if (head_dim < 1) {
    throw InvalidArgument("head_dim must be at least 1, got " + std::to_string(head_dim));
  }
  if (query_weight.rows() < 1) {
    throw InvalidArgument(shape("query_weight", query_weight.rows(), query_weight.cols()) +
                          ": the input width D must be at least 1");
  }
  for (const Matrix<T>* w : {&query_weight, &key_weight}) {
    if (w->rows() != query_weight.rows() || w->cols() != key_dim()) {
      throw DimensionMismatch(
          shape(w == &query_weight ? "query_weight" : "key_weight", w->rows(), w->cols()) +
          ", expected D x H d = " + std::to_string(query_weight.rows()) + "x" +
          std::to_string(key_dim()));
    }
  }
  check_finite_matrix(query_weight, "query_weight");
  check_finite_matrix(key_weight, "key_weight");
  check_bias(query_bias, key_dim(), "query_bias");
  check_bias(key_bias, key_dim(), "key_bias");
}

template <class T>
void CollaborativeLayer<T>::validate() const {
  if (mixing.rows() < 1 || mixing.cols() < 1) {
    throw InvalidArgument(shape("mixing", mixing.rows(), mixing.cols()) +
                          ", needs at least one head and rank >= 1");
  }
  if (query.rows() < 1) throw InvalidArgument(shape("query", query.rows(), query.cols()));
  const index_t r = rank();
  if (query.cols() != r || key.cols() != r || key.rows() != query.rows()) {
    throw DimensionMismatch(shape("query", query.rows(), query.cols()) + " and " +
                            shape("key", key.rows(), key.cols()) + ", expected D x R with R = " +
                            std::to_string(r) + " (the mixing's columns)");
  }
  if (content.size() > 0 && (content.rows() != input_dim() || content.cols() != heads())) {
    throw DimensionMismatch(shape("content", content.rows(), content.cols()) +
                            ", expected D x H = " + std::to_string(input_dim()) + "x" +
                            std::to_string(heads()) + " or empty");
  }
  if (!std::isfinite(context_scale)) {
    throw InvalidArgument("context_scale must be finite, got " + std::to_string(context_scale));
  }
  check_finite_matrix(mixing, "mixing");
  check_finite_matrix(query, "query");
  check_finite_matrix(key, "key");
  check_finite_matrix(content, "content");
}

template <class T>
KTensor<T> qk_tensor(const QueryKeyLayer<T>& layer) {
  layer.validate();
  const index_t h = layer.heads, d = layer.head_dim, s = layer.key_dim();
  // T = [[1/sqrt(d); E, W_Q, W_K]] with E(g, j) = 1 when column j belongs to head g.
  Matrix<T> indicator(h, s);
  for (index_t j = 0; j < s; ++j) indicator(j / d, j) = T(1);
  const auto w = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  return KTensor<T>(std::vector<T>(static_cast<std::size_t>(s), w),
                    {std::move(indicator), layer.query_weight, layer.key_weight});
}

template <class T>
CollaborativeLayer<T> exact(const QueryKeyLayer<T>& layer) {
  KTensor<T> t = qk_tensor(layer);
  CollaborativeLayer<T> out;
  // mixing = E diag(1/sqrt(d)): head h weights its own d columns.
  out.mixing = std::move(t.factors[0]);
  for (index_t j = 0; j < out.mixing.cols(); ++j) {
    for (index_t g = 0; g < out.mixing.rows(); ++g) out.mixing(g, j) *= t.weights[0];
  }
  out.query = std::move(t.factors[1]);
  out.key = std::move(t.factors[2]);
  out.content = detail::content_vectors(layer);
  return out;
}

namespace {

constexpr ::tenfold::detail::Named<Init> inits[] = {{Init::structured, "structured"},
                                                    {Init::heads, "heads"},
                                                    {Init::nvecs, "nvecs"},
                                                    {Init::random, "random"}};

}  // namespace

std::string_view to_string(Init init) { return ::tenfold::detail::name_of<Init>(inits, init); }

Init parse_init(std::string_view name) {
  return ::tenfold::detail::parse_named<Init>(inits, name, "init");
}

namespace detail {

template <class T>
Matrix<double> to_double(const Matrix<T>& m) {
  Matrix<double> out(m.rows(), m.cols());
  for (index_t i = 0; i < m.size(); ++i) out.data()[i] = static_cast<double>(m.data()[i]);
  return out;
}

std::vector<double> head_grams(tenfold::detail::Compute<double>& c, const Matrix<double>& a,
                               const Matrix<double>& b, index_t heads, index_t d) {
  const index_t rows = a.rows();
  std::vector<double> g(static_cast<std::size_t>(heads * d * d));
  c.gemm_strided_batched(Op::trans, Op::none, d, d, rows, 1.0, a.data(), rows, rows * d, b.data(),
                         rows, rows * d, 0.0, g.data(), d, d * d, heads);
  return g;
}

double qk_norm_squared(tenfold::detail::Compute<double>& c, const Matrix<double>& wq,
                       const Matrix<double>& wk, index_t heads, index_t d) {
  // ||Q_h K_h^T||^2 = <Q_h^T Q_h, K_h^T K_h>
  std::vector<double> gq = head_grams(c, wq, wq, heads, d);
  std::vector<double> gk = head_grams(c, wk, wk, heads, d);
  return c.dot(gq.size(), gq.data(), gk.data()) / static_cast<double>(d);
}

template <class T>
Matrix<T> content_vectors(const QueryKeyLayer<T>& layer) {
  if (layer.query_bias.empty()) return {};
  const index_t h = layer.heads, d = layer.head_dim, rows = layer.input_dim();
  const auto host = host_compute();
  tenfold::detail::Compute<double>& c = *host;
  const AsDouble as_double(layer.key_weight);
  const Matrix<double>& wk = as_double.get();
  std::vector<double> bq(layer.query_bias.begin(), layer.query_bias.end());
  Matrix<double> v(rows, h);
  // v_h = W_K^h b_Q^h / sqrt(d)
  c.gemm_strided_batched(Op::none, Op::none, rows, 1, d, 1.0 / std::sqrt(static_cast<double>(d)),
                         wk.data(), rows, rows * d, bq.data(), d, d, 0.0, v.data(), rows, rows, h);
  Matrix<T> out(rows, h);
  for (index_t i = 0; i < v.size(); ++i) out.data()[i] = static_cast<T>(v.data()[i]);
  return out;
}

template <class T>
void check_tokens(const Matrix<T>& tokens, index_t input_dim, const char* what) {
  if (tokens.rows() != input_dim) {
    throw DimensionMismatch(
        shape(what, tokens.rows(), tokens.cols()) +
        ", expected D rows (one token per column), D = " + std::to_string(input_dim));
  }
  check_finite_matrix(tokens, what);
}

template Matrix<double> to_double<float>(const Matrix<float>&);
template Matrix<double> to_double<double>(const Matrix<double>&);
template Matrix<float> content_vectors<float>(const QueryKeyLayer<float>&);
template Matrix<double> content_vectors<double>(const QueryKeyLayer<double>&);
template void check_tokens<float>(const Matrix<float>&, index_t, const char*);
template void check_tokens<double>(const Matrix<double>&, index_t, const char*);

}  // namespace detail

template struct QueryKeyLayer<float>;
template struct QueryKeyLayer<double>;
template struct CollaborativeLayer<float>;
template struct CollaborativeLayer<double>;
template KTensor<float> qk_tensor<float>(const QueryKeyLayer<float>&);
template KTensor<double> qk_tensor<double>(const QueryKeyLayer<double>&);
template CollaborativeLayer<float> exact<float>(const QueryKeyLayer<float>&);
template CollaborativeLayer<double> exact<double>(const QueryKeyLayer<double>&);

}  // namespace tenfold::attention
