// Internal compute-backend interface: the primitives every algorithm is written
// over (see docs/primitives.md). Pointers passed to these functions are memory
// of the backend (host memory for cpu, device memory for cuda) unless a
// parameter name says `host`. Matrices are column-major with a leading dimension.
//
// Complex T (std::complex<float/double>, cpu backend only): Op::trans is the plain
// transpose; syrk is C = op(A)^T conj(op(A)) (Hermitian, the conjugate of the usual
// A^H A), potrf / potrs_right work with V = L L^H (solve_lower_right's Op::trans is
// B L^{-T}, the plain transpose: with G = U^T conj(U) = L L^H, Q = U L^{-T} has
// Q^H Q = I), syevd is the
// Hermitian eigensolver, dot is Re(x^H y) and sum_squares sum |x_i|^2
// (docs/algorithms.md, "Complex tensors").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "core/scalar.hpp"
#include "tenfold/backend.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::detail {

enum class Op { none, trans };
enum class ColumnNorm { two, max_or_one };

template <class T>
class Compute {
 public:
  virtual ~Compute() = default;
  virtual Backend kind() const = 0;
  /// Whether the backend's memory is host memory (cpu, reference): host data can then
  /// be used in place instead of uploaded.
  bool host_memory() const { return kind() != Backend::cuda; }
  /// Waits until all work queued on the backend has finished (phase timers).
  virtual void synchronize() = 0;

  // --- memory ---------------------------------------------------------------
  /// Bytes that can still be allocated on the backend (host memory for cpu, free
  /// device memory for cuda), for the estimates that run before large allocations.
  virtual std::uint64_t available_bytes() = 0;
  /// n elements (n >= 0; n == 0 may return nullptr). Throws DeviceError/bad_alloc.
  virtual T* allocate(std::size_t n) = 0;
  virtual void deallocate(T* p) noexcept = 0;
  virtual void upload(T* dst, const T* host_src, std::size_t n) = 0;
  virtual void download(T* host_dst, const T* src, std::size_t n) = 0;
  virtual void copy(T* dst, const T* src, std::size_t n) = 0;
  virtual void fill(T* dst, std::size_t n, T value) = 0;
  /// x = conj(x) (n elements); nothing for real T.
  virtual void conjugate(std::size_t n, T* x) = 0;

  // --- dense linear algebra ---------------------------------------------------
  /// C = alpha op(A) op(B) + beta C; op(A) is m x k, op(B) is k x n.
  virtual void gemm(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
                    const T* b, index_t ldb, T beta, T* c, index_t ldc) = 0;
  /// `batch` independent gemms; operand i starts at a + i*stride_a, etc.
  virtual void gemm_strided_batched(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha,
                                    const T* a, index_t lda, index_t stride_a, const T* b,
                                    index_t ldb, index_t stride_b, T beta, T* c, index_t ldc,
                                    index_t stride_c, index_t batch) = 0;
  /// dots(i, j) = sum_r alpha (A_i B)(r, j) W(r, j) for i < batch, j < n, with A_i = a +
  /// i*stride_a (m x k), one B (k x n) and one W (m x n): each product's columns dotted
  /// with W's (dots: batch x n, leading dimension ldd), summed as the products are formed;
  /// the products C_i = alpha A_i B written to c + i*stride_c (leading dimension ldc)
  /// unless c is null. Returns false, doing nothing, where the backend has no such kernel
  /// for the shape; the caller then forms the products with gemm_strided_batched.
  virtual bool gemm_column_dots(index_t /*m*/, index_t /*n*/, index_t /*k*/, T /*alpha*/,
                                const T* /*a*/, index_t /*lda*/, index_t /*stride_a*/,
                                const T* /*b*/, index_t /*ldb*/, const T* /*w*/, index_t /*ldw*/,
                                T* /*dots*/, index_t /*ldd*/, index_t /*batch*/, T* /*c*/,
                                index_t /*ldc*/, index_t /*stride_c*/) {
    return false;
  }
  /// C = alpha op(A)^T op(A) + beta C, C n x n, both triangles filled on return.
  /// trans == Op::trans: A is k x n and C = A^T A; Op::none: A is n x k and C = A A^T.
  virtual void syrk(Op trans, index_t n, index_t k, T alpha, const T* a, index_t lda, T beta, T* c,
                    index_t ldc) = 0;
  /// Cholesky A = L L^T in place (lower triangle). Returns false when A is not
  /// numerically positive definite (see cholesky_pivots_ok: a non-positive or NaN pivot,
  /// or pivots so unequal that A is singular to working precision); A is then unspecified.
  virtual bool potrf(index_t n, T* a, index_t lda) = 0;
  /// B = B (L L^T)^{-1} for the factor of potrf; B is m x n.
  virtual void potrs_right(index_t n, const T* l, index_t ldl, index_t m, T* b, index_t ldb) = 0;
  /// B = B L^{-T} (op = trans) or B = B L^{-1} (op = none) for a lower triangular n x n L
  /// (a factor of potrf) and an m x n B.
  virtual void solve_lower_right(Op op, index_t n, const T* l, index_t ldl, index_t m, T* b,
                                 index_t ldb) = 0;
  /// Symmetric eigen-decomposition: A (n x n) is overwritten by the eigenvectors,
  /// host_w receives the eigenvalues in ascending order. Throws NumericalError on failure
  /// (including a NaN entry).
  virtual void syevd(index_t n, T* a, index_t lda, real_t<T>* host_w) = 0;

  // --- element-wise and reductions -------------------------------------------
  /// y = x .* y (n elements).
  virtual void hadamard(std::size_t n, const T* x, T* y) = 0;
  /// y = alpha x + y (n elements).
  virtual void axpy(std::size_t n, T alpha, const T* x, T* y) = 0;
  /// Khatri-Rao product C = A (.) B: C(i + ma*j, r) = A(i, r) * B(j, r); A is ma x r,
  /// B is mb x r, C is (ma*mb) x r, all with leading dimension equal to rows.
  virtual void khatri_rao(index_t ma, index_t mb, index_t r, const T* a, const T* b, T* c) = 0;
  /// Normalises the columns of A (m x n) in place and writes their norms to lambda
  /// (backend memory, n). two: 2-norm; max_or_one: max(max |a_ij|, 1). Zero columns stay.
  virtual void normalize_columns(ColumnNorm kind, index_t m, index_t n, T* a, index_t lda,
                                 T* lambda) = 0;
  /// A(:, j) *= s[j] (s in backend memory).
  virtual void scale_columns(index_t m, index_t n, T* a, index_t lda, const T* s) = 0;
  /// A(i, i) += value for i < n.
  virtual void add_diagonal(index_t n, T* a, index_t lda, T value) = 0;
  /// Re sum conj(x_i) y_i, accumulated in double.
  virtual double dot(std::size_t n, const T* x, const T* y) = 0;
  /// sum |x_i|^2, accumulated in double.
  virtual double sum_squares(std::size_t n, const T* x) = 0;
  /// One EM step of a tensor with missing entries (n elements; w the 0/1 mask, wx the
  /// data with 0 where it is missing, m the model): f = wx + (1 - w) .* m (exactly the data
  /// where observed, exactly the model elsewhere), and the residual over the observed
  /// entries, sum |wx_i - w_i m_i|^2, returned (accumulated in double). f aliases none of
  /// the inputs.
  virtual double masked_fill(std::size_t n, const T* w, const T* wx, const T* m, T* f) = 0;
};

/// Whether the diagonal of a Cholesky factor L (host memory, n pivots, stride `inc`)
/// shows a numerically positive definite A = L L^T: every pivot finite and positive, and
/// (min L_ii / max L_ii)^2 >= n eps. The squared pivot ratio bounds cond(A) from below,
/// so a smaller one means A is singular to working precision and a solve with L would
/// amplify rounding errors by more than 1 / (n eps).
template <class T>
bool cholesky_pivots_ok(index_t n, const T* diag, index_t inc) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
  for (index_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(real_part(diag[i * inc]));
    if (!(d > 0.0) || !std::isfinite(d)) return false;
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  const double ratio = lo / hi;
  return n == 0 ||
         ratio * ratio >= static_cast<double>(n) * std::numeric_limits<real_t<T>>::epsilon();
}

/// The compute backend of the given kind. cuda: throws NotCompiled in a build
/// without it, DeviceError when no device can be used.
template <class T>
std::unique_ptr<Compute<T>> make_compute(Backend backend);

/// Owning buffer of backend memory (RAII).
template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Compute<T>& c, std::size_t n) : c_(&c), p_(c.allocate(n)), n_(n) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept
      : c_(o.c_), p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      c_ = o.c_;
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~Buffer() { reset(); }

  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  void reset() noexcept {
    if (p_ != nullptr) c_->deallocate(p_);
    p_ = nullptr;
    n_ = 0;
  }

 private:
  Compute<T>* c_ = nullptr;
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Grows `b` to hold at least n elements (contents are not preserved).
template <class T>
T* ensure(Compute<T>& c, Buffer<T>& b, std::size_t n) {
  if (b.size() < n) {
    b.reset();
    b = Buffer<T>(c, n);
  }
  return b.get();
}

}  // namespace tenfold::detail
