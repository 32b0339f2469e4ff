// Band latents of rotary attention (bands = b > 1, docs/rope.md): the phase-averaged
// query coherence per key head, one weighted and whitened SVD per band, the budget over
// all bands by singular value, the latent and its rebuild map.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <numeric>
#include <string>
#include <vector>

#include "attention/heads.hpp"
#include "attention/moments.hpp"
#include "attention/rotary_solver.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention::detail {
namespace {

using tenfold::detail::Compute;
using tenfold::detail::Op;
using cplx = std::complex<double>;

/// A(omega) = E[e^{i omega Delta}] over the offsets Delta = m - n of the causal pairs
/// (m >= n) of a `context`-token sequence: weight (context - Delta) / (context (context + 1) / 2).
/// In O(1) for any context: with z = e^{i w} (w = omega reduced to (-pi, pi], the same phases),
/// sum_{Delta < n} (n - Delta) z^Delta = (n - z (1 - z^n) / (1 - z)) / (1 - z), each 1 - e^{ix}
/// as 2 sin^2(x/2) - i sin x (no cancellation); where n |w| < 1e-3, where that quotient
/// loses digits, the Taylor series sum_k (i w)^k / k! E[Delta^k] to k = 4 (error below
/// (n w)^5 / 120), the moments from the power sums S_k = sum_{Delta < n} Delta^k.
cplx phase_average(double omega, index_t context) {
  const double n = static_cast<double>(context), total = n * (n + 1.0) / 2.0;
  const double w = std::remainder(omega, 2.0 * std::numbers::pi);
  if (std::abs(n * w) < 1e-3) {
    const double m = n - 1.0;
    const double s1 = m * (m + 1.0) / 2.0, s2 = m * (m + 1.0) * (2.0 * m + 1.0) / 6.0;
    const double s3 = s1 * s1;
    const double s4 = m * (m + 1.0) * (2.0 * m + 1.0) * (3.0 * m * m + 3.0 * m - 1.0) / 30.0;
    const double s5 = m * m * (m + 1.0) * (m + 1.0) * (2.0 * m * m + 2.0 * m - 1.0) / 12.0;
    // E[Delta^k] = sum (n - Delta) Delta^k / total = (n S_k - S_{k+1}) / total.
    const double e1 = (n * s1 - s2) / total, e2 = (n * s2 - s3) / total;
    const double e3 = (n * s3 - s4) / total, e4 = (n * s4 - s5) / total;
    const double w2 = w * w;
    return {1.0 - w2 * e2 / 2.0 + w2 * w2 * e4 / 24.0, w * e1 - w2 * w * e3 / 6.0};
  }
  const auto one_minus = [](double x) {  // 1 - e^{ix}
    const double h = std::sin(x / 2.0);
    return cplx(2.0 * h * h, -std::sin(x));
  };
  const cplx z(std::cos(w), std::sin(w)), u = one_minus(w);
  return (n - z * one_minus(n * w) / u) / u / total;
}

}  // namespace

/// P_g = sum_{h in g} E[v_h v_h^T] (d x d each, G blocks), v_h = Rot(theta Delta) q_h(x):
/// the query of head h turned by the offset. With M = E[q q^T] (S = E[x' x'^T], or I),
/// z_j = e^{i theta_j Delta} q_j has E[z_j conj z_k] = A(theta_j - theta_k) E[q_j conj q_k]
/// and E[z_j z_k] = A(theta_j + theta_k) E[q_j q_k]; P's blocks are their real parts.
std::vector<Matrix<double>> query_coherence(Compute<double>& c, const Matrix<double>& wq,
                                            const Matrix<double>* moment, index_t heads,
                                            index_t key_heads, index_t d,
                                            const OffsetPhases& phases) {
  const std::vector<cplx>&minus = phases.minus, &plus = phases.plus;
  const index_t rows = wq.rows(), half = d / 2;
  Matrix<double> sw = wq;
  if (moment) {
    c.gemm(Op::none, Op::none, rows, wq.cols(), rows, 1.0, moment->data(), rows, wq.data(), rows,
           0.0, sw.data(), rows);
  }
  const std::vector<double> m = head_grams(c, wq, sw, heads, d);  // W_h^T S W_h
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

namespace {

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
      per_head.push_back(psd_factor(block));
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

OffsetPhases offset_phases(const std::vector<double>& inv_freq, index_t context) {
  const index_t half = static_cast<index_t>(inv_freq.size());
  OffsetPhases p;
  p.minus.resize(static_cast<std::size_t>(half * half));
  p.plus.resize(p.minus.size());
  for (index_t k = 0; k < half; ++k)
    for (index_t j = 0; j < half; ++j) {
      p.minus[j + k * half] = phase_average(inv_freq[j] - inv_freq[k], context);
      p.plus[j + k * half] = phase_average(inv_freq[j] + inv_freq[k], context);
    }
  return p;
}

void check_offsets(const std::vector<double>& inv_freq, index_t context, index_t half,
                   bool counted) {
  const index_t n = static_cast<index_t>(inv_freq.size());
  if (counted && n != half) {
    throw DimensionMismatch("inv_freq has " + std::to_string(n) +
                            " frequencies, expected d/2 = " + std::to_string(half));
  }
  for (double f : inv_freq)
    if (!std::isfinite(f)) throw InvalidArgument("inv_freq has a non-finite entry");
  if (context < 1) {
    throw InvalidOption("context", "must be at least 1, got " + std::to_string(context));
  }
}

RotaryKeys band_keys(Compute<double>& c, const RotaryProblem& p, const RotaryOptions& o) {
  const index_t key_heads = p.key_heads, d = p.head_dim, half = d / 2, b = o.bands;
  const index_t dim = p.dim();
  const Matrix<double>& wk = p.wk;

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
  const OffsetPhases phases = offset_phases(o.inv_freq, o.context);
  const auto coherence = [&](const Matrix<double>* s) {
    return query_coherence(c, p.wq, s, p.heads, key_heads, d, phases);
  };
  const std::vector<Matrix<double>> weights = coherence(p.query_moment);
  const auto roots = band_roots(weights, cols);

  // Per band: X = L^T W_B blockdiag(F) (plain W_B for "full"), its SVD.
  std::vector<Matrix<double>> lefts;
  const index_t width = std::min(dim, 2 * key_heads * b);
  Matrix<double> sigma(nb, width);
  for (index_t band = 0; band < nb; ++band) {
    Matrix<double> x = band_columns(wk, rows[band]);
    if (!p.full) {
      if (p.whiten()) {
        Matrix<double> lx(dim, x.cols());
        c.gemm(Op::trans, Op::none, dim, x.cols(), dim, 1.0, p.chol.data(), dim, x.data(), dim, 0.0,
               lx.data(), dim);
        x = std::move(lx);
      }
      x = weigh(c, x, roots[band]);
    }
    auto [u, s] = left_singular(x);
    for (index_t k = 0; k < width; ++k) sigma(band, k) = s[k];
    lefts.push_back(std::move(u));
  }
  RotaryKeys out;
  out.bands = b;
  out.ranks = choose_ranks(sigma, p.full, o.ranks, o.key_values, "latent values");
  out.singular_values = p.full ? Matrix<double>(nb, width) : sigma;

  // Latent Lambda_B = L^{-T} U_k (D' x k) and rebuild E_B = W_B^T L U_k (2 G b x k):
  // keys W_B^T L U_k U_k^T L^{-1} [y; 1].
  const index_t total = std::accumulate(out.ranks.begin(), out.ranks.end(), index_t{0});
  out.latent = Matrix<double>(dim, total);
  out.expand = Matrix<double>(key_heads * d, total);
  index_t at = 0;
  for (index_t band = 0; band < nb; ++band) {
    const index_t k = out.ranks[band];
    if (k == 0) continue;
    Matrix<double> basis_t(k, dim);  // U_k^T
    for (index_t j = 0; j < dim; ++j)
      for (index_t i = 0; i < k; ++i) basis_t(i, j) = lefts[band](j, i);
    Matrix<double> lu(dim, k);  // L U_k
    for (index_t j = 0; j < k; ++j)
      for (index_t i = 0; i < dim; ++i) lu(i, j) = basis_t(j, i);
    if (p.whiten()) {
      c.solve_lower_right(Op::none, dim, p.chol.data(), dim, k, basis_t.data(), k);  // U^T L^{-1}
      Matrix<double> tmp(dim, k);
      c.gemm(Op::none, Op::none, dim, k, dim, 1.0, p.chol.data(), dim, lu.data(), dim, 0.0,
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

  // Errors: the objective's relative value, weight-only and on the undamped moments.
  Matrix<double> diff = wk;  // W - Lambda E^T
  if (total > 0) {
    c.gemm(Op::none, Op::trans, dim, key_heads * d, total, -1.0, out.latent.data(), dim,
           out.expand.data(), key_heads * d, 1.0, diff.data(), dim);
  }
  const auto ratio = [&](const std::vector<Matrix<double>>& w, const Matrix<double>* s) {
    const auto r = band_roots(w, cols);
    const double num = weighted_energy(c, diff, rows, r, s);
    const double den = weighted_energy(c, wk, rows, r, s);
    return den > 0.0 ? std::sqrt(num / den) : 0.0;
  };
  out.relative_error = ratio(p.query_moment ? coherence(nullptr) : weights, nullptr);
  if (p.query_moment) out.data_error = ratio(weights, p.key_moment);
  return out;
}

}  // namespace tenfold::attention::detail
