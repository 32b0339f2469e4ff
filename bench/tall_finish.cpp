// A 3-way contraction and the first MTTKRP it serves, on the CPU backend, two ways in one
// process, alternated round by round:
//
//   build/bench/tall_finish [size=200] [rank=64] [reps=15] [float64|float32]
//
// For an I x I x I tensor X and factors U_0, U_1, U_2 (I x R): Y = X x_m U_m^T (I^2 x R),
// then out = the MTTKRP of mode n from Y, either by the product and then one
// matrix-vector product per column (`gemm` / `gemm_strided_batched`, as before the fused
// finish) or by `gemm_finished` (the finish summed from each tile in registers). The cases
// (m, n): a sweep in mode order contracts m = 2, 1, 0 for n = 0, 2, 1; in reverse order
// (NumPy's C order) m = 0, 1, 2 for n = 2, 0, 1. Seconds per case (median of `reps`), the
// median over rounds of the separate way's time over the fused way's in the same round,
// and CPU seconds of the process per case each way.
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
  using Finish = tenfold::detail::ProductFinish<T>;
  auto owned = tenfold::detail::make_compute<T>(tenfold::Backend::cpu);
  tenfold::detail::Compute<T>& c = *owned;
  const index_t slab = i * i, numel = slab * i;
  tenfold::detail::HostArray<T> x(static_cast<std::size_t>(numel));
  tenfold::detail::HostArray<T> y(static_cast<std::size_t>(slab * rank));
  std::vector<T> u(static_cast<std::size_t>(3 * i * rank)), out(static_cast<std::size_t>(i * rank));
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  for (index_t e = 0; e < numel; ++e) x.data()[e] = T(dist(gen));
  for (T& v : u) v = T(dist(gen));
  const auto factor = [&](int m) { return u.data() + m * i * rank; };
  std::printf("%lld^3 R%lld %s\n", static_cast<long long>(i), static_cast<long long>(rank),
              sizeof(T) == 8 ? "float64" : "float32");
  std::printf(
      "| m, n | product alone ms | product, then gemv ms | fused ms | separate / fused | CPU ms "
      "each |\n|---|---|---|---|---|---|\n");
  for (const auto [m, n] : {std::pair{2, 0}, {1, 2}, {0, 1}, {0, 2}, {1, 0}, {2, 1}}) {
    // Y = op(X) U_m in blocks of I rows (see DenseMttkrp::contract_mode); a < b the other modes.
    const int a = m == 0 ? 1 : 0, b = m == 2 ? 1 : 2;
    const Op ta = m == 0 ? Op::trans : Op::none;
    const index_t lda = m == 2 ? slab : i, block_a = m == 0 ? i * i : m == 1 ? slab : i;
    const bool over_blocks = n == a, apart = m == 1 || !over_blocks;
    const Finish finish{over_blocks ? Finish::Sum::blocks : Finish::Sum::rows,
                        i,
                        factor(over_blocks ? b : a),
                        i,
                        out.data(),
                        i};
    const auto product = [&] {
      if (m == 1) {
        c.gemm_strided_batched(Op::none, Op::none, i, rank, i, T(1), x.data(), i, slab, factor(1),
                               i, 0, T(0), y.data(), slab, i, i);
      } else {
        c.gemm(ta, Op::none, slab, rank, i, T(1), x.data(), lda, factor(m), i, T(0), y.data(),
               slab);
      }
    };
    const auto separate = [&] {
      product();
      // out(:, r) = Y_r U_b(:, r) (n = a) or Y_r^T U_a(:, r) (n = b).
      c.gemm_strided_batched(over_blocks ? Op::none : Op::trans, Op::none, i, 1, i, T(1), y.data(),
                             i, slab, factor(over_blocks ? b : a), i, i, T(0), out.data(), i, i,
                             rank);
    };
    const auto fused = [&] {
      if (!c.gemm_finished(ta, apart ? i : slab, rank, i, T(1), x.data(), lda, block_a, factor(m),
                           i, y.data(), slab, i, apart ? i : 1, finish))
        std::printf("(no fused kernel for this shape)\n");
    };
    separate();
    fused();
    std::vector<double> ts, tf, tp, ratios;
    double cpu_s = 0.0, cpu_f = 0.0, cpu_p = 0.0;
    for (int r = 0; r < reps; ++r) {
      const std::clock_t cp = std::clock();
      tp.push_back(seconds(product));
      const std::clock_t c0 = std::clock();
      cpu_p += double(c0 - cp) / CLOCKS_PER_SEC;
      ts.push_back(seconds(separate));
      const std::clock_t c1 = std::clock();
      tf.push_back(seconds(fused));
      cpu_s += double(c1 - c0) / CLOCKS_PER_SEC;
      cpu_f += double(std::clock() - c1) / CLOCKS_PER_SEC;
      ratios.push_back(ts.back() / tf.back());
    }
    std::printf("| %d, %d | %.2f | %.2f | %.2f | %.3f | %.2f / %.2f / %.2f |\n", m, n,
                median(tp) * 1e3, median(ts) * 1e3, median(tf) * 1e3, median(ratios),
                cpu_p / reps * 1e3, cpu_s / reps * 1e3, cpu_f / reps * 1e3);
  }
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
