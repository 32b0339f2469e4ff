// Factor match score of two CP models (congruence of normalised components and an
// exact optimal matching, Hungarian algorithm), and the most negative congruence
// within one model (two-factor degeneracy).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/format.hpp"
#include "tenfold/error.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold {
namespace {

// A CP model with unit columns, in double: component r is w_r a_r^(0) o a_r^(1) o ...,
// w_r = |lambda_r| prod_n ||a_r^(n)|| (signs do not matter to |cosine|). Zero columns stay zero.
struct UnitModel {
  std::vector<double> weights;
  std::vector<std::vector<double>> factors;  // column-major I_n x R
};

template <class T>
UnitModel unit_model(const KTensor<T>& k) {
  const index_t r = k.rank();
  UnitModel u;
  for (T w : k.weights) u.weights.push_back(std::abs(static_cast<double>(w)));
  for (const Matrix<T>& f : k.factors) {
    std::vector<double> g(f.values().begin(), f.values().end());
    for (index_t j = 0; j < r; ++j) {
      double* col = g.data() + j * f.rows();
      double s = 0.0;
      for (index_t i = 0; i < f.rows(); ++i) s += col[i] * col[i];
      s = std::sqrt(s);
      u.weights[static_cast<std::size_t>(j)] *= s;
      if (s > 0.0) {
        for (index_t i = 0; i < f.rows(); ++i) col[i] /= s;
      }
    }
    u.factors.push_back(std::move(g));
  }
  return u;
}

// Maximum-weight matching of the n rows of c (n x m, row-major, n <= m) into distinct
// columns: the Hungarian algorithm with potentials on the cost -c, O(n^2 m).
// Returns the column matched to each row.
std::vector<index_t> hungarian_max(const std::vector<double>& c, index_t n, index_t m) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto cost = [&](index_t i, index_t j) {  // 1-based
    return -c[static_cast<std::size_t>((i - 1) * m + (j - 1))];
  };
  const auto sz = [](index_t k) { return static_cast<std::size_t>(k); };
  // u, v: dual potentials of rows and columns; p[j]: row matched to column j (0 = none).
  std::vector<double> u(sz(n + 1)), v(sz(m + 1));
  std::vector<index_t> p(sz(m + 1)), way(sz(m + 1));
  for (index_t i = 1; i <= n; ++i) {
    // Grow a shortest augmenting path from row i in reduced costs.
    p[0] = i;
    index_t j0 = 0;
    std::vector<double> minv(sz(m + 1), inf);
    std::vector<bool> used(sz(m + 1), false);
    do {
      used[sz(j0)] = true;
      const index_t i0 = p[sz(j0)];
      double delta = inf;
      index_t j1 = 0;
      for (index_t j = 1; j <= m; ++j) {
        if (used[sz(j)]) continue;
        const double cur = cost(i0, j) - u[sz(i0)] - v[sz(j)];
        if (cur < minv[sz(j)]) {
          minv[sz(j)] = cur;
          way[sz(j)] = j0;
        }
        if (minv[sz(j)] < delta) {
          delta = minv[sz(j)];
          j1 = j;
        }
      }
      for (index_t j = 0; j <= m; ++j) {
        if (used[sz(j)]) {
          u[sz(p[sz(j)])] += delta;
          v[sz(j)] -= delta;
        } else {
          minv[sz(j)] -= delta;
        }
      }
      j0 = j1;
    } while (p[sz(j0)] != 0);
    // Flip the path.
    do {
      const index_t j1 = way[sz(j0)];
      p[sz(j0)] = p[sz(j1)];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<index_t> match(sz(n));
  for (index_t j = 1; j <= m; ++j) {
    if (p[sz(j)] != 0) match[sz(p[sz(j)] - 1)] = j - 1;
  }
  return match;
}

}  // namespace

template <class T>
double factor_match_score(const KTensor<T>& a, const KTensor<T>& b, const FmsOptions& options) {
  a.validate();
  b.validate();
  if (a.dims() != b.dims()) {
    throw DimensionMismatch("factor_match_score: the models have different shapes " +
                            detail::shape_string(a.dims()) + " and " +
                            detail::shape_string(b.dims()));
  }
  // Rows: the model of smaller rank (matched into the other).
  const bool a_rows = a.rank() <= b.rank();
  const UnitModel x = unit_model(a_rows ? a : b), y = unit_model(a_rows ? b : a);
  const index_t n = static_cast<index_t>(x.weights.size());
  const index_t m = static_cast<index_t>(y.weights.size());
  // C(i, j) = prod_modes |<x_i, y_j>| (times the weight penalty).
  std::vector<double> c(static_cast<std::size_t>(n * m), 1.0);
  for (std::size_t mode = 0; mode < x.factors.size(); ++mode) {
    const index_t rows = a.dims()[mode];
    const double* fx = x.factors[mode].data();
    const double* fy = y.factors[mode].data();
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < m; ++j) {
        double s = 0.0;
        for (index_t l = 0; l < rows; ++l) s += fx[l + i * rows] * fy[l + j * rows];
        c[static_cast<std::size_t>(i * m + j)] *= std::abs(s);
      }
  }
  if (options.weight_penalty) {
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < m; ++j) {
        const double wa = x.weights[static_cast<std::size_t>(i)];
        const double wb = y.weights[static_cast<std::size_t>(j)];
        const double top = std::max(wa, wb);
        c[static_cast<std::size_t>(i * m + j)] *= top > 0.0 ? 1.0 - std::abs(wa - wb) / top : 1.0;
      }
  }
  // Mean congruence over the optimal one-to-one matching.
  const std::vector<index_t> match = hungarian_max(c, n, m);
  double sum = 0.0;
  for (index_t i = 0; i < n; ++i)
    sum += c[static_cast<std::size_t>(i * m + match[static_cast<std::size_t>(i)])];
  return std::min(1.0, sum / static_cast<double>(n));
}

template <class T>
ComponentPair most_negative_congruence(const KTensor<T>& model) {
  model.validate();
  const UnitModel u = unit_model(model);
  const index_t r = model.rank();
  ComponentPair worst;
  std::vector<double> cosines(u.factors.size());
  for (index_t i = 0; i < r; ++i)
    for (index_t j = i + 1; j < r; ++j) {
      // c_ij = sign(l_i l_j) prod_n <a_i^(n), a_j^(n)> over unit columns.
      const T wi = model.weights[static_cast<std::size_t>(i)];
      const T wj = model.weights[static_cast<std::size_t>(j)];
      // The cosines multiplied in ascending order: the same bits for any mode order
      // (a C-order array's model has its modes reversed).
      for (std::size_t mode = 0; mode < u.factors.size(); ++mode) {
        const index_t rows = model.factors[mode].rows();
        const double* f = u.factors[mode].data();
        double s = 0.0;
        for (index_t l = 0; l < rows; ++l) s += f[l + i * rows] * f[l + j * rows];
        cosines[mode] = s;
      }
      std::sort(cosines.begin(), cosines.end());
      double c = (wi < T(0)) == (wj < T(0)) ? 1.0 : -1.0;
      for (double s : cosines) c *= s;
      if (worst.first == worst.second || c < worst.congruence) worst = {i, j, c};
    }
  return worst;
}

template double factor_match_score<float>(const KTensor<float>&, const KTensor<float>&,
                                          const FmsOptions&);
template double factor_match_score<double>(const KTensor<double>&, const KTensor<double>&,
                                           const FmsOptions&);
template ComponentPair most_negative_congruence<float>(const KTensor<float>&);
template ComponentPair most_negative_congruence<double>(const KTensor<double>&);

}  // namespace tenfold
