// Timings of the CUDA backend on one device (run by bench/gpu/run.sh):
// - cuBLAS GEMM rate, timed with CUDA events, as the ceiling of this run;
// - CP-ALS per iteration on a random dense 400^3 tensor at rank 64, and the
//   MTTKRP rate against that ceiling;
// - CP-ALS of the query/key tensors of a synthetic 12-layer BERT-base, kept in
//   Kruskal form (the attention adapter's operand), at rank 384.
// CP-ALS is timed by its own phase timers, which wait for the device after each
// phase. Prints a table to stdout and, when OUT is set, to $OUT/gpu_results.txt.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/random.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace {

using tenfold::index_t;

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    throw tenfold::DeviceError(std::string(call) + " failed: " + cudaGetErrorString(status));
  }
}

void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw tenfold::DeviceError(std::string(call) + " failed: " + cublasGetStatusString(status));
  }
}

template <class T>
const char* precision_name() {
  return std::is_same_v<T, double> ? "float64" : "float32";
}

std::string format(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

// Rows of (what, float64 value, float32 value), printed aligned.
class Table {
 public:
  void add(std::string what, std::string f64, std::string f32) {
    rows_.push_back({std::move(what), std::move(f64), std::move(f32)});
  }
  void note(std::string line) { notes_.push_back(std::move(line)); }
  std::string str() const {
    std::size_t w[3] = {4, 7, 7};
    for (const auto& r : rows_)
      for (int i = 0; i < 3; ++i) w[i] = std::max(w[i], r[i].size());
    std::ostringstream s;
    auto line = [&](const std::string& a, const std::string& b, const std::string& c) {
      s << a << std::string(w[0] - a.size(), ' ') << " | " << std::string(w[1] - b.size(), ' ') << b
        << " | " << std::string(w[2] - c.size(), ' ') << c << "\n";
    };
    line("what", "float64", "float32");
    s << std::string(w[0], '-') << "-|-" << std::string(w[1], '-') << "-|-"
      << std::string(w[2], '-') << "\n";
    for (const auto& r : rows_) line(r[0], r[1], r[2]);
    for (const auto& n : notes_) s << n << "\n";
    return s.str();
  }

 private:
  std::vector<std::array<std::string, 3>> rows_;
  std::vector<std::string> notes_;
};

struct DeviceArray {
  explicit DeviceArray(std::size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void* p = nullptr;
};

// GFLOP/s of C = A B (n x n), median of `reps` products timed with CUDA events.
template <class T>
double gemm_rate(index_t n, int reps) {
  const auto nn = static_cast<std::size_t>(n * n);
  std::vector<T> host(nn);
  tenfold::detail::Rng rng(1);
  for (T& v : host) v = static_cast<T>(rng.uniform() - 0.5);
  DeviceArray a(nn * sizeof(T)), b(nn * sizeof(T)), c(nn * sizeof(T));
  check(cudaMemcpy(a.p, host.data(), nn * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(b.p, host.data(), nn * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  const T one = 1, zero = 0;
  auto product = [&] {
    if constexpr (std::is_same_v<T, double>) {
      check(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(n),
                        static_cast<int>(n), &one, static_cast<const T*>(a.p), static_cast<int>(n),
                        static_cast<const T*>(b.p), static_cast<int>(n), &zero,
                        static_cast<T*>(c.p), static_cast<int>(n)),
            "cublasDgemm");
    } else {
      check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(n),
                        static_cast<int>(n), &one, static_cast<const T*>(a.p), static_cast<int>(n),
                        static_cast<const T*>(b.p), static_cast<int>(n), &zero,
                        static_cast<T*>(c.p), static_cast<int>(n)),
            "cublasSgemm");
    }
  };
  product();
  product();
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<double> seconds;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(start), "cudaEventRecord");
    product();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    seconds.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasDestroy(h);
  std::sort(seconds.begin(), seconds.end());
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return flops / seconds[seconds.size() / 2] * 1e-9;
}

struct DenseCp {
  double seconds_per_iteration = 0.0;
  double mttkrp_gflops = 0.0;
  double fit = 0.0;
};

// CP-ALS on a uniform random dim^3 tensor: a fixed number of iterations.
template <class T>
DenseCp dense_cp(index_t dim, index_t rank, int iterations) {
  tenfold::Tensor<T> x({dim, dim, dim});
  tenfold::detail::Rng rng(2);
  for (T& v : x.values()) v = static_cast<T>(rng.uniform());
  tenfold::CpOptions<T> o;
  o.rank = rank;
  o.tol = 0.0;
  o.seed = 3;
  o.backend = tenfold::Backend::cuda;
  o.max_iters = 1;
  tenfold::cp_als(x, o);  // warm-up: library loading, handles, kernels
  o.max_iters = iterations;
  const auto r = tenfold::cp_als(x, o);
  const auto& t = r.timings;
  // A sweep with the dimension tree: about two full contractions, 2 * 2 prod(I) R flops.
  const double sweep_flops = 2.0 * 2.0 * static_cast<double>(x.numel()) * static_cast<double>(rank);
  return {(t.total - t.init) / r.iterations, sweep_flops * r.iterations / t.mttkrp * 1e-9, r.fit};
}

struct AttentionCp {
  double seconds_per_layer = 0.0;
  double seconds_per_iteration = 0.0;
  double iterations = 0.0;
  double fit = 0.0;
  int eigen_fallbacks = 0;
  int time_limited = 0;
};

// Query/key tensor of one layer in Kruskal form: T[h] = W_Q^h W_K^h^T / sqrt(d), as
// D_k = H d components (head indicator, column of W_Q, column of W_K).
template <class T>
tenfold::KTensor<T> attention_layer(index_t heads, index_t width, index_t head_width,
                                    tenfold::detail::Rng& rng) {
  const index_t dk = heads * head_width;
  tenfold::KTensor<T> k;
  k.weights.assign(static_cast<std::size_t>(dk),
                   static_cast<T>(1.0 / std::sqrt(static_cast<double>(head_width))));
  tenfold::Matrix<T> heads_of(heads, dk);
  for (index_t c = 0; c < dk; ++c) heads_of(c / head_width, c) = T(1);
  k.factors.push_back(std::move(heads_of));
  const double sigma = 1.0 / std::sqrt(static_cast<double>(width));  // N(0, 1/D)
  for (int w = 0; w < 2; ++w) {
    tenfold::Matrix<T> f(width, dk);
    for (T& v : f.values()) v = static_cast<T>(sigma * rng.normal());
    k.factors.push_back(std::move(f));
  }
  return k;
}

template <class T>
AttentionCp attention_cp(int layers, index_t rank) {
  tenfold::detail::Rng rng(4);
  tenfold::CpOptions<T> o;
  o.rank = rank;
  o.max_iters = 100;
  o.tol = 1e-6;
  o.time_limit = 20.0;  // guard: the whole program must stay within minutes
  o.backend = tenfold::Backend::cuda;
  AttentionCp a;
  double iteration_seconds = 0.0;
  for (int layer = 0; layer < layers; ++layer) {
    const auto x = attention_layer<T>(12, 768, 64, rng);
    o.seed = static_cast<std::uint64_t>(layer);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = tenfold::cp_als(x, o);
    a.seconds_per_layer +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    iteration_seconds += (r.timings.total - r.timings.init) / r.iterations;
    a.iterations += r.iterations;
    a.fit += r.fit;
    a.eigen_fallbacks += r.eigen_fallbacks;
    a.time_limited += r.stop == tenfold::CpStop::time_limit ? 1 : 0;
  }
  a.seconds_per_layer /= layers;
  a.seconds_per_iteration = iteration_seconds / layers;
  a.iterations /= layers;
  a.fit /= layers;
  return a;
}

std::string device_line() {
  int device = 0, driver = 0, runtime = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  std::ostringstream s;
  s << "device " << device << ": " << p.name << ", compute capability " << p.major << "." << p.minor
    << ", " << p.multiProcessorCount << " SMs, "
    << format("%.1f", static_cast<double>(p.totalGlobalMem) / (1u << 30)) << " GiB; driver "
    << driver / 1000 << "." << driver % 1000 / 10 << ", runtime " << runtime / 1000 << "."
    << runtime % 1000 / 10;
  return s.str();
}

void run() {
  constexpr index_t kGemm = 8192, kDim = 400, kRank = 64, kAttentionRank = 384;
  constexpr int kIterations = 10, kLayers = 12;
  Table table;
  table.note(device_line());

  const double gemm64 = gemm_rate<double>(kGemm, 10), gemm32 = gemm_rate<float>(kGemm, 10);
  table.add("cuBLAS GEMM 8192^3, GFLOP/s", format("%.0f", gemm64), format("%.0f", gemm32));

  const DenseCp d64 = dense_cp<double>(kDim, kRank, kIterations);
  const DenseCp d32 = dense_cp<float>(kDim, kRank, kIterations);
  const std::string dense = "CP-ALS 400^3 R=64";
  table.add(dense + ", s/iteration", format("%.5f", d64.seconds_per_iteration),
            format("%.5f", d32.seconds_per_iteration));
  table.add(dense + ", MTTKRP GFLOP/s", format("%.0f", d64.mttkrp_gflops),
            format("%.0f", d32.mttkrp_gflops));
  table.add(dense + ", MTTKRP / GEMM rate", format("%.3f", d64.mttkrp_gflops / gemm64),
            format("%.3f", d32.mttkrp_gflops / gemm32));
  table.add(dense + ", fit after 10 iterations", format("%.6f", d64.fit), format("%.6f", d32.fit));

  const AttentionCp a64 = attention_cp<double>(kLayers, kAttentionRank);
  const AttentionCp a32 = attention_cp<float>(kLayers, kAttentionRank);
  const std::string att = "attention 12x768x768 R=384 (Kruskal), ";
  table.add(att + "s/layer", format("%.3f", a64.seconds_per_layer),
            format("%.3f", a32.seconds_per_layer));
  table.add(att + "12 layers, s", format("%.2f", a64.seconds_per_layer * kLayers),
            format("%.2f", a32.seconds_per_layer * kLayers));
  table.add(att + "s/iteration", format("%.5f", a64.seconds_per_iteration),
            format("%.5f", a32.seconds_per_iteration));
  table.add(att + "mean iterations", format("%.1f", a64.iterations),
            format("%.1f", a32.iterations));
  table.add(att + "mean fit", format("%.6f", a64.fit), format("%.6f", a32.fit));
  table.add(att + "eigen fallbacks", std::to_string(a64.eigen_fallbacks),
            std::to_string(a32.eigen_fallbacks));
  table.add(att + "layers stopped by time limit", std::to_string(a64.time_limited),
            std::to_string(a32.time_limited));
#if __has_include("tenfold/tucker.hpp")
  table.note("tucker: header present, ST-HOSVD 600^3 ranks 60 not timed by this program yet");
#else
  table.note("tucker: not built");
#endif

  const std::string out = table.str();
  std::cout << out << std::flush;
  if (const char* dir = std::getenv("OUT"); dir != nullptr && *dir != '\0') {
    std::ofstream f(std::string(dir) + "/gpu_results.txt");
    f << out;
  }
}

}  // namespace

int main() {
  try {
    run();
  } catch (const std::exception& e) {
    std::cerr << "gpu_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
