// Timings of the CUDA backend on one device (run by bench/gpu/run.sh):
// - cuBLAS GEMM rate, timed with CUDA events, as the ceiling of this run;
// - CP-ALS per iteration on a random dense 400^3 tensor at rank 64 (no compression),
//   the MTTKRP rate against that ceiling, and the whole call with the default options;
// - ST-HOSVD of a 600^3 tensor of multilinear rank (60, 60, 60) plus noise, and
//   its Gram and TTM rates against that ceiling;
// - attention::compress of a synthetic 12-layer BERT-base at rank 384.
// The algorithms are timed by their own phase timers, which wait for the device
// after each phase, or around the whole call. Prints a table to stdout and, when
// OUT is set, to $OUT/gpu_results.txt.
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
#include "tenfold/attention.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"
#include "tucker_common.hpp"

namespace {

using tenfold::index_t;
using tenfold::bench::hash_noise;

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
  double seconds_per_iteration = 0.0;  // the phases of the sweeps, without setup and teardown
  double mttkrp_gflops = 0.0;
  double fit = 0.0;
  tenfold::CpTimings per_iteration;  // each phase's seconds over the iterations
  double default_call = 0.0;         // seconds of the whole call with the default options
};

// CP-ALS on a uniform random dim^3 tensor: a fixed number of iterations of the plain
// iteration (compression off, random start), then the whole call with the default options
// (compressed first where that pays).
template <class T>
DenseCp dense_cp(index_t dim, index_t rank, int iterations) {
  tenfold::Tensor<T> x({dim, dim, dim});
  tenfold::detail::Rng rng(2);
  for (T& v : x.values()) v = static_cast<T>(rng.uniform());
  tenfold::CpOptions o;
  o.rank = rank;
  o.tol = 0.0;
  o.seed = 3;
  o.init = tenfold::CpInit::random;
  o.compress = tenfold::CpCompress::off;
  o.backend = tenfold::Backend::cuda;
  o.max_iters = 1;
  tenfold::cp_als(x, o);  // warm-up: library loading, handles, kernels
  o.max_iters = iterations;
  const auto r = tenfold::cp_als(x, o);
  const auto& t = r.timings;
  // A sweep with the dimension tree: about two full contractions, 2 * 2 prod(I) R flops.
  const double sweep_flops = 2.0 * 2.0 * static_cast<double>(x.numel()) * static_cast<double>(rank);
  const double n = r.iterations;
  const tenfold::CpTimings phases{t.init,      t.compress / n, t.mttkrp / n, t.gram / n,
                                  t.solve / n, t.other / n,    t.total};
  tenfold::CpOptions defaults;
  defaults.rank = rank;
  defaults.backend = tenfold::Backend::cuda;
  const double whole = tenfold::cp_als(x, defaults).timings.total;
  return {phases.mttkrp + phases.gram + phases.solve + phases.other,
          sweep_flops * n / t.mttkrp * 1e-9, r.fit, phases, whole};
}

// X = G x_0 U_0 x_1 U_1 x_2 U_2 + E on the host: N(0, 1) core (r^3) and factors
// (I x r), E(l) = hash_noise(l) scaled to ||E|| = 0.1 ||G x U||.
tenfold::Tensor<double> low_rank_tensor(index_t size, index_t rank) {
  tenfold::detail::Rng rng(5);
  tenfold::TTensor<double> m;
  m.core = tenfold::Tensor<double>({rank, rank, rank});
  for (double& v : m.core.values()) v = rng.normal();
  for (int n = 0; n < 3; ++n) {
    tenfold::Matrix<double> u(size, rank);
    for (double& v : u.values()) v = rng.normal();
    m.factors.push_back(std::move(u));
  }
  tenfold::Tensor<double> x = m.full();
  double ne = 0.0;
  for (index_t l = 0; l < x.numel(); ++l)
    ne += hash_noise(static_cast<std::uint64_t>(l)) * hash_noise(static_cast<std::uint64_t>(l));
  const double scale = 0.1 * tenfold::norm<double>(x.view()) / std::sqrt(ne);
  for (index_t l = 0; l < x.numel(); ++l) x[l] += scale * hash_noise(static_cast<std::uint64_t>(l));
  return x;
}

template <class T>
tenfold::Tensor<T> converted(const tenfold::Tensor<double>& x) {
  tenfold::Tensor<T> y(x.dims());
  for (index_t l = 0; l < x.numel(); ++l) y[l] = static_cast<T>(x[l]);
  return y;
}

struct TuckerRun {
  double seconds = 0.0;         // whole call: validation, upload, decomposition, download
  double device_seconds = 0.0;  // Gram + eigensolver + TTM phases
  double eig_seconds = 0.0;
  double gram_gflops = 0.0;
  double ttm_gflops = 0.0;
  double error = 0.0;
};

// ST-HOSVD of x (I^3) at ranks (r, r, r) on the device; rates from the flop counts
// of the algorithm as implemented.
template <class T>
TuckerRun sthosvd(const tenfold::Tensor<T>& x, index_t rank) {
  tenfold::TuckerOptions o;
  o.ranks = {rank, rank, rank};
  o.backend = tenfold::Backend::cuda;
  {
    // Warm-up on a small tensor: cuSOLVER's and cuBLAS's kernels for this precision.
    const tenfold::Tensor<T> small = converted<T>(low_rank_tensor(2 * rank, rank / 4));
    tenfold::TuckerOptions w = o;
    w.ranks = {rank / 2, rank / 2, rank / 2};
    tenfold::tucker(small, w);
  }
  const auto r = tenfold::tucker(x, o);
  const auto& t = r.timings;
  const auto f =
      tenfold::bench::sthosvd_flops(static_cast<double>(x.dim(0)), static_cast<double>(rank));
  TuckerRun run;
  run.seconds = t.total;
  run.device_seconds = t.gram + t.eig + t.ttm;
  run.eig_seconds = t.eig;
  run.gram_gflops = f.gram / t.gram * 1e-9;
  run.ttm_gflops = f.ttm / t.ttm * 1e-9;
  run.error = r.relative_error;
  return run;
}

// One BERT-base-sized query/key side: H heads of width d over inputs of width D,
// weights N(0, 1/D), biases N(0, 1).
template <class T>
tenfold::attention::QueryKeyLayer<T> attention_layer(index_t heads, index_t width,
                                                     index_t head_width,
                                                     tenfold::detail::Rng& rng) {
  tenfold::attention::QueryKeyLayer<T> l;
  l.heads = heads;
  l.head_dim = head_width;
  const double sigma = 1.0 / std::sqrt(static_cast<double>(width));
  for (auto* w : {&l.query_weight, &l.key_weight}) {
    *w = tenfold::Matrix<T>(width, heads * head_width);
    for (T& v : w->values()) v = static_cast<T>(sigma * rng.normal());
  }
  for (auto* b : {&l.query_bias, &l.key_bias}) {
    for (index_t i = 0; i < heads * head_width; ++i) b->push_back(static_cast<T>(rng.normal()));
  }
  return l;
}

struct AttentionRun {
  int layers = 0;              // layers compressed (fewer than asked if the guard hit)
  double seconds = 0.0;        // all compress() calls
  double error_seconds = 0.0;  // the exact QK error on the host, timed again on its own
  double mean_error = 0.0;     // mean relative QK error
  double mean_sweeps = 0.0;    // ALS sweeps per layer
};

// compress() of `layers` synthetic layers at rank R with the default options
// (structured start, tol 1e-6, at most 100 sweeps) on the device. Stops early,
// between layers, once `guard` seconds have passed.
template <class T>
AttentionRun attention(int layers, index_t rank, double guard) {
  tenfold::detail::Rng rng(4);
  std::vector<tenfold::attention::QueryKeyLayer<T>> model;
  for (int i = 0; i < layers; ++i) model.push_back(attention_layer<T>(12, 768, 64, rng));
  tenfold::attention::CompressOptions o;
  o.rank = rank;
  o.backend = tenfold::Backend::cuda;
  {
    // Warm-up: one sweep of the first layer.
    tenfold::attention::CompressOptions w = o;
    w.max_iters = 1;
    tenfold::attention::compress(model[0], w);
  }
  AttentionRun a;
  for (const auto& layer : model) {
    if (a.seconds > guard) break;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = tenfold::attention::compress(layer, o);
    const auto t1 = std::chrono::steady_clock::now();
    tenfold::attention::qk_error(layer, r.layer);
    const auto t2 = std::chrono::steady_clock::now();
    a.seconds += std::chrono::duration<double>(t1 - t0).count();
    a.error_seconds += std::chrono::duration<double>(t2 - t1).count();
    a.mean_error += r.relative_error;
    a.mean_sweeps += r.iterations;
    ++a.layers;
  }
  a.mean_error /= a.layers;
  a.mean_sweeps /= a.layers;
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
  constexpr index_t kGemm = 8192, kDim = 400, kRank = 64, kTuckerDim = 600, kTuckerRank = 60,
                    kAttentionRank = 384;
  constexpr int kIterations = 10, kLayers = 12;
  constexpr double kAttentionGuard = 60.0;  // seconds: the program must stay within minutes
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
  const auto phases = [](const tenfold::CpTimings& p) {
    return format("%.5f", p.mttkrp) + " " + format("%.5f", p.gram) + " " + format("%.5f", p.solve) +
           " " + format("%.5f", p.other);
  };
  table.add(dense + ", s/iteration in MTTKRP, Gram, solve, other", phases(d64.per_iteration),
            phases(d32.per_iteration));
  table.add(dense + ", default options (compressed first), s whole call",
            format("%.3f", d64.default_call), format("%.3f", d32.default_call));

  const tenfold::Tensor<double> x = low_rank_tensor(kTuckerDim, kTuckerRank);
  const TuckerRun t64 = sthosvd(x, kTuckerRank);
  const TuckerRun t32 = sthosvd(converted<float>(x), kTuckerRank);
  const std::string tucker = "ST-HOSVD 600^3 r=(60,60,60), ";
  table.add(tucker + "s (whole call, upload included)", format("%.3f", t64.seconds),
            format("%.3f", t32.seconds));
  table.add(tucker + "s (Gram + eig + TTM)", format("%.4f", t64.device_seconds),
            format("%.4f", t32.device_seconds));
  table.add(tucker + "eig s", format("%.4f", t64.eig_seconds), format("%.4f", t32.eig_seconds));
  table.add(tucker + "Gram GFLOP/s", format("%.0f", t64.gram_gflops),
            format("%.0f", t32.gram_gflops));
  table.add(tucker + "Gram / GEMM rate", format("%.3f", t64.gram_gflops / gemm64),
            format("%.3f", t32.gram_gflops / gemm32));
  table.add(tucker + "TTM GFLOP/s", format("%.0f", t64.ttm_gflops), format("%.0f", t32.ttm_gflops));
  table.add(tucker + "TTM / GEMM rate", format("%.3f", t64.ttm_gflops / gemm64),
            format("%.3f", t32.ttm_gflops / gemm32));
  table.add(tucker + "relative error", format("%.6f", t64.error), format("%.6f", t32.error));

  const AttentionRun a64 = attention<double>(kLayers, kAttentionRank, kAttentionGuard);
  const AttentionRun a32 = attention<float>(kLayers, kAttentionRank, kAttentionGuard);
  const std::string att = "attention::compress BERT-base R=384, ";
  table.add(att + "layers", std::to_string(a64.layers), std::to_string(a32.layers));
  table.add(att + "s (all layers)", format("%.2f", a64.seconds), format("%.2f", a32.seconds));
  table.add(att + "host exact-error step, s (all layers)", format("%.2f", a64.error_seconds),
            format("%.2f", a32.error_seconds));
  table.add(att + "mean sweeps", format("%.1f", a64.mean_sweeps), format("%.1f", a32.mean_sweeps));
  table.add(att + "mean QK error", format("%.6f", a64.mean_error), format("%.6f", a32.mean_error));

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
