// Tall and thin products C = A op(B) (A m x k with m large, n small), the shape of the
// MTTKRP's tensor-sized contractions.
//
// OpenBLAS packs each block of A into a buffer and then multiplies it, and with beta = 0
// first zeroes C in a pass of its own; with n = R columns each element of A takes part
// in only 2n flops, so those memory-bound steps, not overlapped with the arithmetic,
// were a third of the product's time (docs/performance.md). This kernel packs op(B)
// (k x n, small) once per call, copies A a tile of 3 vectors of rows at a time into a
// buffer that stays in the core's cache for all panels of op(B), fetches the tile two
// ahead while it multiplies (across the products of a batch), and writes each element of
// C once, from registers.
#pragma once

#include "core/compute.hpp"
#include "core/simd.hpp"

namespace tenfold::detail {

/// Whether tall_gemm<T> with the kernel for `isa` can take this shape on this processor:
/// the processor runs `isa`, m at least one tile (3 vectors of rows), n small (columns of
/// op(B) padded to a panel, 8 with AVX-512 and 4 with AVX2, waste at most a fifth), k
/// short enough that a tile of op(A) stays in the core's cache. With `any_padding`, any
/// waste of the padded panel (for products whose alternative packs a tensor-sized operand).
template <class T>
bool tall_gemm_fits(index_t m, index_t n, index_t k, Isa isa, bool any_padding = false);

/// Whether the backend should call tall_gemm<T> (with processor_isa()) rather than BLAS:
/// wherever it fits (whole sweeps 1.1-1.3x faster than with OpenBLAS's products with
/// AVX2 too, in float and in double; docs/performance.md).
template <class T>
bool tall_gemm_suits(index_t m, index_t n, index_t k);

/// C_i = alpha op(A_i) op(B) + beta C_i for i < batch, with A_i = a + i stride_a (op(A_i)
/// m x k, column-major, leading dimension lda; a tile of A^T, the contraction over a
/// tensor's first mode, is transposed in registers into its packed copy), one op(B) (k x n) for
/// all, C_i = c + i stride_c (m x n, leading dimension ldc); with beta = 0, C is not read. Each
/// element of C is summed over k in order on one thread (the pool's threads take blocks of rows),
/// so the result does not depend on the thread count, nor on `isa` (the same fused
/// multiply-adds in the same order). Call only where tall_gemm_fits.
template <class T>
void tall_gemm(index_t m, index_t n, index_t k, T alpha, Op ta, const T* a, index_t lda,
               index_t stride_a, Op tb, const T* b, index_t ldb, T beta, T* c, index_t ldc,
               index_t stride_c, index_t batch, Isa isa = processor_isa());

/// dots(i, j) = sum_r alpha (A_i op(B))(r, j) W(r, j) for i < batch, j < n (dots batch x
/// n, leading dimension ldd; W m x n, leading dimension ldw, the same for every i): the
/// columns of each product dotted with those of W from its tiles in registers; the
/// products C_i = alpha A_i op(B) also written (c + i stride_c, leading dimension ldc)
/// unless c is null. Each dot is summed tile after tile on one thread, so the result
/// does not depend on the thread count. Call only where tall_gemm_fits.
template <class T>
void tall_gemm_dots(index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
                    index_t stride_a, Op tb, const T* b, index_t ldb, const T* w, index_t ldw,
                    T* dots, index_t ldd, index_t batch, T* c = nullptr, index_t ldc = 0,
                    index_t stride_c = 0, Isa isa = processor_isa());

}  // namespace tenfold::detail
