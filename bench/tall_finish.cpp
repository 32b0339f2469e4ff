// The 3-way MTTKRP's slab contraction and the first finish it serves, on the CPU backend,
// two ways in one process, alternated round by round:
//
//   build/bench/tall_finish [size=200] [rank=64] [reps=15] [float64|float32]
//
// For an I x I x I tensor X and factors U_0, U_1 (I x R): Y(:, i2, :) = X(:, :, i2) U_1
// (slab by slab, I^2 x R), then mode 2's MTTKRP out(i2, r) = Y(:, i2, r) . U_0(:, r),
// either by the products and then one matrix-vector product per column
// (`gemm_strided_batched` twice) or by `gemm_column_dots` writing Y and summing the dots
// from each tile in registers (docs/performance.md). Milliseconds (median of `reps`) of
// the products alone, of products then finish, and fused; the median over rounds of the
// separate way's time over the fused way's in the same round; CPU milliseconds of the
// process each way.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/compute.hpp"
#include "core/memory.hpp"

namespace {

using tenfold::index_t;
using tenfold::detail::Op;

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class T>
int run(index_t i, index_t rank, int reps) {
  auto owned = tenfold::detail::make_compute<T>(tenfold::Backend::cpu);
  tenfold::detail::Compute<T>& c = *owned;
  const index_t slab = i * i, numel = slab * i;
  tenfold::detail::HostArray<T> x(static_cast<std::size_t>(numel));
  tenfold::detail::HostArray<T> y(static_cast<std::size_t>(slab * rank));
  std::vector<T> u0(static_cast<std::size_t>(i * rank)), u1 = u0, out = u0;
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  for (index_t e = 0; e < numel; ++e) x.data()[e] = T(dist(gen));
  for (T& v : u0) v = T(dist(gen));
  for (T& v : u1) v = T(dist(gen));
  const auto product = [&] {
    c.gemm_strided_batched(Op::none, Op::none, i, rank, i, T(1), x.data(), i, slab, u1.data(), i, 0,
                           T(0), y.data(), slab, i, i);
  };
  const auto separate = [&] {
    product();
    // out(:, r) = Y_r^T U_0(:, r), Y_r = Y(:, :, r) (I x I).
    c.gemm_strided_batched(Op::trans, Op::none, i, 1, i, T(1), y.data(), i, slab, u0.data(), i, i,
                           T(0), out.data(), i, i, rank);
  };
  const auto fused = [&] {
    if (!c.gemm_column_dots(i, rank, i, T(1), x.data(), i, slab, u1.data(), i, u0.data(), i,
                            out.data(), i, i, y.data(), slab, i))
      std::printf("(no fused kernel for this shape: both ways separate)\n");
  };
  const std::vector<std::function<void()>> ways{product, separate, fused};
  std::vector<std::vector<double>> ms(3);
  std::vector<double> cpu(3, 0.0), ratios;
  for (const auto& f : ways) f();  // warm: first touch of y, pool started
  for (int r = 0; r < reps; ++r) {
    for (std::size_t w = 0; w < 3; ++w) {
      const std::size_t at = r % 2 == 0 ? w : 2 - w;  // alternate the order
      const std::clock_t c0 = std::clock();
      ms[at].push_back(seconds(ways[at]) * 1e3);
      cpu[at] += double(std::clock() - c0) / CLOCKS_PER_SEC * 1e3 / reps;
    }
    ratios.push_back(ms[1].back() / ms[2].back());
  }
  std::printf("%lld^3 R%lld %s, %d reps\n", static_cast<long long>(i), static_cast<long long>(rank),
              sizeof(T) == 8 ? "float64" : "float32", reps);
  std::printf(
      "| products alone ms | products, then gemv ms | fused ms | separate / fused | CPU ms each |\n"
      "|---|---|---|---|---|\n");
  std::printf("| %.2f | %.2f | %.2f | %.3f | %.2f / %.2f / %.2f |\n", median(ms[0]), median(ms[1]),
              median(ms[2]), median(ratios), cpu[0], cpu[1], cpu[2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const index_t size = argc > 1 ? std::atoll(argv[1]) : 200;
  const index_t rank = argc > 2 ? std::atoll(argv[2]) : 64;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 15;
  const std::string dtype = argc > 4 ? argv[4] : "float64";
  if (size < 1 || rank < 1 || reps < 1 || (dtype != "float64" && dtype != "float32")) {
    std::fprintf(stderr, "usage: tall_finish [size] [rank] [reps] [float64|float32]\n");
    return 2;
  }
  return dtype == "float64" ? run<double>(size, rank, reps) : run<float>(size, rank, reps);
}
