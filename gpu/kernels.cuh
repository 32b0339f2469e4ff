// Element-wise kernels and reductions of the CUDA backend. Each launcher queues
// its kernel on `stream`, checks the launch, and does nothing for empty input.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/compute.hpp"

namespace tenfold::detail {

/// Blocks of the first pass of a reduction: fixed, so that sums do not depend on
/// the device and are identical from run to run.
inline constexpr int kReduceBlocks = 256;

template <class T>
void launch_fill(cudaStream_t stream, T* dst, std::size_t n, T value);

/// y = x .* y
template <class T>
void launch_hadamard(cudaStream_t stream, std::size_t n, const T* x, T* y);
template <class T>
void launch_axpy(cudaStream_t stream, std::size_t n, T alpha, const T* x, T* y);

/// C(i + ma*j, q) = A(i, q) * B(j, q)
template <class T>
void launch_khatri_rao(cudaStream_t stream, index_t ma, index_t mb, index_t r, const T* a,
                       const T* b, T* c);

/// Column norms of A (m x n) into lambda, nonzero columns divided by theirs.
template <class T>
void launch_normalize_columns(cudaStream_t stream, ColumnNorm kind, index_t m, index_t n, T* a,
                              index_t lda, T* lambda);

/// A(:, j) *= s[j]
template <class T>
void launch_scale_columns(cudaStream_t stream, index_t m, index_t n, T* a, index_t lda, const T* s);

/// A(i, i) += value
template <class T>
void launch_add_diagonal(cudaStream_t stream, index_t n, T* a, index_t lda, T value);

/// C(i, j) = C(j, i) for i < j: copies the lower triangle into the upper one.
template <class T>
void launch_mirror_lower(cudaStream_t stream, index_t n, T* c, index_t ldc);

/// *found = 1 when the lower triangle of A (n x n) holds a NaN, else 0.
template <class T>
void launch_find_nan_lower(cudaStream_t stream, index_t n, const T* a, index_t lda, int* found);

/// partial[kReduceBlocks] = sum x_i y_i in double; partial holds kReduceBlocks + 1 doubles.
template <class T>
void launch_dot(cudaStream_t stream, std::size_t n, const T* x, const T* y, double* partial);
/// f = wx + (1 - w) .* m; partial[kReduceBlocks] = sum (wx - w .* m)^2 (as launch_dot).
template <class T>
void launch_masked_fill(cudaStream_t stream, std::size_t n, const T* w, const T* wx, const T* m,
                        T* f, double* partial);

}  // namespace tenfold::detail
