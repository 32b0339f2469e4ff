// CP-ALS speed: seconds per iteration and MTTKRP GFLOP/s, against the GEMM rate
// measured in the same run (square 4000^2 and the MTTKRP's own GEMM shape).
//   build/bench/bench_cp [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gemm_rate.hpp"
#include "tenfold/cp.hpp"

namespace {

using tenfold::index_t;

struct Case {
  std::vector<index_t> dims;
  index_t rank;
};

const std::vector<Case> kCases = {
    {{100, 100, 100}, 10}, {{200, 200, 200}, 16}, {{200, 200, 200}, 64}, {{50, 50, 50, 50}, 10}};

index_t numel(const std::vector<index_t>& d) {
  index_t n = 1;
  for (index_t x : d) n *= x;
  return n;
}

// The two tensor-sized GEMMs of a sweep (dimension tree), 2 * prod(I) * R flops each.
double sweep_mttkrp_flops(const Case& c) {
  return 2.0 * 2.0 * static_cast<double>(numel(c.dims)) * static_cast<double>(c.rank);
}

template <class T>
void bm_cp_als(benchmark::State& state, Case c, double gemm_rate) {
  tenfold::RandomCpOptions ro;
  ro.dims = c.dims;
  ro.rank = c.rank;
  ro.noise = 0.1;
  ro.seed = 1;
  const auto problem = tenfold::random_cp_tensor<T>(ro);
  tenfold::CpOptions o;
  o.rank = c.rank;
  o.max_iters = 10;
  o.tol = 0.0;
  double mttkrp_s = 0.0, iters = 0.0;
  for (auto _ : state) {
    const auto res = tenfold::cp_als(problem.tensor, o);
    const double per_iter = (res.timings.total - res.timings.init) / res.iterations;
    state.SetIterationTime(per_iter);
    mttkrp_s += res.timings.mttkrp;
    iters += res.iterations;
  }
  const double mttkrp_gflops = sweep_mttkrp_flops(c) * iters / mttkrp_s * 1e-9;
  state.counters["mttkrp_GFLOPs"] = mttkrp_gflops;
  state.counters["mttkrp_vs_gemm"] = mttkrp_gflops / gemm_rate;
}

template <class T>
void register_cases(const char* type) {
  const double square = tenfold::bench::gemm_gflops<T>(4000, 4000, 4000);
  std::printf("same-run GEMM 4000^3 %s: %.1f GFLOP/s\n", type, square);
  for (const Case& c : kCases) {
    // Reference: the GEMM shape of the sweep's big contraction, (prod I / I_last) x R x I_last.
    const index_t k = c.dims.back();
    const double shaped = tenfold::bench::gemm_gflops<T>(numel(c.dims) / k, c.rank, k);
    std::string name = std::string("cp_als/") + type + "/";
    for (std::size_t i = 0; i < c.dims.size(); ++i)
      name += (i ? "x" : "") + std::to_string(c.dims[i]);
    name += "/R" + std::to_string(c.rank);
    std::printf("same-run GEMM %s shape %lldx%lldx%lld: %.1f GFLOP/s\n", name.c_str(),
                static_cast<long long>(numel(c.dims) / k), static_cast<long long>(c.rank),
                static_cast<long long>(k), shaped);
    benchmark::RegisterBenchmark(name.c_str(), bm_cp_als<T>, c, square)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_cases<double>("float64");
  register_cases<float>("float32");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
