// Attention adapter benchmarks on synthetic BERT-base layers (H = 12, D = 768,
// d = 64, weights N(0, 1/768)) at R = 384:
// - AlsIteration: time per CP-ALS sweep over the Kruskal-form QK tensor, measured
//   between the first and the last sweep (setup and first sweep excluded).
// - Gemm: a square GEMM in the same run, so that machines can be compared by ratio.
// - Bert12Layers: compress() with default options on a 12-layer checkpoint, next to
//   the reference recipe (random start, 100 sweeps, tol 1e-6) on the same layers.
// Reference (DESIGN.md): TensorLy's dense parafac takes 2.30 s (float64) and
// 0.73 s (float32) per iteration on this tensor.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "tenfold/attention.hpp"
#include "tenfold/cp.hpp"

namespace {

using tenfold::index_t;
using tenfold::Matrix;
namespace at = tenfold::attention;

constexpr index_t kHeads = 12, kInput = 768, kHeadDim = 64, kRank = 384;

template <class T>
at::QueryKeyLayer<T> bert_layer(std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> weight(0.0, 1.0 / std::sqrt(static_cast<double>(kInput)));
  std::normal_distribution<double> bias(0.0, 0.1);
  at::QueryKeyLayer<T> l;
  l.heads = kHeads;
  l.head_dim = kHeadDim;
  l.query_weight = Matrix<T>(kInput, kHeads * kHeadDim);
  l.key_weight = Matrix<T>(kInput, kHeads * kHeadDim);
  for (T& x : l.query_weight.values()) x = static_cast<T>(weight(gen));
  for (T& x : l.key_weight.values()) x = static_cast<T>(weight(gen));
  for (index_t j = 0; j < kHeads * kHeadDim; ++j) {
    l.query_bias.push_back(static_cast<T>(bias(gen)));
    l.key_bias.push_back(static_cast<T>(bias(gen)));
  }
  return l;
}

template <class T>
void AlsIteration(benchmark::State& state) {
  const tenfold::KTensor<T> x = at::qk_tensor(bert_layer<T>(1));
  constexpr int kSweeps = 6;
  tenfold::CpOptions o;
  o.rank = kRank;
  o.max_iters = kSweeps;
  o.tol = 0.0;
  double first = 0.0, last = 0.0;
  o.callback = [&](const tenfold::CpProgress& p) {
    (p.iteration == 1 ? first : last) = p.seconds;
    return true;
  };
  for (auto _ : state) {
    tenfold::cp_als(x, o);
    state.SetIterationTime((last - first) / (kSweeps - 1));
  }
  const double flops = 8.0 * kInput * kHeads * kHeadDim * kRank;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TensorLy_s"] = std::is_same_v<T, double> ? 2.30 : 0.73;
}

template <class T>
void Gemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<T> a(static_cast<std::size_t>(n) * n, T(0.5)), b(a), c(a.size());
  for (auto _ : state) {
    if constexpr (std::is_same_v<T, double>) {
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, b.data(), n,
                  0.0, c.data(), n);
    } else {
      cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                  n, 0.0f, c.data(), n);
    }
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Bert12Layers(benchmark::State& state) {
  for (auto _ : state) {
    double ours_s = 0.0, ref_s = 0.0, worst = 0.0, worst_ref = 0.0, margin = -1.0;
    int ours_iters = 0, worse = 0;
    for (std::uint64_t layer = 0; layer < 12; ++layer) {
      const at::QueryKeyLayer<double> l = bert_layer<double>(100 + layer);
      at::CompressOptions o;
      o.rank = kRank;
      const at::CompressResult<double> ours = at::compress(l, o);
      o.init = at::Init::random;
      const at::CompressResult<double> ref = at::compress(l, o);
      ours_s += ours.seconds;
      ref_s += ref.seconds;
      ours_iters += ours.iterations;
      worst = std::max(worst, ours.relative_error);
      worst_ref = std::max(worst_ref, ref.relative_error);
      margin = std::max(margin, ours.relative_error - ref.relative_error);
      if (ours.relative_error > ref.relative_error) ++worse;
    }
    state.SetIterationTime(ours_s);
    state.counters["ours_s"] = ours_s;
    state.counters["ours_iters"] = ours_iters;
    state.counters["ours_max_err"] = worst;
    state.counters["ref_s"] = ref_s;
    state.counters["ref_max_err"] = worst_ref;
    state.counters["max_err_minus_ref"] = margin;  // over the layers; < 0: better on every layer
    state.counters["layers_worse"] = worse;
  }
}

BENCHMARK(AlsIteration<double>)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(AlsIteration<float>)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(Gemm<double>)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(Gemm<float>)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(Bert12Layers)->UseManualTime()->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
