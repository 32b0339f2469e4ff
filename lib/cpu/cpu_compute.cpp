#include "cpu/cpu_compute.hpp"

#include <complex>

// LAPACKE's complex types as std::complex (the same layout as C's _Complex).
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "core/memory.hpp"
#include "core/parallel.hpp"
#include "core/simd.hpp"
#include "core/thread_pool.hpp"
#include "cpu/tall_gemm.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

int blas_int(index_t v, const char* what) {
  if (v < 0 || v > INT_MAX) {
    throw InvalidArgument(std::string("size ") + std::to_string(v) + " of " + what +
                          " does not fit the 32-bit BLAS interface");
  }
  return static_cast<int>(v);
}

CBLAS_TRANSPOSE blas_op(Op op) { return op == Op::trans ? CblasTrans : CblasNoTrans; }

// The BLAS and LAPACK routine of each value type (s, d, c, z), with one signature.
template <class T>
struct Blas;

template <>
struct Blas<float> {
  static constexpr auto gemm = cblas_sgemm;
  static constexpr auto gemv = cblas_sgemv;
  static constexpr auto trsm = cblas_strsm;
  static constexpr auto potrf = LAPACKE_spotrf_work;
  static constexpr auto syevd = LAPACKE_ssyevd;
};

template <>
struct Blas<double> {
  static constexpr auto gemm = cblas_dgemm;
  static constexpr auto gemv = cblas_dgemv;
  static constexpr auto trsm = cblas_dtrsm;
  static constexpr auto potrf = LAPACKE_dpotrf_work;
  static constexpr auto syevd = LAPACKE_dsyevd;
};

// Complex: scalars are passed by address; syevd is the Hermitian heevd.
template <class T, auto Gemm, auto Gemv, auto Trsm, auto Potrf, auto Heevd>
struct ComplexBlas {
  static void gemm(CBLAS_ORDER o, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                   T alpha, const T* a, int lda, const T* b, int ldb, T beta, T* c, int ldc) {
    Gemm(o, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
  }
  static void gemv(CBLAS_ORDER o, CBLAS_TRANSPOSE t, int m, int n, T alpha, const T* a, int lda,
                   const T* x, int incx, T beta, T* y, int incy) {
    Gemv(o, t, m, n, &alpha, a, lda, x, incx, &beta, y, incy);
  }
  static void trsm(CBLAS_ORDER o, CBLAS_SIDE side, CBLAS_UPLO uplo, CBLAS_TRANSPOSE t,
                   CBLAS_DIAG diag, int m, int n, T alpha, const T* a, int lda, T* b, int ldb) {
    Trsm(o, side, uplo, t, diag, m, n, &alpha, a, lda, b, ldb);
  }
  static constexpr auto potrf = Potrf;
  static constexpr auto syevd = Heevd;
};

template <>
struct Blas<std::complex<float>> : ComplexBlas<std::complex<float>, cblas_cgemm, cblas_cgemv,
                                               cblas_ctrsm, LAPACKE_cpotrf_work, LAPACKE_cheevd> {};

template <>
struct Blas<std::complex<double>> : ComplexBlas<std::complex<double>, cblas_zgemm, cblas_zgemv,
                                                cblas_ztrsm, LAPACKE_zpotrf_work, LAPACKE_zheevd> {
};

// One single-threaded BLAS GEMM call, C = alpha op(A) op(B) + beta C (sizes checked by
// the caller).
template <class T>
void blas_gemm(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
               const T* b, index_t ldb, T beta, T* c, index_t ldc) {
  const auto i = [](index_t v) { return static_cast<int>(v); };
  const SerialBlas serial;
  Blas<T>::gemm(CblasColMajor, blas_op(ta), blas_op(tb), i(m), i(n), i(k), alpha, a, i(lda), b,
                i(ldb), beta, c, i(ldc));
}

// B = B op(L)^{-1}, L lower triangular n x n, B m x n, on the calling thread (op = trans:
// the plain transpose, also for complex T).
// Halving L = [L11 0; L21 L22] puts most of the work into GEMMs, which OpenBLAS runs
// faster than its trsm (docs/performance.md): op = trans: X1 = B1 L11^{-T}, X2 = (B2 - X1 L21^T)
// L22^{-T}; op = none: X2 = B2 L22^{-1}, X1 = (B1 - X2 L21) L11^{-1}.
template <class T>
void recursive_solve(Op op, index_t n, const T* l, index_t ldl, index_t m, T* b, index_t ldb) {
  if (n <= 32) {
    const auto i = [](index_t v) { return static_cast<int>(v); };
    const SerialBlas serial;
    Blas<T>::trsm(CblasColMajor, CblasRight, CblasLower, blas_op(op), CblasNonUnit, i(m), i(n),
                  T(1), l, i(ldl), b, i(ldb));
    return;
  }
  const index_t n1 = (n / 2 + 7) / 8 * 8, n2 = n - n1;
  const T* l21 = l + n1;
  const T* l22 = l + n1 + n1 * ldl;
  T* b2 = b + n1 * ldb;
  if (op == Op::trans) {
    recursive_solve(op, n1, l, ldl, m, b, ldb);
    blas_gemm(Op::none, Op::trans, m, n2, n1, T(-1), b, ldb, l21, ldl, T(1), b2, ldb);
    recursive_solve(op, n2, l22, ldl, m, b2, ldb);
  } else {
    recursive_solve(op, n2, l22, ldl, m, b2, ldb);
    blas_gemm(Op::none, Op::none, m, n1, n2, T(-1), b2, ldb, l21, ldl, T(1), b, ldb);
    recursive_solve(op, n1, l, ldl, m, b, ldb);
  }
}

// B = B L^{-H} (L^{-T} for real T), on the calling thread: the first half of a solve with
// V = L L^H. Complex T: one trsm (the halving above has no conjugate transpose of L21).
template <class T>
void solve_adjoint(index_t n, const T* l, index_t ldl, index_t m, T* b, index_t ldb) {
  if constexpr (is_complex_v<T>) {
    const SerialBlas serial;
    Blas<T>::trsm(CblasColMajor, CblasRight, CblasLower, CblasConjTrans, CblasNonUnit,
                  static_cast<int>(m), static_cast<int>(n), T(1), l, static_cast<int>(ldl), b,
                  static_cast<int>(ldb));
  } else {
    recursive_solve(Op::trans, n, l, ldl, m, b, ldb);
  }
}

// body(lo, hi) over [0, n) in contiguous pieces, a few per thread of the pool when the
// elements touched (`work`) are worth it, in one piece on the caller otherwise.
template <class F>
void in_pieces(index_t n, double work, F body) {
  const index_t pieces = work > 65536.0 ? std::min<index_t>(n, 4 * pool_threads()) : 1;
  parallel_for(pieces, [&](index_t p) { body(n * p / pieces, n * (p + 1) / pieces); });
}

// Whether an m x n product over an inner dimension k is better cut along k: k much
// longer than both sides of C (a Gram of a short, very wide matrix, for example), where
// blocks of C would each pack the whole long operand again. Each of the `chunks`
// partial products needs its own m x n buffer, so C must be small.
bool split_inner(index_t m, index_t n, index_t k, index_t chunks) {
  return k >= 4 * std::max(m, n) &&
         static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(chunks) <= 4e6;
}

// C = alpha sum_p P_p + beta C over `chunks` contiguous ranges K_p of the inner
// dimension k, where partial(k0, kc, P) writes the product over rows k0 .. k0+kc-1 into
// the m x n buffer P (leading dimension m). One task per range, each into its own
// buffer; the buffers are then summed in range order, so the bits depend on the
// thread count (through `chunks`) but not on which thread ran what. Only C's entries
// with i >= j are written when `lower` is set. With beta = 0, C is not read.
template <class T, class Partial>
void sum_over_inner(index_t m, index_t n, index_t k, index_t chunks, T alpha, T beta, T* c,
                    index_t ldc, bool lower, Partial partial) {
  const auto mn = static_cast<std::size_t>(m * n);
  std::vector<T> parts(mn * static_cast<std::size_t>(chunks));
  const index_t per = (k + chunks - 1) / chunks;
  parallel_for(chunks, [&](index_t p) {
    const index_t k0 = std::min(k, p * per), kc = std::min(per, k - k0);
    if (kc > 0) partial(k0, kc, parts.data() + static_cast<std::size_t>(p) * mn);
  });
  in_pieces(
      n, static_cast<double>(mn * static_cast<std::size_t>(chunks)), [&](index_t lo, index_t hi) {
        for (index_t j = lo; j < hi; ++j) {
          for (index_t i = lower ? j : 0; i < m; ++i) {
            T sum = 0;
            for (index_t p = 0; p < chunks; ++p)
              sum += parts[static_cast<std::size_t>(p) * mn + static_cast<std::size_t>(i + j * m)];
            T& out = c[i + j * ldc];
            out = beta == T(0) ? alpha * sum : alpha * sum + beta * out;
          }
        }
      });
}

// C = conj(C) on the lower triangle of the n x n C.
template <class T>
void conjugate_lower(index_t n, T* c, index_t ldc) {
  for (index_t j = 0; j < n; ++j)
    for (index_t i = j; i < n; ++i) c[i + j * ldc] = std::conj(c[i + j * ldc]);
}

}  // namespace

template <class T>
void CpuCompute<T>::gemm(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha, const T* a,
                         index_t lda, const T* b, index_t ldb, T beta, T* c, index_t ldc) {
  if (m == 0 || n == 0) return;
  blas_int(n, "gemm n");
  blas_int(ldc, "gemm ldc");
  const int im = blas_int(m, "gemm m"), ik = blas_int(k, "gemm k");
  const int ia = blas_int(lda, "gemm lda"), ib = blas_int(ldb, "gemm ldb");
  if (n == 1 && k > 0) {
    // Matrix-vector product: B is a k-vector with stride 1 (none) or ldb (trans).
    const int incb = tb == Op::none ? 1 : ib;
    const int rows = ta == Op::none ? im : ik, cols = ta == Op::none ? ik : im;
    const SerialBlas serial;
    Blas<T>::gemv(CblasColMajor, blas_op(ta), rows, cols, alpha, a, ia, b, incb, beta, c, 1);
    return;
  }
  if constexpr (!is_complex_v<T>) {  // (the tall kernel is real)
    if (tall_gemm_suits<T>(m, n, k)) {
      // Tall and thin: A read in place, no packing pass (lib/cpu/tall_gemm.hpp).
      tall_gemm(m, n, k, alpha, ta, a, lda, 0, tb, b, ldb, beta, c, ldc, 0, 1);
      return;
    }
    if (ta == Op::trans && tb == Op::none && m <= 32 &&
        tall_gemm_fits<T>(n, m, k, processor_isa(), true)) {
      // Short and wide C = A^T B (a TTM on a tensor's first mode, B the tensor): C^T = B^T A
      // is tall and thin, formed by the tall kernel reading B in place (OpenBLAS would pack
      // all of B first), then transposed into C.
      std::vector<T> ct(static_cast<std::size_t>(n * m));
      tall_gemm(n, m, k, alpha, Op::trans, b, ldb, 0, Op::none, a, lda, T(0), ct.data(), n, 0, 1);
      in_pieces(n, static_cast<double>(n * m), [&](index_t lo, index_t hi) {
        for (index_t j = lo; j < hi; ++j)
          for (index_t i = 0; i < m; ++i) {
            T& cij = c[i + j * ldc];
            cij = (beta == T(0) ? T(0) : beta * cij) + ct[static_cast<std::size_t>(j + i * n)];
          }
      });
      return;
    }
  }
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int threads = pool_threads();
  if (flops < 4e6 || threads < 2) {
    blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (const index_t chunks = 2 * threads; split_inner(m, n, k, chunks)) {
    // Rows k0.. of op(A)'s columns: column k0 of A (none) or row k0 (trans); rows
    // k0.. of op(B): row k0 of B (none) or column k0 (trans).
    const index_t step_a = ta == Op::none ? lda : 1, step_b = tb == Op::none ? 1 : ldb;
    sum_over_inner(m, n, k, chunks, alpha, beta, c, ldc, false,
                   [&](index_t k0, index_t kc, T* part) {
                     blas_gemm(ta, tb, m, n, kc, T(1), a + k0 * step_a, lda, b + k0 * step_b, ldb,
                               T(0), part, m);
                   });
    return;
  }
  // C is cut along its longer side into blocks that the pool's threads take one at a
  // time, each block one single-threaded GEMM (rows i0.. of op(A) start at column i0 of
  // A when A is transposed; columns j0.. of op(B) at row j0 of B when B is transposed).
  // Tall and skinny C (the MTTKRP's big contractions) or short and wide C (a TTM on the
  // first mode) get blocks of at least 256 that depend on the shape only; other shapes
  // two blocks per thread, so a thread that the scheduler delays holds up little.
  const bool rows = m >= n;
  const index_t len = rows ? m : n, other = rows ? n : m;
  const index_t per_thread = (len + 2 * threads - 1) / (2 * threads);
  const index_t block = other <= 128 && len >= 8 * other
                            ? std::max<index_t>(256, (len / 32 + 63) / 64 * 64)
                            : std::max<index_t>(16, (per_thread + 15) / 16 * 16);
  const index_t step = rows ? (ta == Op::none ? 1 : lda) : (tb == Op::none ? ldb : 1);
  parallel_for((len + block - 1) / block, [&](index_t part) {
    const index_t i0 = part * block, size = std::min(block, len - i0);
    if (rows) {
      blas_gemm(ta, tb, size, n, k, alpha, a + i0 * step, lda, b, ldb, beta, c + i0, ldc);
    } else {
      blas_gemm(ta, tb, m, size, k, alpha, a, lda, b + i0 * step, ldb, beta, c + i0 * ldc, ldc);
    }
  });
}

template <class T>
void CpuCompute<T>::gemm_strided_batched(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha,
                                         const T* a, index_t lda, index_t stride_a, const T* b,
                                         index_t ldb, index_t stride_b, T beta, T* c, index_t ldc,
                                         index_t stride_c, index_t batch) {
  // Small products, or many of them: one task per product, each single-threaded, with
  // no synchronisation inside a product; a few large ones: one after the other, each
  // cut into blocks by gemm. Tiny batches stay serial. Sizes are checked here, before
  // any task starts.
  for (index_t v : {m, n, k, lda, ldb, ldc}) blas_int(v, "batched gemm");
  if constexpr (!is_complex_v<T>) {
    if (stride_b == 0 && batch > 1 && tall_gemm_suits<T>(m, n, k)) {
      // Tall and thin products with one op(B): one kernel call packs op(B) once.
      tall_gemm(m, n, k, alpha, ta, a, lda, stride_a, tb, b, ldb, beta, c, ldc, stride_c, batch);
      return;
    }
  }
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const auto product = [&](index_t i) {
    gemm(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
         c + i * stride_c, ldc);
  };
  if (batch > 1 && work * static_cast<double>(batch) > 65536.0 &&
      (work < 262144.0 || batch >= 4 * static_cast<index_t>(pool_threads()))) {
    parallel_for(batch, product);
  } else {
    for (index_t i = 0; i < batch; ++i) product(i);
  }
}

template <class T>
bool CpuCompute<T>::gemm_column_dots(index_t m, index_t n, index_t k, T alpha, const T* a,
                                     index_t lda, index_t stride_a, const T* b, index_t ldb,
                                     const T* w, index_t ldw, T* dots, index_t ldd, index_t batch,
                                     T* c, index_t ldc, index_t stride_c) {
  if constexpr (is_complex_v<T>) {  // (the tall kernel is real)
    return false;
  } else {
    if (batch < 1 || !tall_gemm_suits<T>(m, n, k)) return false;
    tall_gemm_dots(m, n, k, alpha, a, lda, stride_a, Op::none, b, ldb, w, ldw, dots, ldd, batch, c,
                   ldc, stride_c);
    return true;
  }
}

template <class T>
void CpuCompute<T>::syrk(Op trans, index_t n, index_t k, T alpha, const T* a, index_t lda, T beta,
                         T* c, index_t ldc) {
  if (n == 0) return;
  const int in = blas_int(n, "syrk n"), ik = blas_int(k, "syrk k");
  const int ia = blas_int(lda, "syrk lda"), ic = blas_int(ldc, "syrk ldc");
  if constexpr (is_complex_v<T>) {
    // C = op(A)^T conj(op(A)): herk gives A A^H (none) directly and A^H A = conj(C) (trans),
    // conjugated after. alpha and beta are real here (the Grams use 1 and 0 or 1).
    {
      const SerialBlas serial;
      const auto herk = [](auto... args) {
        if constexpr (std::is_same_v<T, std::complex<double>>) {
          cblas_zherk(args...);
        } else {
          cblas_cherk(args...);
        }
      };
      if (trans == Op::trans && beta != T(0)) conjugate_lower(n, c, ldc);
      herk(CblasColMajor, CblasLower, trans == Op::trans ? CblasConjTrans : CblasNoTrans, in, ik,
           alpha.real(), a, ia, beta.real(), c, ic);
      if (trans == Op::trans) conjugate_lower(n, c, ldc);
    }
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < j; ++i) c[i + j * ldc] = std::conj(c[j + i * ldc]);
    return;
  } else {
    const int threads = pool_threads();
    // op == trans: C = A^T A with A k x n; rows k0.. of A (trans) or columns k0.. (none).
    const CBLAS_TRANSPOSE t = trans == Op::trans ? CblasTrans : CblasNoTrans;
    const index_t row_step = trans == Op::trans ? 1 : lda;
    const auto serial_syrk = [&](index_t k0, index_t kc, T alpha_, T beta_, T* out, int ldo) {
      const SerialBlas serial;
      if constexpr (std::is_same_v<T, double>) {
        cblas_dsyrk(CblasColMajor, CblasLower, t, in, static_cast<int>(kc), alpha_,
                    a + k0 * row_step, ia, beta_, out, ldo);
      } else {
        cblas_ssyrk(CblasColMajor, CblasLower, t, in, static_cast<int>(kc), alpha_,
                    a + k0 * row_step, ia, beta_, out, ldo);
      }
    };
    if (static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(k) < 4e6 ||
        threads < 2) {
      serial_syrk(0, ik, alpha, beta, c, ic);
    } else if (const index_t chunks = 2 * threads; split_inner(n, n, k, chunks)) {
      // A short, very wide A: partial Grams over ranges of k, summed in order.
      sum_over_inner(
          n, n, k, chunks, alpha, beta, c, ldc, true,
          [&](index_t k0, index_t kc, T* part) { serial_syrk(k0, kc, T(1), T(0), part, in); });
    } else {
      // Column blocks J = j0..j1 of the lower triangle, one GEMM each, taken by the pool's
      // threads: C(j0:n, J) = op(A)(:, j0:n)^T op(A)(:, J), where op(A) = A (k x n) for
      // trans and A^T for none. Four blocks per thread even out the triangle's work.
      const index_t per_block = (n + 4 * threads - 1) / (4 * threads);
      const index_t block = std::max<index_t>(32, (per_block + 15) / 16 * 16);
      const index_t col = trans == Op::trans ? lda : 1;  // where column j of op(A) starts
      parallel_for((n + block - 1) / block, [&](index_t part) {
        const index_t j0 = part * block, width = std::min(block, n - j0);
        const T* aj = a + j0 * col;
        if (trans == Op::trans) {
          blas_gemm(Op::trans, Op::none, n - j0, width, k, alpha, aj, lda, aj, lda, beta,
                    c + j0 + j0 * ldc, ldc);
        } else {
          blas_gemm(Op::none, Op::trans, n - j0, width, k, alpha, aj, lda, aj, lda, beta,
                    c + j0 + j0 * ldc, ldc);
        }
      });
    }
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < j; ++i) c[i + j * ldc] = c[j + i * ldc];
  }
}

template <class T>
bool CpuCompute<T>::potrf(index_t n, T* a, index_t lda) {
  const int in = blas_int(n, "potrf n"), ia = blas_int(lda, "potrf lda");
  // On one thread: OpenBLAS's threaded potrf was slower than one thread at every size
  // measured (docs/performance.md, "What changed what").
  const SerialBlas serial;
  // The _work variant skips LAPACKE's NaN scan, which reports a NaN entry as an
  // invalid argument (info = -4).
  const lapack_int info = Blas<T>::potrf(LAPACK_COL_MAJOR, 'L', in, a, ia);
  if (info < 0) throw InvalidArgument("potrf: argument " + std::to_string(-info) + " is invalid");
  if (info > 0) return false;
  // OpenBLAS does not stop at a NaN pivot, but a NaN entry of A always reaches the
  // diagonal of L: L(i, i)^2 = A(i, i) - sum_k L(i, k)^2; the pivot check catches it.
  return cholesky_pivots_ok(n, a, lda + 1);
}

template <class T>
void CpuCompute<T>::solve_lower_right(Op op, index_t n, const T* l, index_t ldl, index_t m, T* b,
                                      index_t ldb) {
  if (m == 0 || n == 0) return;
  for (index_t v : {n, m, ldl, ldb}) blas_int(v, "solve_lower_right");
  const SerialBlas serial;
  recursive_solve(op, n, l, ldl, m, b, ldb);
}

template <class T>
void CpuCompute<T>::potrs_right(index_t n, const T* l, index_t ldl, index_t m, T* b, index_t ldb) {
  if (m == 0 || n == 0) return;
  for (index_t v : {n, m, ldl, ldb}) blas_int(v, "potrs");
  // B (L L^H)^{-1} = (B L^{-H}) L^{-1} (L^H = L^T for real T). Rows of B are independent: the
  // pool's threads take blocks of rows, each solved on one thread by recursive_solve. Small solves
  // stay on the calling thread.
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(n);
  const auto threads = static_cast<index_t>(pool_threads());
  const index_t block =
      work < 4e6 || threads < 2 ? m : std::max<index_t>(16, (m + threads - 1) / threads);
  parallel_for((m + block - 1) / block, [&](index_t part) {
    const index_t i0 = part * block, rows = std::min(block, m - i0);
    solve_adjoint(n, l, ldl, rows, b + i0, ldb);
    recursive_solve(Op::none, n, l, ldl, rows, b + i0, ldb);
  });
}

template <class T>
void CpuCompute<T>::syevd(index_t n, T* a, index_t lda, real_t<T>* host_w) {
  if (n == 0) return;
  const int in = blas_int(n, "syevd n"), ia = blas_int(lda, "syevd lda");
  // On one thread: the tridiagonal reduction is n matrix-vector products, each a
  // synchronisation point for threaded BLAS (docs/performance.md).
  const SerialBlas serial;
  const lapack_int info = Blas<T>::syevd(LAPACK_COL_MAJOR, 'V', 'L', in, a, ia, host_w);
  if (info != 0) {
    // LAPACKE reports a NaN entry of A (its 5th argument) as info = -5.
    throw NumericalError(
        "symmetric eigensolver (syevd) failed on a " + std::to_string(n) + "x" + std::to_string(n) +
        " matrix, " +
        (info == -5 ? std::string("which has a NaN entry") : "info = " + std::to_string(info)));
  }
}

template <class T>
void CpuCompute<T>::hadamard(std::size_t n, const T* x, T* y) {
  in_pieces(static_cast<index_t>(n), static_cast<double>(n), [&](index_t lo, index_t hi) {
    for (index_t i = lo; i < hi; ++i) y[i] *= x[i];
  });
}

template <class T>
void CpuCompute<T>::axpy(std::size_t n, T alpha, const T* x, T* y) {
  in_pieces(static_cast<index_t>(n), static_cast<double>(n), [&](index_t lo, index_t hi) {
    for (index_t i = lo; i < hi; ++i) y[i] += alpha * x[i];
  });
}

template <class T>
void CpuCompute<T>::khatri_rao(index_t ma, index_t mb, index_t r, const T* a, const T* b, T* c) {
  // C(:, q) = kron(B(:, q), A(:, q)).
  // Pair t = j + q * mb is the column block C(:, q)(j * ma .. (j + 1) * ma).
  in_pieces(mb * r, static_cast<double>(ma * mb * r), [&](index_t lo, index_t hi) {
    for (index_t t = lo; t < hi; ++t) {
      const index_t q = t / mb;
      const T bj = b[t];
      const T* aq = a + q * ma;
      T* cq = c + t * ma;
      for (index_t i = 0; i < ma; ++i) cq[i] = aq[i] * bj;
    }
  });
}

template <class T>
void CpuCompute<T>::normalize_columns(ColumnNorm kind, index_t m, index_t n, T* a, index_t lda,
                                      T* lambda) {
  in_pieces(n, static_cast<double>(m * n), [&](index_t lo, index_t hi) {
    for (index_t j = lo; j < hi; ++j) {
      T* col = a + j * lda;
      const double s = column_norm(kind, m, col);
      lambda[j] = static_cast<T>(s);
      if (s > 0.0) {
        const T inv = static_cast<T>(1.0 / s);
        for (index_t i = 0; i < m; ++i) col[i] *= inv;
      }
    }
  });
}

template <class T>
void CpuCompute<T>::scale_columns(index_t m, index_t n, T* a, index_t lda, const T* s) {
  in_pieces(n, static_cast<double>(m * n), [&](index_t lo, index_t hi) {
    for (index_t j = lo; j < hi; ++j) {
      T* col = a + j * lda;
      for (index_t i = 0; i < m; ++i) col[i] *= s[j];
    }
  });
}

template <class T>
void CpuCompute<T>::add_diagonal(index_t n, T* a, index_t lda, T value) {
  for (index_t i = 0; i < n; ++i) a[i + i * lda] += value;
}

template <class T>
double CpuCompute<T>::dot(std::size_t n, const T* x, const T* y) {
  return chunked_sum(n, [&](std::size_t i) {
    if constexpr (is_complex_v<T>) {
      // Re(conj(x) y) = Re x Re y + Im x Im y
      return static_cast<double>(x[i].real()) * y[i].real() +
             static_cast<double>(x[i].imag()) * y[i].imag();
    } else {
      return static_cast<double>(x[i]) * y[i];
    }
  });
}

namespace {

// sum_i p[i]^2 in double, in 8 interleaved partial sums (so that the loop vectorises;
// their order is fixed).
template <class R>
TENFOLD_INLINE_INTO_CLONE inline double sum_squares_block(const R* p, std::size_t n) {
  double acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) acc[j] += static_cast<double>(p[i + j]) * p[i + j];
  double tail = 0.0;
  for (; i < n; ++i) tail += static_cast<double>(p[i]) * p[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}
TENFOLD_SIMD_CLONES double sum_squares_of(const float* p, std::size_t n) {
  return sum_squares_block(p, n);
}
TENFOLD_SIMD_CLONES double sum_squares_of(const double* p, std::size_t n) {
  return sum_squares_block(p, n);
}

}  // namespace

template <class T>
double CpuCompute<T>::sum_squares(std::size_t n, const T* x) {
  // |x|^2 of a complex entry: the squares of its two parts, an array of 2n reals.
  using R = real_t<T>;
  const auto* p = reinterpret_cast<const R*>(x);
  return chunked_block_sum(n * (is_complex_v<T> ? 2 : 1), [&](std::size_t lo, std::size_t hi) {
    return sum_squares_of(p + lo, hi - lo);
  });
}

template <class T>
double CpuCompute<T>::masked_fill(std::size_t n, const T* w, const T* wx, const T* m, T* f) {
  // One pass: f = wx + (1 - w) .* m and sum |wx - w .* m|^2 per chunk (chunked_block_sum's
  // order).
  return chunked_block_sum(n, [&](std::size_t lo, std::size_t hi) {
    double r2 = 0.0;
    for (std::size_t i = lo; i < hi; ++i) {
      f[i] = wx[i] + (T(1) - w[i]) * m[i];
      r2 += abs2(wx[i] - w[i] * m[i]);
    }
    return r2;
  });
}

template class CpuCompute<float>;
template class CpuCompute<double>;
template class CpuCompute<std::complex<float>>;
template class CpuCompute<std::complex<double>>;

}  // namespace tenfold::detail
