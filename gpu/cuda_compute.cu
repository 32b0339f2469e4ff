// CUDA backend: cuBLAS for the dense products and triangular solves, cuSOLVER for
// Cholesky and the symmetric eigensolver, small kernels (kernels.cu) for the rest.
// All work is queued on one stream; calls that return a value to the host wait for it.
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/instantiate.hpp"
#include "cuda_check.cuh"
#include "cuda_compute.hpp"
#include "kernels.cuh"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

// A library function with the name error messages give it.
template <class F>
struct Fn {
  F f;
  const char* name;
};
template <class F>
constexpr Fn<F> fn(F f, const char* name) {
  return {f, name};
}

// Calls a library function and checks its status.
template <class F, class... Args>
void call(const Fn<F>& function, Args... args) {
  check(function.f(args...), function.name);
}

// cuBLAS (64-bit size interface) and cuSOLVER functions of one precision.
template <class T>
struct Lib;

template <>
struct Lib<float> {
  static constexpr auto gemm = fn(&cublasSgemm_v2_64, "cublasSgemm_64");
  static constexpr auto gemm_strided_batched =
      fn(&cublasSgemmStridedBatched_64, "cublasSgemmStridedBatched_64");
  static constexpr auto syrk = fn(&cublasSsyrk_v2_64, "cublasSsyrk_64");
  static constexpr auto trsm = fn(&cublasStrsm_v2_64, "cublasStrsm_64");
  static constexpr auto potrf_buffer_size =
      fn(&cusolverDnSpotrf_bufferSize, "cusolverDnSpotrf_bufferSize");
  static constexpr auto potrf = fn(&cusolverDnSpotrf, "cusolverDnSpotrf");
  static constexpr auto syevd_buffer_size =
      fn(&cusolverDnSsyevd_bufferSize, "cusolverDnSsyevd_bufferSize");
  static constexpr auto syevd = fn(&cusolverDnSsyevd, "cusolverDnSsyevd");
};

template <>
struct Lib<double> {
  static constexpr auto gemm = fn(&cublasDgemm_v2_64, "cublasDgemm_64");
  static constexpr auto gemm_strided_batched =
      fn(&cublasDgemmStridedBatched_64, "cublasDgemmStridedBatched_64");
  static constexpr auto syrk = fn(&cublasDsyrk_v2_64, "cublasDsyrk_64");
  static constexpr auto trsm = fn(&cublasDtrsm_v2_64, "cublasDtrsm_64");
  static constexpr auto potrf_buffer_size =
      fn(&cusolverDnDpotrf_bufferSize, "cusolverDnDpotrf_bufferSize");
  static constexpr auto potrf = fn(&cusolverDnDpotrf, "cusolverDnDpotrf");
  static constexpr auto syevd_buffer_size =
      fn(&cusolverDnDsyevd_bufferSize, "cusolverDnDsyevd_bufferSize");
  static constexpr auto syevd = fn(&cusolverDnDsyevd, "cusolverDnDsyevd");
};

cublasOperation_t blas_op(Op op) { return op == Op::trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// cuSOLVER's dense interface takes 32-bit sizes.
int solver_int(index_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    throw InvalidArgument(std::string("size ") + std::to_string(v) + " of " + what +
                          " does not fit the 32-bit cuSOLVER interface");
  }
  return static_cast<int>(v);
}

// cudaMalloc that reports the request and the free memory when it fails.
void* device_malloc(std::size_t bytes) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status == cudaSuccess) return p;
  cudaGetLastError();  // an allocation failure is not sticky: clear it
  std::string message = "cudaMalloc of " + std::to_string(bytes) +
                        " bytes failed: " + cudaGetErrorName(status) + " (" +
                        cudaGetErrorString(status) + ")";
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    message += "; " + std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
               " bytes are free on the device";
  } else {
    cudaGetLastError();
  }
  throw DeviceError(message);
}

struct DeviceFree {
  void operator()(void* p) const noexcept {
    if (cudaFree(p) != cudaSuccess) cudaGetLastError();
  }
};
using DevicePtr = std::unique_ptr<void, DeviceFree>;

struct StreamDestroy {
  void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
};
struct CublasDestroy {
  void operator()(cublasHandle_t h) const noexcept { cublasDestroy(h); }
};
struct CusolverDestroy {
  void operator()(cusolverDnHandle_t h) const noexcept { cusolverDnDestroy(h); }
};

// Device memory that only grows (contents are not preserved).
class Scratch {
 public:
  void* get(std::size_t bytes) {
    if (bytes > bytes_) {
      p_.reset();
      bytes_ = 0;
      p_.reset(device_malloc(bytes));
      bytes_ = bytes;
    }
    return p_.get();
  }

 private:
  DevicePtr p_;
  std::size_t bytes_ = 0;
};

template <class T>
class CudaCompute final : public Compute<T> {
 public:
  explicit CudaCompute(int device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    stream_.reset(stream);
    cublasHandle_t blas = nullptr;
    check(cublasCreate(&blas), "cublasCreate");
    blas_.reset(blas);
    check(cublasSetStream(blas, stream), "cublasSetStream");
    // Default math mode: no TF32 for float, so results match the CPU's rounding.
    check(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    cusolverDnHandle_t solver = nullptr;
    check(cusolverDnCreate(&solver), "cusolverDnCreate");
    solver_.reset(solver);
    check(cusolverDnSetStream(solver, stream), "cusolverDnSetStream");
    info_.reset(device_malloc(2 * sizeof(int)));
    partial_.reset(device_malloc((kReduceBlocks + 1) * sizeof(double)));
  }

  Backend kind() const override { return Backend::cuda; }

  void synchronize() override { check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize"); }

  std::uint64_t available_bytes() override {
    std::size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    return free_bytes;
  }

  T* allocate(std::size_t n) override {
    if (n == 0) return nullptr;
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      throw DeviceError("device allocation of " + std::to_string(n) +
                        " elements overflows the byte count");
    }
    return static_cast<T*>(device_malloc(n * sizeof(T)));
  }

  void deallocate(T* p) noexcept override { DeviceFree{}(p); }

  void upload(T* dst, const T* host_src, std::size_t n) override {
    if (n == 0) return;
    check(cudaMemcpyAsync(dst, host_src, n * sizeof(T), cudaMemcpyHostToDevice, stream()),
          "cudaMemcpyAsync (host to device)");
    // The caller may release host_src on return, even if it is pinned memory.
    synchronize();
  }

  void download(T* host_dst, const T* src, std::size_t n) override {
    if (n == 0) return;
    check(cudaMemcpyAsync(host_dst, src, n * sizeof(T), cudaMemcpyDeviceToHost, stream()),
          "cudaMemcpyAsync (device to host)");
    synchronize();
  }

  void copy(T* dst, const T* src, std::size_t n) override {
    if (n == 0) return;
    check(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice, stream()),
          "cudaMemcpyAsync (device to device)");
  }

  void fill(T* dst, std::size_t n, T value) override { launch_fill(stream(), dst, n, value); }
  // Real types only: conjugation changes nothing.
  void conjugate(std::size_t /*n*/, T* /*x*/) override {}

  void gemm(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
            const T* b, index_t ldb, T beta, T* c, index_t ldc) override {
    if (m == 0 || n == 0) return;
    call(Lib<T>::gemm, blas(), blas_op(ta), blas_op(tb), m, n, k, &alpha, a, lda, b, ldb, &beta, c,
         ldc);
  }

  void gemm_strided_batched(Op ta, Op tb, index_t m, index_t n, index_t k, T alpha, const T* a,
                            index_t lda, index_t stride_a, const T* b, index_t ldb,
                            index_t stride_b, T beta, T* c, index_t ldc, index_t stride_c,
                            index_t batch) override {
    if (m == 0 || n == 0 || batch == 0) return;
    call(Lib<T>::gemm_strided_batched, blas(), blas_op(ta), blas_op(tb), m, n, k, &alpha, a, lda,
         static_cast<long long>(stride_a), b, ldb, static_cast<long long>(stride_b), &beta, c, ldc,
         static_cast<long long>(stride_c), batch);
  }

  void syrk(Op trans, index_t n, index_t k, T alpha, const T* a, index_t lda, T beta, T* c,
            index_t ldc) override {
    if (n == 0) return;
    // Lower triangle by cuBLAS, then copied into the upper one.
    call(Lib<T>::syrk, blas(), CUBLAS_FILL_MODE_LOWER, blas_op(trans), n, k, &alpha, a, lda, &beta,
         c, ldc);
    launch_mirror_lower(stream(), n, c, ldc);
  }

  bool potrf(index_t n, T* a, index_t lda) override {
    if (n == 0) return true;
    const int in = solver_int(n, "potrf n"), ia = solver_int(lda, "potrf lda");
    int lwork = 0;
    call(Lib<T>::potrf_buffer_size, solver(), CUBLAS_FILL_MODE_LOWER, in, a, ia, &lwork);
    T* work = static_cast<T*>(workspace_.get(static_cast<std::size_t>(lwork) * sizeof(T)));
    call(Lib<T>::potrf, solver(), CUBLAS_FILL_MODE_LOWER, in, a, ia, work, lwork, info());
    const int status = read_info();
    if (status < 0) {
      throw InvalidArgument("potrf: argument " + std::to_string(-status) + " is invalid");
    }
    if (status > 0) return false;
    // The pivots L(i, i), a strided column of the factor, decide numerical definiteness
    // as on the cpu backend.
    std::vector<T> pivots(static_cast<std::size_t>(n));
    check(cudaMemcpy2DAsync(pivots.data(), sizeof(T), a,
                            static_cast<std::size_t>(lda + 1) * sizeof(T), sizeof(T),
                            static_cast<std::size_t>(n), cudaMemcpyDeviceToHost, stream()),
          "cudaMemcpy2DAsync (Cholesky pivots)");
    synchronize();
    return cholesky_pivots_ok(n, pivots.data(), 1);
  }

  void potrs_right(index_t n, const T* l, index_t ldl, index_t m, T* b, index_t ldb) override {
    // B (L L^T)^{-1} = (B L^{-T}) L^{-1}: two triangular solves from the right.
    solve_lower_right(Op::trans, n, l, ldl, m, b, ldb);
    solve_lower_right(Op::none, n, l, ldl, m, b, ldb);
  }

  void solve_lower_right(Op op, index_t n, const T* l, index_t ldl, index_t m, T* b,
                         index_t ldb) override {
    if (m == 0 || n == 0) return;
    const T one = 1;
    call(Lib<T>::trsm, blas(), CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, blas_op(op),
         CUBLAS_DIAG_NON_UNIT, m, n, &one, l, ldl, b, ldb);
  }

  void syevd(index_t n, T* a, index_t lda, T* host_w) override {
    if (n == 0) return;
    const int in = solver_int(n, "syevd n"), ia = solver_int(lda, "syevd lda");
    T* w = static_cast<T*>(eigenvalues_.get(static_cast<std::size_t>(n) * sizeof(T)));
    int lwork = 0;
    call(Lib<T>::syevd_buffer_size, solver(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, in,
         a, ia, w, &lwork);
    T* work = static_cast<T*>(workspace_.get(static_cast<std::size_t>(lwork) * sizeof(T)));
    // cuSOLVER reports a NaN entry only as a failure to converge: A is looked at first,
    // as LAPACKE does (its check of the input, info = -5 on the CPU).
    launch_find_nan_lower(stream(), n, a, lda, info() + 1);
    call(Lib<T>::syevd, solver(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, in, a, ia, w,
         work, lwork, info());
    int status[2] = {0, 0};  // devInfo, then the NaN flag
    check(cudaMemcpyAsync(status, info(), sizeof status, cudaMemcpyDeviceToHost, stream()),
          "cudaMemcpyAsync (cuSOLVER devInfo)");
    synchronize();
    if (status[0] != 0 || status[1] != 0) {
      throw NumericalError("symmetric eigensolver (syevd) failed on a " + std::to_string(n) + "x" +
                           std::to_string(n) + " matrix, " +
                           (status[1] != 0 ? std::string("which has a NaN entry")
                                           : "info = " + std::to_string(status[0])));
    }
    download(host_w, w, static_cast<std::size_t>(n));
  }

  void hadamard(std::size_t n, const T* x, T* y) override { launch_hadamard(stream(), n, x, y); }

  void axpy(std::size_t n, T alpha, const T* x, T* y) override {
    launch_axpy(stream(), n, alpha, x, y);
  }

  void khatri_rao(index_t ma, index_t mb, index_t r, const T* a, const T* b, T* c) override {
    launch_khatri_rao(stream(), ma, mb, r, a, b, c);
  }

  void normalize_columns(ColumnNorm kind, index_t m, index_t n, T* a, index_t lda,
                         T* lambda) override {
    launch_normalize_columns(stream(), kind, m, n, a, lda, lambda);
  }

  void scale_columns(index_t m, index_t n, T* a, index_t lda, const T* s) override {
    launch_scale_columns(stream(), m, n, a, lda, s);
  }

  void add_diagonal(index_t n, T* a, index_t lda, T value) override {
    launch_add_diagonal(stream(), n, a, lda, value);
  }

  double dot(std::size_t n, const T* x, const T* y) override {
    if (n == 0) return 0.0;
    auto* partial = static_cast<double*>(partial_.get());
    launch_dot(stream(), n, x, y, partial);
    return reduction_result(partial);
  }

  double sum_squares(std::size_t n, const T* x) override { return dot(n, x, x); }

  double masked_fill(std::size_t n, const T* w, const T* wx, const T* m, T* f) override {
    if (n == 0) return 0.0;
    auto* partial = static_cast<double*>(partial_.get());
    launch_masked_fill(stream(), n, w, wx, m, f, partial);
    return reduction_result(partial);
  }

 private:
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t blas() const { return blas_.get(); }
  cusolverDnHandle_t solver() const { return solver_.get(); }
  int* info() const { return static_cast<int*>(info_.get()); }

  // partial[kReduceBlocks], the total of a two-pass reduction (waits for it).
  double reduction_result(const double* partial) {
    double result = 0.0;
    check(cudaMemcpyAsync(&result, partial + kReduceBlocks, sizeof(double), cudaMemcpyDeviceToHost,
                          stream()),
          "cudaMemcpyAsync (reduction result)");
    synchronize();
    return result;
  }

  // The devInfo of the last cuSOLVER call (waits for it).
  int read_info() {
    int status = 0;
    check(cudaMemcpyAsync(&status, info(), sizeof(int), cudaMemcpyDeviceToHost, stream()),
          "cudaMemcpyAsync (cuSOLVER devInfo)");
    synchronize();
    return status;
  }

  // Declaration order is destruction order in reverse: memory first, the stream last.
  std::unique_ptr<CUstream_st, StreamDestroy> stream_;
  std::unique_ptr<cublasContext, CublasDestroy> blas_;
  std::unique_ptr<cusolverDnContext, CusolverDestroy> solver_;
  DevicePtr info_;     // devInfo of cuSOLVER, then syevd's NaN flag (two ints)
  DevicePtr partial_;  // reduction partial sums, then the result (kReduceBlocks + 1 doubles)
  Scratch workspace_;  // cuSOLVER workspace
  Scratch eigenvalues_;
};

// Device index from TENFOLD_CUDA_DEVICE (default 0), checked against `count`.
int selected_device(int count) {
  const char* env = std::getenv("TENFOLD_CUDA_DEVICE");
  if (env == nullptr || *env == '\0') return 0;
  const std::string value(env);
  int device = -1;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), device);
  if (error != std::errc() || end != value.data() + value.size() || device < 0 || device >= count) {
    throw DeviceError("TENFOLD_CUDA_DEVICE='" + value +
                      "' does not name a CUDA device (expected an index from 0 to " +
                      std::to_string(count - 1) + ")");
  }
  return device;
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

template <class T>
std::unique_ptr<Compute<T>> make_cuda_compute() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw DeviceError(std::string("no CUDA device available: ") + cudaGetErrorString(status) +
                      " (" + cudaGetErrorName(status) + ")");
  }
  if (count == 0) throw DeviceError("no CUDA device available: the driver reports no device");
  return std::make_unique<CudaCompute<T>>(selected_device(count));
}

#define TENFOLD_INSTANTIATE_MAKE_CUDA_COMPUTE(T) \
  template std::unique_ptr<Compute<T>> make_cuda_compute<T>();
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_MAKE_CUDA_COMPUTE)

}  // namespace tenfold::detail
