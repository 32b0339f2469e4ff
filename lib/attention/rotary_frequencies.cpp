// Complex rotary keys shared per frequency pair (bands = 1, docs/rope.md): per pair j,
// the SVD of the whitened, query-weighted complex keys of all key heads; the budget
// over all pairs by singular value; the shared keys e_r and the mixing c_{g,r}.
#include <cmath>
#include <complex>
#include <numeric>
#include <vector>

#include "attention/rotary_solver.hpp"

namespace tenfold::attention::detail {
namespace {

using tenfold::detail::Compute;
using tenfold::detail::Op;
using cplx = std::complex<double>;

/// v_c^T S v_c for every column c of M (||v_c||^2 without S).
std::vector<double> column_energies(Compute<double>& c, const Matrix<double>& m,
                                    const Matrix<double>* s) {
  Matrix<double> sm;
  if (s) {
    sm = Matrix<double>(m.rows(), m.cols());
    c.gemm(Op::none, Op::none, m.rows(), m.cols(), m.rows(), 1.0, s->data(), m.rows(), m.data(),
           m.rows(), 0.0, sm.data(), m.rows());
  }
  const Matrix<double>& other = s ? sm : m;
  std::vector<double> out(static_cast<std::size_t>(m.cols()));
  for (index_t j = 0; j < m.cols(); ++j) out[j] = c.dot(m.rows(), &m(0, j), &other(0, j));
  return out;
}

/// E|z|^2 of pair j of head h from column energies e of a (D' x heads d) matrix:
/// e(h d + j) + e(h d + j + d/2).
double pair_energy(const std::vector<double>& e, index_t h, index_t j, index_t d) {
  return e[h * d + j] + e[h * d + j + d / 2];
}

}  // namespace

RotaryKeys frequency_keys(Compute<double>& c, const RotaryProblem& p, const RotaryOptions& o) {
  const index_t heads = p.heads, key_heads = p.key_heads, d = p.head_dim, half = d / 2;
  const index_t group = heads / key_heads, dim = p.dim();

  // Query weight of key head g at pair j: a_{g,j} = sum_{h in g} E|q_{h,j}|^2.
  const std::vector<double> query = column_energies(c, p.wq, p.query_moment);
  Matrix<double> weight(key_heads, half);
  for (index_t h = 0; h < heads; ++h)
    for (index_t j = 0; j < half; ++j) weight(h / group, j) += pair_energy(query, h, j, d);

  // Whitened keys L^T W_K; pair j of head g is the complex column y_{g,j}.
  Matrix<double> y = p.wk;
  if (p.whiten()) {
    c.gemm(Op::trans, Op::none, dim, p.wk.cols(), dim, 1.0, p.chol.data(), dim, p.wk.data(), dim,
           0.0, y.data(), dim);
  }
  const auto key = [&](index_t i, index_t g, index_t j) {
    return cplx(y(i, g * d + j), y(i, g * d + j + half));
  };

  // Per pair: X_j = [sqrt(a_{g,j}) y_{g,j}]_g (plain keys for "full"), its SVD.
  const index_t width = std::min(dim, key_heads);
  Matrix<double> sigma(half, width);
  std::vector<Matrix<cplx>> lefts;
  for (index_t j = 0; j < half; ++j) {
    Matrix<cplx> x(dim, key_heads);
    for (index_t g = 0; g < key_heads; ++g) {
      const double scale = p.full ? 1.0 : std::sqrt(weight(g, j));
      for (index_t i = 0; i < dim; ++i) x(i, g) = scale * key(i, g, j);
    }
    auto [u, s] = left_singular(x);
    for (index_t k = 0; k < width; ++k) sigma(j, k) = s[k];
    lefts.push_back(std::move(u));
  }
  RotaryKeys out;
  out.bands = 1;
  out.ranks = choose_ranks(sigma, p.full, o.ranks, o.key_values / 2, "complex keys");
  out.singular_values = p.full ? Matrix<double>(half, width) : sigma;

  // Shared key r of pair j(r): whitened e'_r = U_j e_slot, the mixing
  // c_{g,r} = e'_r^H y_{g,j} (the projection of the whitened key), e_r = L^{-T} e'_r.
  const index_t shared = std::accumulate(out.ranks.begin(), out.ranks.end(), index_t{0});
  Matrix<double> rows(2 * shared, dim);  // Re e'_r^T, then Im e'_r^T
  out.mixing = Matrix<double>(key_heads, 2 * shared);
  for (index_t j = 0, r = 0; j < half; ++j) {
    for (index_t slot = 0; slot < out.ranks[j]; ++slot, ++r) {
      out.frequency.push_back(j);
      for (index_t i = 0; i < dim; ++i) {
        rows(r, i) = lefts[j](i, slot).real();
        rows(shared + r, i) = lefts[j](i, slot).imag();
      }
      for (index_t g = 0; g < key_heads; ++g) {
        cplx m = 0.0;
        for (index_t i = 0; i < dim; ++i) m += std::conj(lefts[j](i, slot)) * key(i, g, j);
        out.mixing(g, r) = m.real();
        out.mixing(g, shared + r) = m.imag();
      }
    }
  }
  if (p.whiten() && shared > 0) {
    c.solve_lower_right(Op::none, dim, p.chol.data(), dim, 2 * shared, rows.data(), 2 * shared);
  }
  out.latent = Matrix<double>(dim, 2 * shared);
  for (index_t v = 0; v < 2 * shared; ++v)
    for (index_t i = 0; i < dim; ++i) out.latent(i, v) = rows(v, i);

  // Rebuild: k_{g,j} = sum_r c_{g,r} kappa_r, kappa_r = Re + i Im latent values r, R + r.
  out.expand = Matrix<double>(key_heads * d, 2 * shared);
  for (index_t r = 0; r < shared; ++r) {
    const index_t j = out.frequency[r];
    for (index_t g = 0; g < key_heads; ++g) {
      const double re = out.mixing(g, r), im = out.mixing(g, shared + r);
      out.expand(g * d + j, r) = re;
      out.expand(g * d + j, shared + r) = -im;
      out.expand(g * d + j + half, r) = im;
      out.expand(g * d + j + half, shared + r) = re;
    }
  }

  // Errors: sum_{h,j} E|q_{h,j}|^2 |w_{g,j} - w^_{g,j}|^2 relative to the same with the
  // keys, weight-only and on the (undamped) moments.
  Matrix<double> diff = p.wk;
  if (shared > 0) {
    c.gemm(Op::none, Op::trans, dim, key_heads * d, 2 * shared, -1.0, out.latent.data(), dim,
           out.expand.data(), key_heads * d, 1.0, diff.data(), dim);
  }
  const auto ratio = [&](const std::vector<double>& q, const Matrix<double>* s) {
    const std::vector<double> err = column_energies(c, diff, s), all = column_energies(c, p.wk, s);
    double num = 0.0, den = 0.0;
    for (index_t h = 0; h < heads; ++h)
      for (index_t j = 0; j < half; ++j) {
        const double a = pair_energy(q, h, j, d);
        num += a * pair_energy(err, h / group, j, d);
        den += a * pair_energy(all, h / group, j, d);
      }
    return den > 0.0 ? std::sqrt(num / den) : 0.0;
  };
  out.relative_error = ratio(p.query_moment ? column_energies(c, p.wq, nullptr) : query, nullptr);
  if (p.query_moment) out.data_error = ratio(query, p.key_moment);
  return out;
}

}  // namespace tenfold::attention::detail
