#include "reference/reference_compute.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "core/instantiate.hpp"
#include "core/memory.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

// Element (i, j) of op(A) for column-major A with leading dimension ld, in double.
template <class T>
double op_at(Op op, const T* a, index_t ld, index_t i, index_t j) {
  return static_cast<double>(op == Op::none ? a[i + j * ld] : a[j + i * ld]);
}

// out = alpha s + beta out, where beta = 0 does not read out (as BLAS).
template <class T>
void update(T& out, double alpha, double s, double beta) {
  out = static_cast<T>(beta == 0.0 ? alpha * s : alpha * s + beta * static_cast<double>(out));
}

}  // namespace

// C(i, j) = alpha sum_l op(A)(i, l) op(B)(l, j) + beta C(i, j).
template <class T>
void ReferenceCompute<T>::gemm(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha, const T* a,
                               index_t lda, const T* b, index_t ldb, T beta, T* c, index_t ldc) {
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < m; ++i) {
      double s = 0.0;
      for (index_t l = 0; l < k; ++l) s += op_at(ta, a, lda, i, l) * op_at(tb, b, ldb, l, j);
      update(c[i + j * ldc], alpha, s, beta);
    }
}

template <class T>
void ReferenceCompute<T>::gemm_strided_batched(Op ta, Op tb, index_t m, index_t n, index_t k,
                                               T alpha, const T* a, index_t lda, index_t stride_a,
                                               const T* b, index_t ldb, index_t stride_b, T beta,
                                               T* c, index_t ldc, index_t stride_c, index_t batch) {
  for (index_t p = 0; p < batch; ++p)
    gemm(ta, tb, m, n, k, alpha, a + p * stride_a, lda, b + p * stride_b, ldb, beta,
         c + p * stride_c, ldc);
}

// C(i, j) = alpha sum_l op(A)(l, i) op(A)(l, j) + beta C(i, j), op(A) = A (trans, k x n)
// or A^T (none, A n x k).
template <class T>
void ReferenceCompute<T>::syrk(Op trans, index_t n, index_t k, T alpha, const T* a, index_t lda,
                               T beta, T* c, index_t ldc) {
  const Op op = trans == Op::trans ? Op::none : Op::trans;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = j; i < n; ++i) {
      double s = 0.0;
      for (index_t l = 0; l < k; ++l) s += op_at(op, a, lda, l, i) * op_at(op, a, lda, l, j);
      update(c[i + j * ldc], alpha, s, beta);
      c[j + i * ldc] = c[i + j * ldc];
    }
}

// Column by column: L(j, j)^2 = A(j, j) - sum_{l<j} L(j, l)^2, then
// L(i, j) = (A(i, j) - sum_{l<j} L(i, l) L(j, l)) / L(j, j) for i > j.
template <class T>
bool ReferenceCompute<T>::potrf(index_t n, T* a, index_t lda) {
  for (index_t j = 0; j < n; ++j) {
    double d = static_cast<double>(a[j + j * lda]);
    for (index_t l = 0; l < j; ++l)
      d -= static_cast<double>(a[j + l * lda]) * static_cast<double>(a[j + l * lda]);
    if (!(d > 0.0)) return false;
    const double pivot = std::sqrt(d);
    a[j + j * lda] = static_cast<T>(pivot);
    for (index_t i = j + 1; i < n; ++i) {
      double s = static_cast<double>(a[i + j * lda]);
      for (index_t l = 0; l < j; ++l)
        s -= static_cast<double>(a[i + l * lda]) * static_cast<double>(a[j + l * lda]);
      a[i + j * lda] = static_cast<T>(s / pivot);
    }
  }
  return cholesky_pivots_ok(n, a, lda + 1);
}

namespace {

// One row z of B (in double) times L^{-T}: z L^T = b forward,
// z_j = (b_j - sum_{q<j} z_q L(j, q)) / L(j, j).
template <class T>
void forward_row(index_t n, const T* l, index_t ldl, std::vector<double>& z) {
  const auto at = [&](index_t i, index_t j) { return static_cast<double>(l[i + j * ldl]); };
  for (index_t j = 0; j < n; ++j) {
    for (index_t q = 0; q < j; ++q) z[j] -= z[q] * at(j, q);
    z[j] /= at(j, j);
  }
}

// One row z of B times L^{-1}: x L = z backward, x_j = (z_j - sum_{q>j} x_q L(q, j)) / L(j, j).
template <class T>
void backward_row(index_t n, const T* l, index_t ldl, std::vector<double>& z) {
  const auto at = [&](index_t i, index_t j) { return static_cast<double>(l[i + j * ldl]); };
  for (index_t j = n - 1; j >= 0; --j) {
    for (index_t q = j + 1; q < n; ++q) z[j] -= z[q] * at(q, j);
    z[j] /= at(j, j);
  }
}

// Applies `solve` (in double) to each row of the m x n matrix B.
template <class T, class Solve>
void for_each_row(index_t n, index_t m, T* b, index_t ldb, Solve solve) {
  std::vector<double> z(static_cast<std::size_t>(n));
  for (index_t r = 0; r < m; ++r) {
    for (index_t j = 0; j < n; ++j) z[j] = static_cast<double>(b[r + j * ldb]);
    solve(z);
    for (index_t j = 0; j < n; ++j) b[r + j * ldb] = static_cast<T>(z[j]);
  }
}

}  // namespace

// Row by row, X (L L^T) = B: Z = B L^{-T} forward, then X = Z L^{-1} backward.
template <class T>
void ReferenceCompute<T>::potrs_right(index_t n, const T* l, index_t ldl, index_t m, T* b,
                                      index_t ldb) {
  for_each_row(n, m, b, ldb, [&](std::vector<double>& z) {
    forward_row(n, l, ldl, z);
    backward_row(n, l, ldl, z);
  });
}

template <class T>
void ReferenceCompute<T>::solve_lower_right(Op op, index_t n, const T* l, index_t ldl, index_t m,
                                            T* b, index_t ldb) {
  for_each_row(n, m, b, ldb, [&](std::vector<double>& z) {
    if (op == Op::trans) {
      forward_row(n, l, ldl, z);
    } else {
      backward_row(n, l, ldl, z);
    }
  });
}

// Cyclic Jacobi on the lower triangle of A in double: each rotation in the (p, q) plane,
// A <- J^T A J with tan(angle) = t the smaller root of t^2 + 2 theta t - 1 = 0,
// theta = (A_qq - A_pp) / (2 A_pq), zeroes A_pq; V <- V J collects the eigenvectors.
template <class T>
void ReferenceCompute<T>::syevd(index_t n, T* a, index_t lda, T* host_w) {
  const auto un = static_cast<std::size_t>(n);
  std::vector<double> s(un * un), v(un * un, 0.0);
  for (index_t j = 0; j < n; ++j) {
    v[j + j * un] = 1.0;
    for (index_t i = j; i < n; ++i) {
      const double x = static_cast<double>(a[i + j * lda]);
      if (std::isnan(x)) {
        throw NumericalError("symmetric eigensolver (syevd) failed on a " + std::to_string(n) +
                             "x" + std::to_string(n) + " matrix, which has a NaN entry");
      }
      s[i + j * un] = s[j + i * un] = x;
    }
  }
  const auto rotate = [](double* x, std::size_t stride, std::size_t p, std::size_t q, double c,
                         double sn, std::size_t n_) {
    for (std::size_t k = 0; k < n_; ++k) {
      const double xp = x[k + p * stride], xq = x[k + q * stride];
      x[k + p * stride] = c * xp - sn * xq;
      x[k + q * stride] = sn * xp + c * xq;
    }
  };
  // A sweep that rotates nothing ends the iteration: every A_pq is then below rounding
  // of both A_pp and A_qq, or below rounding of ||A||_F (the backward error of a
  // normwise stable solver such as LAPACK's), and is set to zero.
  double frobenius = 0.0;
  for (const double x : s) frobenius += x * x;
  const double negligible = std::numeric_limits<double>::epsilon() * std::sqrt(frobenius);
  bool rotated = true;
  for (int sweep = 0; rotated && sweep < 100; ++sweep) {
    rotated = false;
    for (std::size_t p = 0; p < un; ++p)
      for (std::size_t q = p + 1; q < un; ++q) {
        const double apq = s[p + q * un], g = 100.0 * std::abs(apq);
        const double app = std::abs(s[p + p * un]), aqq = std::abs(s[q + q * un]);
        if ((app + g == app && aqq + g == aqq) || std::abs(apq) <= negligible) {
          s[p + q * un] = s[q + p * un] = 0.0;
          continue;
        }
        rotated = true;
        const double theta = (s[q + q * un] - s[p + p * un]) / (2.0 * apq);
        const double t = (theta >= 0.0 ? 1.0 : -1.0) / (std::abs(theta) + std::hypot(theta, 1.0));
        const double c = 1.0 / std::hypot(t, 1.0), sn = t * c;
        rotate(s.data(), un, p, q, c, sn, un);  // columns: A J
        for (std::size_t k = 0; k < un; ++k) {  // rows: J^T (A J)
          const double xp = s[p + k * un], xq = s[q + k * un];
          s[p + k * un] = c * xp - sn * xq;
          s[q + k * un] = sn * xp + c * xq;
        }
        rotate(v.data(), un, p, q, c, sn, un);
      }
  }
  if (rotated || !std::isfinite(std::accumulate(s.begin(), s.end(), 0.0))) {
    throw NumericalError("symmetric eigensolver (syevd) failed on a " + std::to_string(n) + "x" +
                         std::to_string(n) + " matrix: Jacobi sweeps did not converge");
  }
  // Ascending eigenvalues, their vectors in the same order.
  std::vector<std::size_t> order(un);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return s[x + x * un] < s[y + y * un]; });
  for (std::size_t j = 0; j < un; ++j) {
    host_w[j] = static_cast<T>(s[order[j] + order[j] * un]);
    for (std::size_t i = 0; i < un; ++i)
      a[static_cast<index_t>(i) + static_cast<index_t>(j) * lda] =
          static_cast<T>(v[i + order[j] * un]);
  }
}

template <class T>
void ReferenceCompute<T>::hadamard(std::size_t n, const T* x, T* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] *= x[i];
}

template <class T>
void ReferenceCompute<T>::axpy(std::size_t n, T alpha, const T* x, T* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// C(i + ma j, r) = A(i, r) B(j, r).
template <class T>
void ReferenceCompute<T>::khatri_rao(index_t ma, index_t mb, index_t r, const T* a, const T* b,
                                     T* c) {
  for (index_t q = 0; q < r; ++q)
    for (index_t j = 0; j < mb; ++j)
      for (index_t i = 0; i < ma; ++i) c[i + ma * j + ma * mb * q] = a[i + ma * q] * b[j + mb * q];
}

template <class T>
void ReferenceCompute<T>::normalize_columns(ColumnNorm kind, index_t m, index_t n, T* a,
                                            index_t lda, T* lambda) {
  for (index_t j = 0; j < n; ++j) {
    T* col = a + j * lda;
    const double s = column_norm(kind, m, col);
    lambda[j] = static_cast<T>(s);
    // Divided in double, where the cpu backend multiplies by the rounded inverse.
    if (s > 0.0)
      for (index_t i = 0; i < m; ++i) col[i] = static_cast<T>(col[i] / s);
  }
}

template <class T>
void ReferenceCompute<T>::scale_columns(index_t m, index_t n, T* a, index_t lda, const T* s) {
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < m; ++i) a[i + j * lda] *= s[j];
}

template <class T>
void ReferenceCompute<T>::add_diagonal(index_t n, T* a, index_t lda, T value) {
  for (index_t i = 0; i < n; ++i) a[i + i * lda] += value;
}

template <class T>
double ReferenceCompute<T>::dot(std::size_t n, const T* x, const T* y) {
  double s = 0.0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * y[i];
  return s;
}

template <class T>
double ReferenceCompute<T>::sum_squares(std::size_t n, const T* x) {
  return dot(n, x, x);
}

template <class T>
double ReferenceCompute<T>::masked_fill(std::size_t n, const T* w, const T* wx, const T* m, T* f) {
  double r2 = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    f[i] = wx[i] + (T(1) - w[i]) * m[i];
    r2 += abs2(wx[i] - w[i] * m[i]);
  }
  return r2;
}

#define TENFOLD_INSTANTIATE_REFERENCE_COMPUTE(T) template class ReferenceCompute<T>;
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_REFERENCE_COMPUTE)

}  // namespace tenfold::detail
