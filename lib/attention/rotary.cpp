// Band latents of rotary attention (docs/rope.md): the phase-averaged query coherence
// per key head, one weighted and whitened SVD per band, the budget over all bands by
// singular value, the latent and its rebuild map. Mirrors tenfold.torch's
// rotary_band_keys step by step (the same objective, the same allocation).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "attention/heads.hpp"
#include "attention/moments.hpp"
#include "core/format.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

using tenfold::detail::Compute;
using tenfold::detail::Op;
using cplx = std::complex<double>;

/// Singular values below this fraction of the layer's largest are zero ("full"), as
/// tenfold.torch's RANK_TOL.
constexpr double rank_tol = 1e-6;

/// W with the bias as an extra last row when `augment` (zeros for a missing bias): D' x n.
template <class T>
Matrix<double> augmented(const Matrix<T>& w, const std::vector<T>& bias, bool augment) {
  const index_t rows = w.rows() + (augment ? 1 : 0);
  Matrix<double> out(rows, w.cols());
  for (index_t j = 0; j < w.cols(); ++j) {
    for (index_t i = 0; i < w.rows(); ++i) out(i, j) = static_cast<double>(w(i, j));
    if (augment) out(w.rows(), j) = bias.empty() ? 0.0 : static_cast<double>(bias[j]);
  }
  return out;
}

/// A(omega) = E[e^{i omega Delta}] over the offsets Delta = m - n of the causal pairs
/// (m >= n) of a `context`-token sequence: weight (context - Delta) / (context (context + 1) / 2).
cplx phase_average(double omega, index_t context) {
  const double total = static_cast<double>(context) * static_cast<double>(context + 1) / 2.0;
  cplx sum = 0.0;
  for (index_t delta = 0; delta < context; ++delta) {
    const double w = static_cast<double>(context - delta) / total;
    sum += w * cplx(std::cos(omega * static_cast<double>(delta)),
                    std::sin(omega * static_cast<double>(delta)));
  }
  return sum;
}

/// P_g = sum_{h in g} E[v_h v_h^T] (d x d each, G blocks), v_h = Rot(theta Delta) q_h(x):
/// the query of head h turned by the offset. With M = E[q q^T] (S = E[x' x'^T], or I),
/// z_j = e^{i theta_j Delta} q_j has E[z_j conj z_k] = A(theta_j - theta_k) E[q_j conj q_k]
/// and E[z_j z_k] = A(theta_j + theta_k) E[q_j q_k]; P's blocks are their real parts.
std::vector<Matrix<double>> query_coherence(Compute<double>& c, const Matrix<double>& wq,
                                            const Matrix<double>* moment, index_t heads,
                                            index_t key_heads, index_t d,
                                            const std::vector<cplx>& minus,
                                            const std::vector<cplx>& plus) {
  const index_t rows = wq.rows(), half = d / 2;
  Matrix<double> sw = wq;
  if (moment) {
    c.gemm(Op::none, Op::none, rows, wq.cols(), rows, 1.0, moment->data(), rows, wq.data(), rows,
           0.0, sw.data(), rows);
  }
  const std::vector<double> m = detail::head_grams(c, wq, sw, heads, d);  // W_h^T S W_h
  std::vector<Matrix<double>> p(static_cast<std::size_t>(key_heads), Matrix<double>(d, d));
  const index_t group = heads / key_heads;
  for (index_t h = 0; h < heads; ++h) {
    const double* mh = m.data() + h * d * d;
    const auto at = [&](index_t i, index_t j) { return mh[i + j * d]; };
    Matrix<double>& pg = p[static_cast<std::size_t>(h / group)];
    for (index_t k = 0; k < half; ++k) {
      for (index_t j = 0; j < half; ++j) {
        const double a = at(j, k), b = at(j + half, k + half);
        const double ab = at(j, k + half), ba = at(j + half, k);
        const cplx herm(a + b, ba - ab);    // E[q_j conj q_k]
        const cplx pseudo(a - b, ab + ba);  // E[q_j q_k]
        const cplx zc = minus[j + k * half] * herm, zn = plus[j + k * half] * pseudo;
        pg(j, k) += 0.5 * (zc + zn).real();                // E[Re z_j Re z_k]
        pg(j + half, k + half) += 0.5 * (zc - zn).real();  // E[Im z_j Im z_k]
        const double cross = 0.5 * (zn - zc).imag();       // E[Re z_j Im z_k]
        pg(j, k + half) += cross;
        pg(k + half, j) += cross;
      }
    }
  }
  return p;
}

/// Per band, per key head: F with F F^T = P_g restricted to the band's 2 b coordinates.
std::vector<std::vector<Matrix<double>>> band_roots(const std::vector<Matrix<double>>& p,
                                                    const std::vector<std::vector<index_t>>& cols) {
  std::vector<std::vector<Matrix<double>>> roots;
  for (const std::vector<index_t>& c : cols) {
    const index_t n = static_cast<index_t>(c.size());
    std::vector<Matrix<double>> per_head;
    for (const Matrix<double>& pg : p) {
      Matrix<double> block(n, n);
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < n; ++i) block(i, j) = pg(c[i], c[j]);
      per_head.push_back(detail::psd_factor(block));
    }
    roots.push_back(std::move(per_head));
  }
  return roots;
}

/// The band's columns of W (D' x G d): the key coordinates g d + c, head by head.
Matrix<double> band_columns(const Matrix<double>& w, const std::vector<index_t>& rows) {
  Matrix<double> out(w.rows(), static_cast<index_t>(rows.size()));
  for (index_t j = 0; j < out.cols(); ++j) std::copy_n(&w(0, rows[j]), w.rows(), &out(0, j));
  return out;
}

/// X blockdiag(F_1 ... F_G): each head's 2 b columns times its root.
Matrix<double> weigh(Compute<double>& c, const Matrix<double>& x,
                     const std::vector<Matrix<double>>& roots) {
  Matrix<double> out(x.rows(), x.cols());
  index_t at = 0;
  for (const Matrix<double>& f : roots) {
    c.gemm(Op::none, Op::none, x.rows(), f.cols(), f.rows(), 1.0, &x(0, at), x.rows(), f.data(),
           f.rows(), 0.0, &out(0, at), out.rows());
    at += f.cols();
  }
  return out;
}

/// Left singular vectors U (rows x n) and singular values (descending) of X, n = min of
/// its sizes, from the symmetric eigensolver of the smaller Gram: X^T X = V S^2 V^T gives
/// U = X V S^{-1} (a zero column where sigma = 0); X X^T gives U directly.
std::pair<Matrix<double>, std::vector<double>> left_singular(Compute<double>& c,
                                                             const Matrix<double>& x) {
  const index_t rows = x.rows(), cols = x.cols(), n = std::min(rows, cols);
  const bool tall = cols <= rows;
  Matrix<double> g(n, n);
  c.syrk(tall ? Op::trans : Op::none, n, tall ? rows : cols, 1.0, x.data(), rows, 0.0, g.data(), n);
  std::vector<double> lambda(static_cast<std::size_t>(n));
  c.syevd(n, g.data(), n, lambda.data());
  std::vector<double> sigma(static_cast<std::size_t>(n));
  Matrix<double> u(rows, n);
  for (index_t k = 0; k < n; ++k) {
    const index_t src = n - 1 - k;  // ascending -> descending
    sigma[k] = std::sqrt(std::max(lambda[src], 0.0));
    if (!tall) {
      std::copy_n(&g(0, src), n, &u(0, k));
      continue;
    }
    c.gemm(Op::none, Op::none, rows, 1, cols, 1.0, x.data(), rows, &g(0, src), n, 0.0, &u(0, k),
           rows);
    // Normalise by the column's own norm (more accurate than sigma for small sigma).
    double norm = 0.0;
    for (index_t i = 0; i < rows; ++i) norm += u(i, k) * u(i, k);
    norm = std::sqrt(norm);
    for (index_t i = 0; i < rows; ++i)
      u(i, k) = norm > 0.0 && sigma[k] > 0.0 ? u(i, k) / norm : 0.0;
  }
  return {std::move(u), std::move(sigma)};
}

/// sum over bands of tr(Y^T S Y) (||Y||^2 without S), Y = M_B blockdiag(F_B).
double weighted_energy(Compute<double>& c, const Matrix<double>& m,
                       const std::vector<std::vector<index_t>>& rows,
                       const std::vector<std::vector<Matrix<double>>>& roots,
                       const Matrix<double>* moment) {
  double total = 0.0;
  for (std::size_t b = 0; b < rows.size(); ++b) {
    const Matrix<double> y = weigh(c, band_columns(m, rows[b]), roots[b]);
    if (!moment) {
      total += c.sum_squares(y.values().size(), y.data());
      continue;
    }
    Matrix<double> sy(y.rows(), y.cols());
    c.gemm(Op::none, Op::none, y.rows(), y.cols(), y.rows(), 1.0, moment->data(), y.rows(),
           y.data(), y.rows(), 0.0, sy.data(), sy.rows());
    total += c.dot(y.values().size(), y.data(), sy.data());
  }
  return total;
}

}  // namespace

std::int64_t rotary_decode_flops(index_t heads, index_t key_heads, index_t head_dim,
                                 index_t key_values, index_t bands) {
  return 4 * static_cast<std::int64_t>(key_heads) * bands * key_values +
         3 * static_cast<std::int64_t>(key_heads) * head_dim +
         2 * static_cast<std::int64_t>(heads) * head_dim;
}

template <class T>
void RotaryLayer<T>::validate() const {
  const auto text = [](index_t v) { return std::to_string(v); };
  if (key_heads < 1 || heads < 1 || heads % key_heads) {
    throw InvalidArgument("heads (" + text(heads) + ") must be a positive multiple of key_heads (" +
                          text(key_heads) + ")");
  }
  if (head_dim < 2 || head_dim % 2) {
    throw InvalidArgument("head_dim must be even and at least 2 (frequency pairs), got " +
                          text(head_dim));
  }
  const index_t dim = query_weight.rows();
  if (dim < 1 || query_weight.cols() != heads * head_dim) {
    throw DimensionMismatch("query_weight is " + text(dim) + "x" + text(query_weight.cols()) +
                            ", expected D x H d with H d = " + text(heads * head_dim));
  }
  if (key_weight.rows() != dim || key_weight.cols() != key_heads * head_dim) {
    throw DimensionMismatch("key_weight is " + text(key_weight.rows()) + "x" +
                            text(key_weight.cols()) + ", expected D x G d = " + text(dim) + "x" +
                            text(key_heads * head_dim));
  }
  for (const auto& [bias, n, what] : {std::tuple{&query_bias, heads * head_dim, "query_bias"},
                                      std::tuple{&key_bias, key_heads * head_dim, "key_bias"}}) {
    if (!bias->empty() && static_cast<index_t>(bias->size()) != n) {
      throw DimensionMismatch(std::string(what) + " has " +
                              text(static_cast<index_t>(bias->size())) + " entries, expected " +
                              text(n));
    }
    if (!bias->empty()) check_finite(TensorView<const T>(bias->data(), {n}), what);
  }
  check_finite(TensorView<const T>(query_weight.data(), {dim, query_weight.cols()}),
               "query_weight");
  check_finite(TensorView<const T>(key_weight.data(), {dim, key_weight.cols()}), "key_weight");
}

template <class T>
RotaryKeys rotary_band_keys(const RotaryLayer<T>& layer, const RotaryOptions& o,
                            const InputMoments* moments) {
  const auto start = std::chrono::steady_clock::now();
  layer.validate();
  const index_t heads = layer.heads, key_heads = layer.key_heads, d = layer.head_dim;
  const index_t half = d / 2, b = o.bands;
  const auto text = [](index_t v) { return std::to_string(v); };
  if (b < 1 || half % b) {
    throw InvalidArgument("bands must be a positive divisor of the " + text(half) +
                          " frequency pairs of a head, got " + text(b));
  }
  if (static_cast<index_t>(o.inv_freq.size()) != half) {
    throw DimensionMismatch("inv_freq has " + text(static_cast<index_t>(o.inv_freq.size())) +
                            " frequencies, expected d/2 = " + text(half));
  }
  for (double f : o.inv_freq)
    if (!std::isfinite(f)) throw InvalidArgument("inv_freq has a non-finite entry");
  if (o.context < 1) throw InvalidOption("context", "must be at least 1, got " + text(o.context));
  if (!(o.damping >= 0.0) || !std::isfinite(o.damping)) {
    throw InvalidOption(
        "damping", "must be finite and >= 0, got " + tenfold::detail::number_string(o.damping));
  }
  if (o.key_values < 0 || o.key_values > key_heads * d) {
    throw InvalidArgument("key_values " + text(o.key_values) +
                          " is outside [1, G d = " + text(key_heads * d) + "] (0: full)");
  }
  const bool augment = layer.biased(), full = o.key_values == 0;
  const Matrix<double> wq = augmented(layer.query_weight, layer.query_bias, augment);
  const Matrix<double> wk = augmented(layer.key_weight, layer.key_bias, augment);
  const index_t dim = wk.rows();
  const Matrix<double>* sq = nullptr;
  const Matrix<double>* sk = nullptr;
  if (moments) {
    sq = &moments->query;
    sk = moments->key.size() > 0 ? &moments->key : &moments->query;
    for (const Matrix<double>* m : {sq, sk}) {
      // to single-precision round-off: moments stored in float32 are accepted
      validate_moment(*m, dim, m == sq ? "query moment" : "key moment",
                      std::numeric_limits<float>::epsilon());
    }
  }
  const auto host = detail::host_compute();
  Compute<double>& c = *host;

  // Phases of the offsets for theta_j - theta_k and theta_j + theta_k.
  std::vector<cplx> minus(static_cast<std::size_t>(half * half)), plus(minus.size());
  for (index_t k = 0; k < half; ++k)
    for (index_t j = 0; j < half; ++j) {
      minus[j + k * half] = phase_average(o.inv_freq[j] - o.inv_freq[k], o.context);
      plus[j + k * half] = phase_average(o.inv_freq[j] + o.inv_freq[k], o.context);
    }
  const auto coherence = [&](const Matrix<double>* s) {
    return query_coherence(c, wq, s, heads, key_heads, d, minus, plus);
  };

  // Band B's key coordinates: pairs j in B, real parts (j) then imaginary (j + d/2),
  // of every key head in turn.
  const index_t nb = half / b;
  std::vector<std::vector<index_t>> cols(static_cast<std::size_t>(nb)), rows(cols.size());
  for (index_t band = 0; band < nb; ++band) {
    auto& cb = cols[band];
    for (index_t t = 0; t < b; ++t) cb.push_back(band * b + t);
    for (index_t t = 0; t < b; ++t) cb.push_back(half + band * b + t);
    for (index_t g = 0; g < key_heads; ++g)
      for (index_t col : cb) rows[band].push_back(g * d + col);
  }

  // Whitening L L^T = S_K + damping tr(S_K) / D' I (none for "full", which needs only
  // the span of the keys).
  Matrix<double> chol;
  const bool whiten = !full && sk;
  if (whiten) chol = detail::damped_cholesky(*sk, o.damping, "the key-side input moment");
  const std::vector<Matrix<double>> weights = coherence(sq);
  const auto roots = band_roots(weights, cols);

  // Per band: X = L^T W_B blockdiag(F) (plain W_B for "full"), its SVD.
  std::vector<Matrix<double>> lefts;
  const index_t width = std::min(dim, 2 * key_heads * b);
  RotaryKeys out;
  out.bands = b;
  out.singular_values = Matrix<double>(nb, width);
  Matrix<double> sigma(nb, width);
  for (index_t band = 0; band < nb; ++band) {
    Matrix<double> x = band_columns(wk, rows[band]);
    if (!full) {
      if (whiten) {
        Matrix<double> lx(dim, x.cols());
        c.gemm(Op::trans, Op::none, dim, x.cols(), dim, 1.0, chol.data(), dim, x.data(), dim, 0.0,
               lx.data(), dim);
        x = std::move(lx);
      }
      x = weigh(c, x, roots[band]);
    }
    auto [u, s] = left_singular(c, x);
    for (index_t k = 0; k < width; ++k) sigma(band, k) = s[k];
    lefts.push_back(std::move(u));
  }

  // Ranks: "full" keeps sigma above rank_tol of the largest; a budget C keeps the C
  // largest sigma over all bands.
  std::vector<index_t> ranks(static_cast<std::size_t>(nb), 0);
  const double top = *std::max_element(sigma.values().begin(), sigma.values().end());
  if (full) {
    for (index_t band = 0; band < nb; ++band)
      for (index_t k = 0; k < width; ++k) ranks[band] += sigma(band, k) > rank_tol * top ? 1 : 0;
  } else {
    if (o.key_values > nb * width) {
      throw InvalidArgument("key_values " + text(o.key_values) + " exceeds the " +
                            text(nb * width) + " singular values of the layer's bands");
    }
    std::vector<index_t> order(static_cast<std::size_t>(nb * width));
    std::iota(order.begin(), order.end(), 0);
    // row-major flat index band * width + k, as tenfold.torch's topk over sigma.flatten()
    const auto value = [&](index_t i) { return sigma(i / width, i % width); };
    std::stable_sort(order.begin(), order.end(),
                     [&](index_t a, index_t z) { return value(a) > value(z); });
    for (index_t i = 0; i < o.key_values; ++i) ranks[order[i] / width] += 1;
    out.singular_values = sigma;
  }

  // Latent Lambda_B = L^{-T} U_k (D' x k) and rebuild E_B = W_B^T L U_k (2 G b x k):
  // keys W_B^T L U_k U_k^T L^{-1} [y; 1].
  const index_t total = std::accumulate(ranks.begin(), ranks.end(), index_t{0});
  out.latent = Matrix<double>(dim, total);
  out.expand = Matrix<double>(key_heads * d, total);
  index_t at = 0;
  for (index_t band = 0; band < nb; ++band) {
    const index_t k = ranks[band];
    if (k == 0) continue;
    Matrix<double> basis_t(k, dim);  // U_k^T
    for (index_t j = 0; j < dim; ++j)
      for (index_t i = 0; i < k; ++i) basis_t(i, j) = lefts[band](j, i);
    Matrix<double> lu(dim, k);  // L U_k
    for (index_t j = 0; j < k; ++j)
      for (index_t i = 0; i < dim; ++i) lu(i, j) = basis_t(j, i);
    if (whiten) {
      c.solve_lower_right(Op::none, dim, chol.data(), dim, k, basis_t.data(), k);  // U^T L^{-1}
      Matrix<double> tmp(dim, k);
      c.gemm(Op::none, Op::none, dim, k, dim, 1.0, chol.data(), dim, lu.data(), dim, 0.0,
             tmp.data(), dim);
      lu = std::move(tmp);
    }
    const Matrix<double> wb = band_columns(wk, rows[band]);
    Matrix<double> back(wb.cols(), k);
    c.gemm(Op::trans, Op::none, wb.cols(), k, dim, 1.0, wb.data(), dim, lu.data(), dim, 0.0,
           back.data(), back.rows());
    for (index_t t = 0; t < k; ++t) {
      for (index_t i = 0; i < dim; ++i) out.latent(i, at + t) = basis_t(t, i);
      for (index_t i = 0; i < back.rows(); ++i) out.expand(rows[band][i], at + t) = back(i, t);
    }
    at += k;
  }
  out.ranks = ranks;

  // Errors: the objective's relative value, weight-only and on the undamped moments.
  Matrix<double> diff = wk;  // W - Lambda E^T
  if (total > 0) {
    c.gemm(Op::none, Op::trans, dim, key_heads * d, total, -1.0, out.latent.data(), dim,
           out.expand.data(), key_heads * d, 1.0, diff.data(), dim);
  }
  const auto ratio = [&](const std::vector<Matrix<double>>& p, const Matrix<double>* s) {
    const auto r = band_roots(p, cols);
    const double num = weighted_energy(c, diff, rows, r, s);
    const double den = weighted_energy(c, wk, rows, r, s);
    return den > 0.0 ? std::sqrt(num / den) : 0.0;
  };
  out.relative_error = ratio(sq ? coherence(nullptr) : weights, nullptr);
  if (sq) out.data_error = ratio(weights, sk);
  out.decode_flops = rotary_decode_flops(heads, key_heads, d, total, b);
  const index_t in = layer.input_dim();
  out.params_before = (heads + key_heads) * d * in +
                      static_cast<index_t>(layer.query_bias.size() + layer.key_bias.size());
  out.params_after = heads * d * in + static_cast<index_t>(layer.query_bias.size()) + total * dim +
                     2 * key_heads * b * total;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

template struct RotaryLayer<float>;
template struct RotaryLayer<double>;
template RotaryKeys rotary_band_keys<float>(const RotaryLayer<float>&, const RotaryOptions&,
                                            const InputMoments*);
template RotaryKeys rotary_band_keys<double>(const RotaryLayer<double>&, const RotaryOptions&,
                                             const InputMoments*);

}  // namespace tenfold::attention
