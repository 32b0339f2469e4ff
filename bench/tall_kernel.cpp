// The tall kernel alone against OpenBLAS on the three tensor-sized contractions of a
// 3-way CP-ALS sweep, in one process, methods alternated:
//
//   build/bench/tall_kernel [size=200] [rank=64] [reps=15] [float64|float32]
//
// For an I x I x I tensor X (column-major) and a factor U (I x R):
//   mode 0: Y = X_(0)^T U    (I^2 x R, the transposed product: A^T tiles),
//   mode 1: Y_k = X(:, :, k) U for each slab k (a batch of I products I x R),
//   mode 2: Y = X_(01) U     (I^2 x R).
// Each is run by the tall kernel with every instruction set this processor has, and by
// OpenBLAS single-threaded per block of rows on the library's pool (the CPU backend's
// way for products the kernel does not take; for mode 1, one GEMM per slab). Seconds
// per product, median of `reps`, and the rate counting 2 I^3 R flops; beside it the
// same-run square GEMM rate (3000^3), and the median over rounds of OpenBLAS's time over
// the method's in the same round: on a shared machine whose speed drifts, the figure to
// read.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/memory.hpp"
#include "core/thread_pool.hpp"
#include "cpu/tall_gemm.hpp"
#include "gemm_rate.hpp"

namespace {

using tenfold::index_t;
using tenfold::detail::Isa;
using tenfold::detail::Op;

void blas_gemm(bool trans_a, index_t m, index_t n, index_t k, const double* a, index_t lda,
               const double* b, index_t ldb, double* c, index_t ldc) {
  cblas_dgemm(CblasColMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, int(m), int(n),
              int(k), 1.0, a, int(lda), b, int(ldb), 0.0, c, int(ldc));
}
void blas_gemm(bool trans_a, index_t m, index_t n, index_t k, const float* a, index_t lda,
               const float* b, index_t ldb, float* c, index_t ldc) {
  cblas_sgemm(CblasColMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, int(m), int(n),
              int(k), 1.0f, a, int(lda), b, int(ldb), 0.0f, c, int(ldc));
}

// C (m x n) = op(A) B by OpenBLAS, blocks of rows of C (the backend's block rule for
// tall products) on the pool, one single-threaded GEMM each.
template <class T>
void blas_rows(bool trans_a, index_t m, index_t n, index_t k, const T* a, index_t lda, const T* b,
               T* c) {
  const index_t block = std::max<index_t>(256, (m / 32 + 63) / 64 * 64);
  tenfold::detail::parallel_for((m + block - 1) / block, [&](index_t part) {
    const tenfold::detail::SerialBlas serial;
    const index_t i0 = part * block, rows = std::min(block, m - i0);
    blas_gemm(trans_a, rows, n, k, a + i0 * (trans_a ? lda : 1), lda, b, k, c + i0, m);
  });
}

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
int run(index_t size, index_t rank, int reps) {
  const index_t n = size, slab = n * n, numel = slab * n;
  // The tensor and the result in the library's memory for tensor-sized buffers (2 MiB
  // pages where Linux grants them), as the CPU backend's operands are.
  tenfold::detail::HostArray<T> x(static_cast<std::size_t>(numel));
  tenfold::detail::HostArray<T> y(static_cast<std::size_t>(slab * rank));
  std::vector<T> u(static_cast<std::size_t>(n * rank));
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  for (index_t i = 0; i < numel; ++i) x.data()[i] = T(dist(gen));
  for (T& v : u) v = T(dist(gen));
  const T* xp = x.data();
  const T* up = u.data();
  T* yp = y.data();

  struct Method {
    std::string name;
    std::function<void()> call;
  };
  const auto tall = [&](int mode, Isa isa) {
    if (mode == 0) {
      tenfold::detail::tall_gemm<T>(slab, rank, n, T(1), Op::trans, xp, n, 0, Op::none, up, n, T(0),
                                    yp, slab, 0, 1, isa);
    } else if (mode == 1) {
      tenfold::detail::tall_gemm<T>(n, rank, n, T(1), Op::none, xp, n, slab, Op::none, up, n, T(0),
                                    yp, slab, n, n, isa);
    } else {
      tenfold::detail::tall_gemm<T>(slab, rank, n, T(1), Op::none, xp, slab, 0, Op::none, up, n,
                                    T(0), yp, slab, 0, 1, isa);
    }
  };
  const auto blas = [&](int mode) {
    if (mode == 0) {
      blas_rows<T>(true, slab, rank, n, xp, n, up, yp);
    } else if (mode == 1) {
      tenfold::detail::parallel_for(n, [&](index_t k) {
        const tenfold::detail::SerialBlas serial;
        blas_gemm(false, n, rank, n, xp + k * slab, n, up, n, yp + k * n, slab);
      });
    } else {
      blas_rows<T>(false, slab, rank, n, xp, slab, up, yp);
    }
  };

  std::vector<Isa> isas;
  for (Isa isa : {Isa::avx2, Isa::avx512})
    if (tenfold::detail::tall_gemm_fits<T>(slab, rank, n, isa)) isas.push_back(isa);
  const double flops = 2.0 * double(numel) * double(rank);
  const double gemm = tenfold::bench::gemm_gflops<T>(3000, 3000, 3000);
  std::printf("%lld^3 R%lld %s, %d threads, same-run square GEMM %.1f GFLOP/s\n",
              static_cast<long long>(n), static_cast<long long>(rank),
              sizeof(T) == 8 ? "float64" : "float32", tenfold::detail::pool_threads(), gemm);
  std::printf(
      "| contraction | method | ms (median of %d) | GFLOP/s | of GEMM | OpenBLAS / method |\n"
      "|---|---|---|---|---|---|\n",
      reps);
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<Method> methods{{"OpenBLAS", [&, mode] { blas(mode); }}};
    for (Isa isa : isas)
      methods.push_back(
          {isa == Isa::avx512 ? "tall AVX-512" : "tall AVX2", [&, mode, isa] { tall(mode, isa); }});
    std::vector<std::vector<double>> times(methods.size());
    for (auto& m : methods) m.call();  // warm: first touch of y, pool started
    for (int r = 0; r < reps; ++r)
      for (std::size_t i = 0; i < methods.size(); ++i) {
        // Alternate the order so that neither side always follows the other.
        const std::size_t j = r % 2 == 0 ? i : methods.size() - 1 - i;
        times[j].push_back(seconds(methods[j].call));
      }
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    for (std::size_t i = 0; i < methods.size(); ++i) {
      // Against OpenBLAS: the median of the ratios of the same round's two times.
      std::vector<double> ratios;
      for (int r = 0; r < reps; ++r) ratios.push_back(times[0][r] / times[i][r]);
      const double med = median(times[i]);
      std::printf("| mode %d | %s | %.2f | %.1f | %.0f %% | %.2f |\n", mode,
                  methods[i].name.c_str(), med * 1e3, flops / med * 1e-9,
                  100.0 * flops / med * 1e-9 / gemm, median(ratios));
    }
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
    std::fprintf(stderr, "usage: tall_kernel [size] [rank] [reps] [float64|float32]\n");
    return 2;
  }
  return dtype == "float64" ? run<double>(size, rank, reps) : run<float>(size, rank, reps);
}
