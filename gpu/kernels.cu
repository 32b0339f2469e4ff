#include <algorithm>

#include "core/instantiate.hpp"
#include "cuda_check.cuh"
#include "kernels.cuh"

namespace tenfold::detail {
namespace {

constexpr int kThreads = 256;  // threads per block (a power of two: see block_reduce)

// Blocks for a grid-stride loop over `work` items.
unsigned grid_for(std::size_t work) {
  const std::size_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<std::size_t>(blocks, 8192));
}

__device__ std::size_t first_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ std::size_t grid_stride() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

struct Sum {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct Max {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};

// Combines the values of a block's threads in a fixed tree order; every thread
// gets the result. `shared` holds kThreads doubles.
template <class Combine>
__device__ double block_reduce(double v, double* shared, Combine combine) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const double result = shared[0];
  __syncthreads();  // shared may be reused right after
  return result;
}

template <class T>
__global__ void fill_kernel(T* dst, std::size_t n, T value) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) dst[i] = value;
}

template <class T>
__global__ void hadamard_kernel(std::size_t n, const T* x, T* y) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) y[i] *= x[i];
}

template <class T>
__global__ void axpy_kernel(std::size_t n, T alpha, const T* x, T* y) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) y[i] += alpha * x[i];
}

template <class T>
__global__ void khatri_rao_kernel(std::size_t ma, std::size_t mb, std::size_t total, const T* a,
                                  const T* b, T* c) {
  for (std::size_t idx = first_index(); idx < total; idx += grid_stride()) {
    // idx = i + ma*(j + mb*q)
    const std::size_t i = idx % ma, jq = idx / ma, j = jq % mb, q = jq / mb;
    c[idx] = a[i + q * ma] * b[j + q * mb];
  }
}

// One block per column (grid-stride over columns).
template <class T>
__global__ void normalize_columns_kernel(bool two_norm, index_t m, index_t n, T* a, index_t lda,
                                         T* lambda) {
  __shared__ double shared[kThreads];
  for (index_t j = blockIdx.x; j < n; j += gridDim.x) {
    T* col = a + j * lda;
    double s = 0.0;
    if (two_norm) {
      // s = sqrt(sum a_ij^2)
      for (index_t i = threadIdx.x; i < m; i += blockDim.x)
        s += static_cast<double>(col[i]) * col[i];
      s = sqrt(block_reduce(s, shared, Sum{}));
    } else {
      // s = max(max |a_ij|, 1)
      for (index_t i = threadIdx.x; i < m; i += blockDim.x)
        s = fmax(s, fabs(static_cast<double>(col[i])));
      s = fmax(block_reduce(s, shared, Max{}), 1.0);
    }
    if (threadIdx.x == 0) lambda[j] = static_cast<T>(s);
    if (s > 0.0) {
      const T inv = static_cast<T>(1.0 / s);
      for (index_t i = threadIdx.x; i < m; i += blockDim.x) col[i] *= inv;
    }
  }
}

template <class T>
__global__ void scale_columns_kernel(std::size_t m, std::size_t total, T* a, std::size_t lda,
                                     const T* s) {
  for (std::size_t idx = first_index(); idx < total; idx += grid_stride()) {
    const std::size_t i = idx % m, j = idx / m;
    a[i + j * lda] *= s[j];
  }
}

template <class T>
__global__ void add_diagonal_kernel(std::size_t n, T* a, std::size_t lda, T value) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) a[i + i * lda] += value;
}

template <class T>
__global__ void mirror_lower_kernel(std::size_t n, T* c, std::size_t ldc) {
  for (std::size_t idx = first_index(); idx < n * n; idx += grid_stride()) {
    const std::size_t i = idx % n, j = idx / n;
    if (i < j) c[i + j * ldc] = c[j + i * ldc];
  }
}

template <class T>
__global__ void find_nan_lower_kernel(std::size_t n, const T* a, std::size_t lda, int* found) {
  for (std::size_t idx = first_index(); idx < n * n; idx += grid_stride()) {
    const std::size_t i = idx % n, j = idx / n;
    if (i >= j && isnan(a[i + j * lda])) *found = 1;
  }
}

// First pass: partial[b] = sum of x_i y_i over the indices of block b's threads.
template <class T>
__global__ void dot_partial_kernel(std::size_t n, const T* x, const T* y, double* partial) {
  __shared__ double shared[kThreads];
  double s = 0.0;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    s += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  }
  s = block_reduce(s, shared, Sum{});
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// f = wx + (1 - w) .* m; partial[block] = the block's sum of (wx - w .* m)^2.
template <class T>
__global__ void masked_fill_partial_kernel(std::size_t n, const T* w, const T* wx, const T* m, T* f,
                                           double* partial) {
  __shared__ double shared[kThreads];
  double s = 0.0;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    f[i] = wx[i] + (T(1) - w[i]) * m[i];
    const double r = static_cast<double>(wx[i] - w[i] * m[i]);
    s += r * r;
  }
  s = block_reduce(s, shared, Sum{});
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Second pass, one block: partial[count] = sum of partial[0..count).
__global__ void sum_partials_kernel(int count, double* partial) {
  __shared__ double shared[kThreads];
  double s = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
  s = block_reduce(s, shared, Sum{});
  if (threadIdx.x == 0) partial[count] = s;
}

void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace

template <class T>
void launch_fill(cudaStream_t stream, T* dst, std::size_t n, T value) {
  if (n == 0) return;
  fill_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst, n, value);
  check_launch("fill kernel launch");
}

template <class T>
void launch_hadamard(cudaStream_t stream, std::size_t n, const T* x, T* y) {
  if (n == 0) return;
  hadamard_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, x, y);
  check_launch("hadamard kernel launch");
}

template <class T>
void launch_axpy(cudaStream_t stream, std::size_t n, T alpha, const T* x, T* y) {
  if (n == 0) return;
  axpy_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, alpha, x, y);
  check_launch("axpy kernel launch");
}

template <class T>
void launch_khatri_rao(cudaStream_t stream, index_t ma, index_t mb, index_t r, const T* a,
                       const T* b, T* c) {
  const auto total = static_cast<std::size_t>(ma * mb * r);
  if (total == 0) return;
  khatri_rao_kernel<<<grid_for(total), kThreads, 0, stream>>>(
      static_cast<std::size_t>(ma), static_cast<std::size_t>(mb), total, a, b, c);
  check_launch("khatri_rao kernel launch");
}

template <class T>
void launch_normalize_columns(cudaStream_t stream, ColumnNorm kind, index_t m, index_t n, T* a,
                              index_t lda, T* lambda) {
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<index_t>(n, 65535));
  normalize_columns_kernel<<<blocks, kThreads, 0, stream>>>(kind == ColumnNorm::two, m, n, a, lda,
                                                            lambda);
  check_launch("normalize_columns kernel launch");
}

template <class T>
void launch_scale_columns(cudaStream_t stream, index_t m, index_t n, T* a, index_t lda,
                          const T* s) {
  const auto total = static_cast<std::size_t>(m * n);
  if (total == 0) return;
  scale_columns_kernel<<<grid_for(total), kThreads, 0, stream>>>(
      static_cast<std::size_t>(m), total, a, static_cast<std::size_t>(lda), s);
  check_launch("scale_columns kernel launch");
}

template <class T>
void launch_add_diagonal(cudaStream_t stream, index_t n, T* a, index_t lda, T value) {
  if (n == 0) return;
  add_diagonal_kernel<<<grid_for(static_cast<std::size_t>(n)), kThreads, 0, stream>>>(
      static_cast<std::size_t>(n), a, static_cast<std::size_t>(lda), value);
  check_launch("add_diagonal kernel launch");
}

template <class T>
void launch_mirror_lower(cudaStream_t stream, index_t n, T* c, index_t ldc) {
  if (n < 2) return;
  const auto un = static_cast<std::size_t>(n);
  mirror_lower_kernel<<<grid_for(un * un), kThreads, 0, stream>>>(un, c,
                                                                  static_cast<std::size_t>(ldc));
  check_launch("mirror_lower kernel launch");
}

template <class T>
void launch_find_nan_lower(cudaStream_t stream, index_t n, const T* a, index_t lda, int* found) {
  check(cudaMemsetAsync(found, 0, sizeof(int), stream), "cudaMemsetAsync (NaN flag)");
  if (n == 0) return;
  const auto un = static_cast<std::size_t>(n);
  find_nan_lower_kernel<<<grid_for(un * un), kThreads, 0, stream>>>(
      un, a, static_cast<std::size_t>(lda), found);
  check_launch("find_nan_lower kernel launch");
}

template <class T>
void launch_dot(cudaStream_t stream, std::size_t n, const T* x, const T* y, double* partial) {
  dot_partial_kernel<<<kReduceBlocks, kThreads, 0, stream>>>(n, x, y, partial);
  check_launch("dot kernel launch");
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(kReduceBlocks, partial);
  check_launch("dot final-sum kernel launch");
}

template <class T>
void launch_masked_fill(cudaStream_t stream, std::size_t n, const T* w, const T* wx, const T* m,
                        T* f, double* partial) {
  masked_fill_partial_kernel<<<kReduceBlocks, kThreads, 0, stream>>>(n, w, wx, m, f, partial);
  check_launch("masked_fill kernel launch");
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(kReduceBlocks, partial);
  check_launch("masked_fill final-sum kernel launch");
}

#define TENFOLD_INSTANTIATE_KERNELS(T)                                                             \
  template void launch_fill<T>(cudaStream_t, T*, std::size_t, T);                                  \
  template void launch_hadamard<T>(cudaStream_t, std::size_t, const T*, T*);                       \
  template void launch_axpy<T>(cudaStream_t, std::size_t, T, const T*, T*);                        \
  template void launch_khatri_rao<T>(cudaStream_t, index_t, index_t, index_t, const T*, const T*,  \
                                     T*);                                                          \
  template void launch_normalize_columns<T>(cudaStream_t, ColumnNorm, index_t, index_t, T*,        \
                                            index_t, T*);                                          \
  template void launch_scale_columns<T>(cudaStream_t, index_t, index_t, T*, index_t, const T*);    \
  template void launch_add_diagonal<T>(cudaStream_t, index_t, T*, index_t, T);                     \
  template void launch_mirror_lower<T>(cudaStream_t, index_t, T*, index_t);                        \
  template void launch_find_nan_lower<T>(cudaStream_t, index_t, const T*, index_t, int*);          \
  template void launch_dot<T>(cudaStream_t, std::size_t, const T*, const T*, double*);             \
  template void launch_masked_fill<T>(cudaStream_t, std::size_t, const T*, const T*, const T*, T*, \
                                      double*);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_KERNELS)

}  // namespace tenfold::detail
