// Tucker benchmarks: ST-HOSVD, HOSVD and HOOI (10 sweeps) on I^3 tensors of
// multilinear rank (r, r, r) plus 10% noise, and a square GEMM in the same run as
// the machine's reference rate. Counters: phase seconds, the GFLOP/s of the Gram
// and TTM phases (from the flop counts of the algorithms as implemented), the
// relative error. The tensor is a closed formula, so bench/compare_tucker.py builds
// the same one for TensorLy (whose tucker with n_iter_max=0 is the HOSVD).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>

#include "core/compute.hpp"
#include "tenfold/tucker.hpp"
#include "tucker_common.hpp"

namespace {

using tenfold::index_t;
using tenfold::bench::hash_noise;
using tenfold::bench::hooi_flops;
using tenfold::bench::hosvd_flops;
using tenfold::bench::sthosvd_flops;
using tenfold::bench::TuckerFlops;

// X = G x_0 U x_1 U x_2 U + E, with G(a,b,c) = sin(1 + a + 2b + 3c),
// U(i,j) = sin(0.37 (i+1)(j+1)) (I x r), and E(l) = hash_noise(l) (l the column-major
// linear index) scaled to ||E|| = 0.1 ||G x U||.
template <class T>
const tenfold::Tensor<T>& test_tensor(index_t size, index_t rank) {
  static std::map<std::pair<index_t, index_t>, tenfold::Tensor<T>> cache;
  auto it = cache.find({size, rank});
  if (it != cache.end()) return it->second;
  tenfold::TTensor<double> m;
  m.core = tenfold::Tensor<double>({rank, rank, rank});
  for (index_t c = 0; c < rank; ++c)
    for (index_t b = 0; b < rank; ++b)
      for (index_t a = 0; a < rank; ++a) m.core(a, b, c) = std::sin(1.0 + a + 2.0 * b + 3.0 * c);
  tenfold::Matrix<double> u(size, rank);
  for (index_t j = 0; j < rank; ++j)
    for (index_t i = 0; i < size; ++i) u(i, j) = std::sin(0.37 * (i + 1) * (j + 1));
  m.factors.assign(3, u);
  const tenfold::Tensor<double> x = m.full();
  double ne = 0.0;
  for (index_t l = 0; l < x.numel(); ++l) ne += std::pow(hash_noise(l), 2);
  const double scale = 0.1 * tenfold::norm<double>(x.view()) / std::sqrt(ne);
  tenfold::Tensor<T> y(x.dims());
  for (index_t l = 0; l < x.numel(); ++l) y[l] = static_cast<T>(x[l] + scale * hash_noise(l));
  return cache.emplace(std::pair{size, rank}, std::move(y)).first->second;
}

template <class T>
void run_tucker(benchmark::State& state, tenfold::TuckerMethod method) {
  const index_t size = state.range(0), rank = state.range(1);
  const tenfold::Tensor<T>& x = test_tensor<T>(size, rank);
  tenfold::TuckerOptions o;
  o.method = method;
  o.ranks = {rank, rank, rank};
  o.max_iters = 10;
  o.tol = 0.0;  // exactly 10 HOOI sweeps
  tenfold::TuckerResult<T> r;
  for (auto _ : state) {
    r = tenfold::tucker(x, o);
    state.SetIterationTime(r.timings.total);
  }
  const double i = static_cast<double>(size), rr = static_cast<double>(rank);
  const TuckerFlops f = method == tenfold::TuckerMethod::sthosvd ? sthosvd_flops(i, rr)
                        : method == tenfold::TuckerMethod::hosvd ? hosvd_flops(i, rr)
                                                                 : hooi_flops(i, rr, r.iterations);
  const tenfold::TuckerTimings& t = r.timings;
  state.counters["rel_error"] = r.relative_error;
  state.counters["gram_s"] = t.gram;
  state.counters["eig_s"] = t.eig;
  state.counters["ttm_s"] = t.ttm;
  state.counters["gram_GFLOPs"] = f.gram / t.gram * 1e-9;
  state.counters["ttm_GFLOPs"] = f.ttm / t.ttm * 1e-9;
}

template <class T>
void BM_Sthosvd(benchmark::State& state) {
  run_tucker<T>(state, tenfold::TuckerMethod::sthosvd);
}
template <class T>
void BM_Hosvd(benchmark::State& state) {
  run_tucker<T>(state, tenfold::TuckerMethod::hosvd);
}
template <class T>
void BM_Hooi10(benchmark::State& state) {
  run_tucker<T>(state, tenfold::TuckerMethod::hooi);
}

// C (m x n) = A (m x k) B (k x n), through the same backend call the algorithms use:
// square (the machine's rate) and TTM-shaped (I^2 x r x I, the last-mode product).
template <class T>
void BM_Gemm(benchmark::State& state) {
  using tenfold::detail::Op;
  const index_t m = state.range(0), n = state.range(1), k = state.range(2);
  auto c = tenfold::detail::make_compute<T>(tenfold::Backend::cpu);
  const auto sa = static_cast<std::size_t>(m * k), sb = static_cast<std::size_t>(k * n);
  tenfold::detail::Buffer<T> a(*c, sa), b(*c, sb), out(*c, static_cast<std::size_t>(m * n));
  c->fill(a.get(), sa, T(0.5));
  c->fill(b.get(), sb, T(0.25));
  double best = 1e300;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    c->gemm(Op::none, Op::none, m, n, k, T(1), a.get(), m, b.get(), k, T(0), out.get(), m);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    best = std::min(best, s);
  }
  state.counters["GFLOPs"] = 2.0 * m * n * k / best * 1e-9;  // best of the runs
}

void tucker_sizes(benchmark::internal::Benchmark* b) {
  b->Args({200, 20})->Args({300, 30})->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);
}

void gemm_sizes(benchmark::internal::Benchmark* b) {
  b->Args({2000, 2000, 2000})->Args({40000, 20, 200})->Args({90000, 30, 300});
  b->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_Gemm<double>)->Apply(gemm_sizes);
BENCHMARK(BM_Gemm<float>)->Apply(gemm_sizes);
BENCHMARK(BM_Sthosvd<double>)->Apply(tucker_sizes);
BENCHMARK(BM_Sthosvd<float>)->Apply(tucker_sizes);
BENCHMARK(BM_Hosvd<double>)->Apply(tucker_sizes);
BENCHMARK(BM_Hosvd<float>)->Apply(tucker_sizes);
BENCHMARK(BM_Hooi10<double>)->Apply(tucker_sizes);
BENCHMARK(BM_Hooi10<float>)->Apply(tucker_sizes);

}  // namespace
