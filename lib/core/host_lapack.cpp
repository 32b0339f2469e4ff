#include "core/host_lapack.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

// LAPACKE's complex types as std::complex (the same layout as C's _Complex).
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include "core/thread_pool.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

int lapack_int(index_t v) {
  if (v < 0 || v > 46340) {  // n^2 must fit the 32-bit interface
    throw InvalidArgument("matrix size " + std::to_string(v) + " too large for the host LAPACK");
  }
  return static_cast<int>(v);
}

// Whether a symmetric n x n G (lower triangle) may have cond(G) <= kPolarGramMaxCond2:
// false when its Cholesky factor's pivots show otherwise (cond(G) >= (max L_ii / min L_ii)^2),
// so that polar_factor goes straight to the SVD.
bool may_be_well_conditioned(index_t n, std::vector<double> g) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
  for (index_t j = 0; j < n; ++j) {
    double d = g[static_cast<std::size_t>(j + n * j)];
    for (index_t l = 0; l < j; ++l)
      d -= g[static_cast<std::size_t>(j + n * l)] * g[static_cast<std::size_t>(j + n * l)];
    if (!(d > 0.0)) return false;
    d = std::sqrt(d);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
    for (index_t i = j + 1; i < n; ++i) {
      double v = g[static_cast<std::size_t>(i + n * j)];
      for (index_t l = 0; l < j; ++l)
        v -= g[static_cast<std::size_t>(i + n * l)] * g[static_cast<std::size_t>(j + n * l)];
      g[static_cast<std::size_t>(i + n * j)] = v / d;
    }
  }
  return (hi / lo) * (hi / lo) <= kPolarGramMaxCond2;
}

}  // namespace

std::vector<double> general_eigenvectors(index_t n, std::vector<double> a) {
  const int in = lapack_int(n);
  std::vector<double> wr(static_cast<std::size_t>(n)), wi(wr.size()), vr(a.size());
  const SerialBlas serial;
  const int info = LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', 'V', in, a.data(), in, wr.data(), wi.data(),
                                 nullptr, 1, vr.data(), in);
  if (info != 0) return {};
  return vr;
}

bool solve_general(index_t n, index_t nrhs, std::vector<double> a, double* b) {
  const int in = lapack_int(n), ir = lapack_int(nrhs);
  std::vector<int> pivots(static_cast<std::size_t>(n));
  const SerialBlas serial;
  return LAPACKE_dgesv(LAPACK_COL_MAJOR, in, ir, a.data(), in, pivots.data(), b, in) == 0;
}

std::vector<double> thin_qr(index_t m, index_t n, std::vector<double>& a) {
  const int im = lapack_int(m), in = lapack_int(n), k = std::min(im, in);
  std::vector<double> tau(static_cast<std::size_t>(k)), r(static_cast<std::size_t>(k * n), 0.0);
  const SerialBlas serial;
  if (LAPACKE_dgeqrf(LAPACK_COL_MAJOR, im, in, a.data(), im, tau.data()) != 0) return {};
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i <= std::min<index_t>(j, k - 1); ++i)
      r[static_cast<std::size_t>(i + k * j)] = a[static_cast<std::size_t>(i + m * j)];
  if (LAPACKE_dorgqr(LAPACK_COL_MAJOR, im, k, k, a.data(), im, tau.data()) != 0) return {};
  a.resize(static_cast<std::size_t>(m * k));
  return r;
}

std::vector<double> inverse_sqrt(index_t n, std::vector<double> g) {
  const int in = lapack_int(n);
  std::vector<double> w(static_cast<std::size_t>(n));
  const SerialBlas serial;
  // G = V diag(w) V^T (eigenvalues ascending)
  if (LAPACKE_dsyev(LAPACK_COL_MAJOR, 'V', 'L', in, g.data(), in, w.data()) != 0 || !(w[0] > 0.0) ||
      !(w.back() <= kPolarGramMaxCond2 * w[0])) {
    return {};
  }
  // G^{-1/2} = V diag(1/sqrt(w)) V^T
  std::vector<double> h(static_cast<std::size_t>(n * n), 0.0);
  for (index_t l = 0; l < n; ++l) {
    const double inv = 1.0 / std::sqrt(w[static_cast<std::size_t>(l)]);
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < n; ++i)
        h[static_cast<std::size_t>(i + n * j)] +=
            g[static_cast<std::size_t>(i + n * l)] * inv * g[static_cast<std::size_t>(j + n * l)];
  }
  return h;
}

std::vector<double> polar_factor(index_t m, index_t n, std::vector<double> a) {
  const int im = lapack_int(m), in = lapack_int(n), k = std::min(im, in);
  const auto at = [m](index_t i, index_t j) { return static_cast<std::size_t>(i + m * j); };
  std::vector<double> p(static_cast<std::size_t>(m * n), 0.0);
  if (m >= n) {
    // P = A (A^T A)^{-1/2} where cond(A)^2 <= kPolarGramMaxCond2 (its columns orthonormal
    // to about cond(A)^2 eps); the Gram row by row: n (n + 1) / 2 independent sums
    std::vector<double> g(static_cast<std::size_t>(n * n), 0.0);
    for (index_t r = 0; r < m; ++r)
      for (index_t j = 0; j < n; ++j) {
        const double arj = a[at(r, j)];
        for (index_t i = j; i < n; ++i) g[static_cast<std::size_t>(i + n * j)] += a[at(r, i)] * arj;
      }
    if (const std::vector<double> h =
            may_be_well_conditioned(n, g) ? inverse_sqrt(n, std::move(g)) : std::vector<double>();
        !h.empty()) {
      for (index_t j = 0; j < n; ++j)
        for (index_t l = 0; l < n; ++l) {
          const double v = h[static_cast<std::size_t>(l + n * j)];
          for (index_t i = 0; i < m; ++i) p[at(i, j)] += a[at(i, l)] * v;
        }
      return p;
    }
  }
  const SerialBlas serial;
  // The thin SVD A = U S V^T, P = U V^T
  std::vector<double> s(static_cast<std::size_t>(k)), u(static_cast<std::size_t>(m * k)),
      vt(static_cast<std::size_t>(k * n));
  if (LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', im, in, a.data(), im, s.data(), u.data(), im, vt.data(),
                     k) != 0) {
    return {};
  }
  for (index_t j = 0; j < n; ++j)
    for (index_t l = 0; l < k; ++l) {
      const double v = vt[static_cast<std::size_t>(l + k * j)];
      for (index_t i = 0; i < m; ++i) p[at(i, j)] += u[static_cast<std::size_t>(i + m * l)] * v;
    }
  return p;
}

}  // namespace tenfold::detail
