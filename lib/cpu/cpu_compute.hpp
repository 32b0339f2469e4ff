// CPU backend: OpenBLAS (BLAS, LAPACK through LAPACKE) and OpenMP.
#pragma once

#include "core/host_compute.hpp"

namespace tenfold::detail {

template <class T>
class CpuCompute final : public HostCompute<T> {
 public:
  Backend kind() const override { return Backend::cpu; }

  void gemm(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
            const T* b, index_t ldb, T beta, T* c, index_t ldc) override;
  void gemm_strided_batched(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha, const T* a,
                            index_t lda, index_t stride_a, const T* b, index_t ldb,
                            index_t stride_b, T beta, T* c, index_t ldc, index_t stride_c,
                            index_t batch) override;
  bool gemm_column_dots(index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
                        index_t stride_a, const T* b, index_t ldb, const T* w, index_t ldw, T* dots,
                        index_t ldd, index_t batch, T* c, index_t ldc, index_t stride_c) override;
  void syrk(Op trans, index_t n, index_t k, T alpha, const T* a, index_t lda, T beta, T* c,
            index_t ldc) override;
  bool potrf(index_t n, T* a, index_t lda) override;
  void potrs_right(index_t n, const T* l, index_t ldl, index_t m, T* b, index_t ldb) override;
  void syevd(index_t n, T* a, index_t lda, real_t<T>* host_w) override;
  void solve_lower_right(Op op, index_t n, const T* l, index_t ldl, index_t m, T* b,
                         index_t ldb) override;

  void hadamard(std::size_t n, const T* x, T* y) override;
  void axpy(std::size_t n, T alpha, const T* x, T* y) override;
  void khatri_rao(index_t ma, index_t mb, index_t r, const T* a, const T* b, T* c) override;
  void normalize_columns(ColumnNorm kind, index_t m, index_t n, T* a, index_t lda,
                         T* lambda) override;
  void scale_columns(index_t m, index_t n, T* a, index_t lda, const T* s) override;
  void add_diagonal(index_t n, T* a, index_t lda, T value) override;
  double dot(std::size_t n, const T* x, const T* y) override;
  double sum_squares(std::size_t n, const T* x) override;
  double masked_fill(std::size_t n, const T* w, const T* wx, const T* m, T* f) override;
};

extern template class CpuCompute<float>;
extern template class CpuCompute<double>;
extern template class CpuCompute<std::complex<float>>;
extern template class CpuCompute<std::complex<double>>;

}  // namespace tenfold::detail
