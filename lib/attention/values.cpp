// The latent value cache (include/tenfold/kv_cache.hpp, docs/kv-cache.md): the output
// weighting F_g of each value head, one whitened and weighted SVD (of the keys beside the
// values for the joint latent), the latent, its rebuild maps and o_proj with the rebuild
// folded in.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "attention/heads.hpp"
#include "attention/moments.hpp"
#include "attention/rotary_solver.hpp"
#include "tenfold/error.hpp"
#include "tenfold/kv_cache.hpp"

namespace tenfold::attention {
namespace {

using tenfold::detail::Compute;
using tenfold::detail::Op;

std::string text(index_t v) { return std::to_string(v); }

/// F_g (d x d) with F_g F_g^T = sum_{h in g} W_O^h^T W_O^h: rows h d ... (h + 1) d of
/// the (H d) x E output weight are W_O^h^T.
std::vector<Matrix<double>> output_roots(Compute<double>& c, const Matrix<double>& wo,
                                         index_t heads, index_t groups, index_t d) {
  std::vector<Matrix<double>> roots;
  const index_t per = heads / groups, e = wo.cols(), hd = wo.rows();
  for (index_t g = 0; g < groups; ++g) {
    Matrix<double> m(d, d);
    for (index_t h = g * per; h < (g + 1) * per; ++h) {
      c.gemm(Op::none, Op::trans, d, d, e, 1.0, &wo(h * d, 0), hd, &wo(h * d, 0), hd, 1.0, m.data(),
             d);
    }
    roots.push_back(detail::psd_factor(m));
  }
  return roots;
}

/// Y blockdiag(F_1 ... F_G): each value head's d columns times its root.
Matrix<double> weigh(Compute<double>& c, const Matrix<double>& y,
                     const std::vector<Matrix<double>>& roots) {
  Matrix<double> out(y.rows(), y.cols());
  const index_t d = roots.front().rows();
  for (std::size_t g = 0; g < roots.size(); ++g) {
    const index_t at = static_cast<index_t>(g) * d;
    c.gemm(Op::none, Op::none, y.rows(), d, d, 1.0, &y(0, at), y.rows(), roots[g].data(), d, 0.0,
           &out(0, at), out.rows());
  }
  return out;
}

/// tr(Y^T S Y) (||Y||^2 without S).
double energy(Compute<double>& c, const Matrix<double>& y, const Matrix<double>* s) {
  if (!s) return c.sum_squares(y.values().size(), y.data());
  Matrix<double> sy(y.rows(), y.cols());
  c.gemm(Op::none, Op::none, y.rows(), y.cols(), y.rows(), 1.0, s->data(), y.rows(), y.data(),
         y.rows(), 0.0, sy.data(), sy.rows());
  return c.dot(y.values().size(), y.data(), sy.data());
}

/// sqrt(tr(D^T S D) / tr(W^T S W)), D = W - latent expand^T: the relative error of the rebuild
/// (0 for W = 0).
double relative(Compute<double>& c, const Matrix<double>& w, const Matrix<double>& latent,
                const Matrix<double>& expand, const std::vector<Matrix<double>>& roots,
                const Matrix<double>* s) {
  Matrix<double> diff = w;
  if (latent.cols() > 0) {
    c.gemm(Op::none, Op::trans, w.rows(), w.cols(), latent.cols(), -1.0, latent.data(), w.rows(),
           expand.data(), w.cols(), 1.0, diff.data(), w.rows());
  }
  const auto weighed = [&](const Matrix<double>& m) {
    return roots.empty() ? energy(c, m, s) : energy(c, weigh(c, m, roots), s);
  };
  const double den = weighed(w);
  return den > 0.0 ? std::sqrt(weighed(diff) / den) : 0.0;
}

/// Columns a and b side by side, each scaled to unit Frobenius norm (kept when zero), then a
/// by `emphasis`.
Matrix<double> side_by_side(Compute<double>& c, const Matrix<double>& a, const Matrix<double>& b,
                            double emphasis) {
  Matrix<double> out(a.rows(), a.cols() + b.cols());
  const double na = std::sqrt(c.sum_squares(a.values().size(), a.data()));
  const double nb = std::sqrt(c.sum_squares(b.values().size(), b.data()));
  const double sa = emphasis / (na > 0.0 ? na : 1.0), sb = nb > 0.0 ? 1.0 / nb : 1.0;
  for (index_t j = 0; j < a.cols(); ++j)
    for (index_t i = 0; i < a.rows(); ++i) out(i, j) = sa * a(i, j);
  for (index_t j = 0; j < b.cols(); ++j)
    for (index_t i = 0; i < b.rows(); ++i) out(i, a.cols() + j) = sb * b(i, j);
  return out;
}

/// L^T W (W itself without whitening).
Matrix<double> whitened(Compute<double>& c, const Matrix<double>& chol, const Matrix<double>& w) {
  if (chol.rows() == 0) return w;
  Matrix<double> out(w.rows(), w.cols());
  c.gemm(Op::trans, Op::none, w.rows(), w.cols(), w.rows(), 1.0, chol.data(), w.rows(), w.data(),
         w.rows(), 0.0, out.data(), out.rows());
  return out;
}

}  // namespace

template <class T>
void ValueLayer<T>::validate() const {
  if (key_heads < 1 || heads < 1 || heads % key_heads) {
    throw InvalidArgument("heads (" + text(heads) + ") must be a positive multiple of key_heads (" +
                          text(key_heads) + ")");
  }
  if (head_dim < 1) throw InvalidArgument("head_dim must be at least 1, got " + text(head_dim));
  const index_t dim = value_weight.rows();
  if (dim < 1 || value_weight.cols() != key_heads * head_dim) {
    throw DimensionMismatch("value_weight is " + text(dim) + "x" + text(value_weight.cols()) +
                            ", expected D x G d with G d = " + text(key_heads * head_dim));
  }
  if (output_weight.rows() != heads * head_dim || output_weight.cols() < 1) {
    throw DimensionMismatch("output_weight is " + text(output_weight.rows()) + "x" +
                            text(output_weight.cols()) +
                            ", expected H d x E with H d = " + text(heads * head_dim));
  }
  if (!value_bias.empty() && static_cast<index_t>(value_bias.size()) != key_heads * head_dim) {
    throw DimensionMismatch("value_bias has " + text(static_cast<index_t>(value_bias.size())) +
                            " entries, expected G d = " + text(key_heads * head_dim));
  }
  if (!value_bias.empty()) {
    check_finite(TensorView<const T>(value_bias.data(), {key_heads * head_dim}), "value_bias");
  }
  check_finite(TensorView<const T>(value_weight.data(), {dim, value_weight.cols()}),
               "value_weight");
  check_finite(
      TensorView<const T>(output_weight.data(), {output_weight.rows(), output_weight.cols()}),
      "output_weight");
}

namespace {

/// The key side the joint latent reads: D x G d, its bias G d or empty, finite.
template <class T>
void validate_keys(const ValueLayer<T>& layer) {
  const index_t gd = layer.key_heads * layer.head_dim;
  if (layer.key_weight.rows() != layer.input_dim() || layer.key_weight.cols() != gd) {
    throw DimensionMismatch(
        "key_weight is " + text(layer.key_weight.rows()) + "x" + text(layer.key_weight.cols()) +
        ", expected D x G d = " + text(layer.input_dim()) + "x" + text(gd) + " (the joint latent)");
  }
  if (!layer.key_bias.empty() && static_cast<index_t>(layer.key_bias.size()) != gd) {
    throw DimensionMismatch("key_bias has " + text(static_cast<index_t>(layer.key_bias.size())) +
                            " entries, expected G d = " + text(gd));
  }
  if (!layer.key_bias.empty()) {
    check_finite(TensorView<const T>(layer.key_bias.data(), {gd}), "key_bias");
  }
  check_finite(TensorView<const T>(layer.key_weight.data(), {layer.input_dim(), gd}), "key_weight");
  if (layer.query_weight.cols() == 0) return;
  const index_t hd = layer.heads * layer.head_dim;
  if (layer.query_weight.rows() != layer.input_dim() || layer.query_weight.cols() != hd) {
    throw DimensionMismatch("query_weight is " + text(layer.query_weight.rows()) + "x" +
                            text(layer.query_weight.cols()) +
                            ", expected D x H d = " + text(layer.input_dim()) + "x" + text(hd));
  }
  if (!layer.query_bias.empty() && static_cast<index_t>(layer.query_bias.size()) != hd) {
    throw DimensionMismatch("query_bias has " +
                            text(static_cast<index_t>(layer.query_bias.size())) +
                            " entries, expected H d = " + text(hd));
  }
  check_finite(TensorView<const T>(layer.query_weight.data(), {layer.input_dim(), hd}),
               "query_weight");
  if (!layer.query_bias.empty()) {
    check_finite(TensorView<const T>(layer.query_bias.data(), {hd}), "query_bias");
  }
}

/// Joint: the options the keys' weighting reads, checked.
void validate_key_options(const ValueOptions& o, bool queries, index_t d) {
  if (!(o.key_emphasis > 0.0) || !std::isfinite(o.key_emphasis)) {
    throw InvalidOption("key_emphasis",
                        "must be finite and > 0, got " + std::to_string(o.key_emphasis));
  }
  if (!queries) return;
  if (d % 2) {
    throw InvalidArgument("head_dim " + text(d) +
                          " is odd: keys weighted by the queries need RoPE's frequency pairs");
  }
  detail::check_offsets(o.inv_freq, o.context, d / 2, true);
}

}  // namespace

template <class T>
ValueLatent value_latent(const ValueLayer<T>& layer, const ValueOptions& o,
                         const Matrix<double>* moment) {
  const auto start = std::chrono::steady_clock::now();
  layer.validate();
  if (o.joint) {
    validate_keys(layer);
    validate_key_options(o, layer.query_weight.cols() > 0, layer.head_dim);
  }
  const index_t heads = layer.heads, groups = layer.key_heads, d = layer.head_dim;
  const index_t gd = groups * d, e = layer.output_weight.cols(), most = o.joint ? 2 * gd : gd;
  if (o.values < 0 || o.values > most) {
    throw InvalidOption("values", std::string("must be in [1, ") +
                                      (o.joint ? "2 G d = " : "G d = ") + text(most) +
                                      "] (0: full), got " + text(o.values));
  }
  if (!(o.damping >= 0.0) || !std::isfinite(o.damping)) {
    throw InvalidOption("damping", "must be finite and >= 0");
  }
  const bool biased = !layer.value_bias.empty() || (o.joint && !layer.key_bias.empty());
  const bool full = o.values == 0;
  const Matrix<double> wv = detail::augmented(layer.value_weight, layer.value_bias, biased);
  const Matrix<double> wk =
      o.joint ? detail::augmented(layer.key_weight, layer.key_bias, biased) : Matrix<double>();
  const index_t dim = wv.rows();
  if (moment) {
    validate_moment(*moment, dim, "value input moment", std::numeric_limits<float>::epsilon());
  }
  const auto host = detail::host_compute();
  Compute<double>& c = *host;
  const detail::AsDouble wo_double(layer.output_weight);  // a view when T is double
  const Matrix<double>& wo = wo_double.get();
  const std::vector<Matrix<double>> roots = output_roots(c, wo, heads, groups, d);

  // X = L^T W_V blockdiag(F) (no L without whitening, and for "full"); joint:
  // X = [a L^T W_K blockdiag(P^(1/2)) / n_K, L^T W_V blockdiag(F) / n_V], each side of unit
  // energy, then the keys' times a; P_g the queries' coherence (none without query weights
  // and for "full", where a weight could drop rank). Its SVD.
  Matrix<double> chol;
  if (moment && !full) chol = detail::damped_cholesky(*moment, o.damping, "the value input moment");
  Matrix<double> x = weigh(c, whitened(c, chol, wv), roots);
  if (o.joint) {
    Matrix<double> xk = whitened(c, chol, wk);
    if (layer.query_weight.cols() > 0 && !full) {
      const Matrix<double> wq = detail::augmented(
          layer.query_weight, biased ? layer.query_bias : std::vector<T>{}, biased);
      std::vector<Matrix<double>> key_roots;
      for (const Matrix<double>& p : detail::query_coherence(
               c, wq, moment, heads, groups, d, detail::offset_phases(o.inv_freq, o.context)))
        key_roots.push_back(detail::psd_factor(p));
      xk = weigh(c, xk, key_roots);
    }
    x = side_by_side(c, xk, x, o.key_emphasis);
  }
  auto [u, sigma] = detail::left_singular(x);
  Matrix<double> sv(1, static_cast<index_t>(sigma.size()));
  std::copy(sigma.begin(), sigma.end(), sv.values().begin());
  const index_t k = detail::choose_ranks(sv, full, {}, o.values, "latent values").front();

  // Latent A^T = L^{-T} U_k (D' x k), rebuilds B = W^T L U_k (G d x k) of values and keys.
  Matrix<double> basis_t(k, dim), lu(dim, k);  // U_k^T, then L U_k
  for (index_t j = 0; j < k; ++j)
    for (index_t i = 0; i < dim; ++i) basis_t(j, i) = lu(i, j) = u(i, j);
  if (chol.rows() > 0) {
    c.solve_lower_right(Op::none, dim, chol.data(), dim, k, basis_t.data(), k);  // U^T L^{-1}
    Matrix<double> tmp(dim, k);
    c.gemm(Op::none, Op::none, dim, k, dim, 1.0, chol.data(), dim, lu.data(), dim, 0.0, tmp.data(),
           dim);
    lu = std::move(tmp);
  }
  ValueLatent out;
  out.latent = Matrix<double>(dim, k);
  for (index_t j = 0; j < k; ++j)
    for (index_t i = 0; i < dim; ++i) out.latent(i, j) = basis_t(j, i);
  const auto rebuild = [&](const Matrix<double>& w) {
    Matrix<double> b(gd, k);
    c.gemm(Op::trans, Op::none, gd, k, dim, 1.0, w.data(), dim, lu.data(), dim, 0.0, b.data(), gd);
    return b;
  };
  out.expand = rebuild(wv);
  if (o.joint) out.key_expand = rebuild(wk);
  // o_proj with the rebuild folded in: rows h k ... of (H k) x E are B_g(h)^T (W_O^h)^T.
  out.output = Matrix<double>(heads * k, e);
  for (index_t h = 0; h < heads; ++h) {
    c.gemm(Op::trans, Op::none, k, e, d, 1.0, &out.expand((h / (heads / groups)) * d, 0), gd,
           &wo(h * d, 0), wo.rows(), 0.0, &out.output(h * k, 0), heads * k);
  }
  out.singular_values = full ? std::vector<double>(sigma.size(), 0.0) : sigma;

  // Errors: the objectives' relative values, weight-only and on the undamped moment.
  out.relative_error = relative(c, wv, out.latent, out.expand, roots, nullptr);
  if (moment) out.data_error = relative(c, wv, out.latent, out.expand, roots, moment);
  if (o.joint) {
    out.key_error = relative(c, wk, out.latent, out.key_expand, {}, nullptr);
    if (moment) out.key_data_error = relative(c, wk, out.latent, out.key_expand, {}, moment);
  }
  const index_t keys_before =
      o.joint ? layer.input_dim() * gd + static_cast<index_t>(layer.key_bias.size()) : 0;
  out.params_before = keys_before + layer.input_dim() * gd +
                      static_cast<index_t>(layer.value_bias.size()) + heads * d * e;
  out.params_after = dim * k + (o.joint ? gd * k : 0) +
                     (value_expansion_folded(k, d, e) ? heads * k * e : gd * k + heads * d * e);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

template struct ValueLayer<float>;
template struct ValueLayer<double>;
template ValueLatent value_latent<float>(const ValueLayer<float>&, const ValueOptions&,
                                         const Matrix<double>*);
template ValueLatent value_latent<double>(const ValueLayer<double>&, const ValueOptions&,
                                          const Matrix<double>*);

}  // namespace tenfold::attention
