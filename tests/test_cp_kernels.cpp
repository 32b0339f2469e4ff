// The host backends (cpu: its blocks over threads, ranges of a long inner dimension,
// matrix-vector products; reference) against the definitions, for float and double. The
// comparison of every backend with the reference backend is in test_primitives.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <tuple>
#include <utility>
#include <vector>

#include "core/compute.hpp"
#include "cp_test_util.hpp"
#include "cpu/tall_gemm.hpp"
#include "reference/reference_compute.hpp"
#include "same_bits.hpp"
#include "tenfold/error.hpp"
#include "tenfold/threads.hpp"

namespace tenfold::test {
namespace {

using detail::ColumnNorm;
using detail::Op;

// rel_diff of the backend's C = alpha op(A) op(B) + beta C (m x n, inner size k) from
// ref_gemm's, on random A, B and C whose leading dimensions exceed their rows by pad
// (for A, B, C; to catch lda/ldb/ldc mix-ups). With beta = 0, C holds NaN, which must
// not be read. Draws three seeds after `seed`.
template <class T>
double gemm_error(detail::Compute<T>& c, Op ta, Op tb, index_t m, index_t n, index_t k,
                  double alpha, double beta, const index_t (&pad)[3], std::uint64_t& seed) {
  const index_t lda = (ta == Op::none ? m : k) + pad[0], ldb = (tb == Op::none ? k : n) + pad[1],
                ldc = m + pad[2];
  const auto a = random_values<T>(static_cast<std::size_t>(lda * (ta == Op::none ? k : m)), ++seed);
  const auto b = random_values<T>(static_cast<std::size_t>(ldb * (tb == Op::none ? n : k)), ++seed);
  auto cm = random_values<T>(static_cast<std::size_t>(ldc * n), ++seed);
  auto c0 = cm;  // what beta C reads: NaN in C is zero there when beta = 0
  if (beta == 0.0) {
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < m; ++i) {
        cm[static_cast<std::size_t>(i + j * ldc)] = std::numeric_limits<T>::quiet_NaN();
        c0[static_cast<std::size_t>(i + j * ldc)] = T(0);
      }
  }
  const auto expect = ref_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc);
  c.gemm(ta, tb, m, n, k, T(alpha), a.data(), lda, b.data(), ldb, T(beta), cm.data(), ldc);
  return rel_diff(cm, expect);
}

// A value type and a host-memory backend: the cpu backend's paths, and the reference
// backend checked against the same definitions.
template <class T, Backend B>
struct On {
  using type = T;
  static constexpr Backend backend = B;
};

template <class P>
class Kernels : public ::testing::Test {
 protected:
  using T = typename P::type;
  std::unique_ptr<detail::Compute<T>> owned = detail::make_compute<T>(P::backend);
  detail::Compute<T>& c = *owned;
  static constexpr double tol = kernel_tol<T>();
};

using Types = ::testing::Types<On<float, Backend::cpu>, On<double, Backend::cpu>,
                               On<float, Backend::reference>, On<double, Backend::reference>>;
TYPED_TEST_SUITE(Kernels, Types);

TYPED_TEST(Kernels, MemoryPrimitives) {
  using T = typename TypeParam::type;
  auto& c = this->c;
  EXPECT_EQ(c.allocate(0), nullptr);
  c.deallocate(nullptr);
  const std::vector<T> src = random_values<T>(37, 1);
  detail::Buffer<T> a(c, 37), b(c, 37);
  c.upload(a.get(), src.data(), 37);
  c.copy(b.get(), a.get(), 37);
  std::vector<T> back(37);
  c.download(back.data(), b.get(), 37);
  EXPECT_EQ(back, src);
  c.fill(b.get() + 5, 10, T(3));
  c.download(back.data(), b.get(), 37);
  for (std::size_t i = 0; i < 37; ++i) EXPECT_EQ(back[i], i >= 5 && i < 15 ? T(3) : src[i]);
}

TYPED_TEST(Kernels, GemmAllTransposes) {
  using T = typename TypeParam::type;
  const index_t m = 7, n = 5, k = 9;
  std::uint64_t seed = 10;
  for (Op ta : {Op::none, Op::trans})
    for (Op tb : {Op::none, Op::trans}) {
      EXPECT_LT(gemm_error<T>(this->c, ta, tb, m, n, k, 1.5, -0.5, {3, 2, 1}, seed), this->tol)
          << "ta " << int(ta) << " tb " << int(tb);
    }
}

TYPED_TEST(Kernels, GemmTallOrWideInBlocks) {
  // Large enough for the split of C's rows (tall) or columns (wide) into blocks (taken
  // when more than one thread is available), with a last block shorter than the others.
  using T = typename TypeParam::type;
  const index_t k = 300;
  std::uint64_t seed = 40;
  for (const auto [m, n] : {std::pair<index_t, index_t>{1100, 8}, {8, 1100}})
    for (Op ta : {Op::none, Op::trans})
      for (Op tb : {Op::none, Op::trans}) {
        EXPECT_LT(gemm_error<T>(this->c, ta, tb, m, n, k, 0.5, 2.0, {5, 1, 3}, seed), this->tol)
            << m << "x" << n << " ta " << int(ta) << " tb " << int(tb);
      }
}

TYPED_TEST(Kernels, GemmOverALongInnerDimensionInRanges) {
  // k much longer than m and n: partial products over ranges of k, summed in order.
  // beta = 0 must not read C (NaN there), beta != 0 must scale it.
  using T = typename TypeParam::type;
  const ThreeThreads threads;
  const index_t m = 23, n = 17, k = 9001;
  std::uint64_t seed = 70;
  for (Op ta : {Op::none, Op::trans})
    for (Op tb : {Op::none, Op::trans})
      for (double beta : {0.0, -0.5}) {
        EXPECT_LT(gemm_error<T>(this->c, ta, tb, m, n, k, 1.25, beta, {2, 3, 1}, seed), this->tol)
            << "ta " << int(ta) << " tb " << int(tb) << " beta " << beta;
      }
}

TYPED_TEST(Kernels, GemmSingleColumnUsesStrideOfB) {
  // n == 1 takes the matrix-vector path; with tb == trans, B is a 1 x k row of stride ldb.
  using T = typename TypeParam::type;
  const index_t m = 6, k = 8;
  std::uint64_t seed = 20;
  for (Op ta : {Op::none, Op::trans})
    for (Op tb : {Op::none, Op::trans}) {
      const index_t lda = (ta == Op::none ? m : k) + 1, ldb = tb == Op::none ? k : 3;
      const auto a =
          random_values<T>(static_cast<std::size_t>(lda * (ta == Op::none ? k : m)), ++seed);
      const auto b =
          random_values<T>(static_cast<std::size_t>(tb == Op::none ? k : ldb * k), ++seed);
      auto cm = random_values<T>(static_cast<std::size_t>(m), ++seed);
      const auto expect = ref_gemm(ta, tb, m, 1, k, 2.0, a, lda, b, ldb, 0.25, cm, m);
      this->c.gemm(ta, tb, m, 1, k, T(2), a.data(), lda, b.data(), ldb, T(0.25), cm.data(), m);
      EXPECT_LT(rel_diff(cm, expect), this->tol) << "ta " << int(ta) << " tb " << int(tb);
    }
}

TYPED_TEST(Kernels, GemmWithEmptyInnerDimensionScalesC) {
  // k == 0: op(A) op(B) is the zero matrix, so C = beta C (also on the n == 1 path).
  using T = typename TypeParam::type;
  for (index_t n : {1, 3}) {
    auto cm = random_values<T>(static_cast<std::size_t>(4 * n), 30);
    const auto before = cm;
    const T dummy[1] = {T(7)};
    this->c.gemm(Op::none, Op::none, 4, n, 0, T(1), dummy, 4, dummy, 1, T(0.5), cm.data(), 4);
    for (std::size_t i = 0; i < cm.size(); ++i) EXPECT_EQ(cm[i], before[i] * T(0.5)) << "n " << n;
  }
}

TYPED_TEST(Kernels, GemmStridedBatched) {
  using T = typename TypeParam::type;
  // Small products run one per thread, large ones one after the other: test both.
  struct Case {
    index_t m, n, k, batch;
  };
  std::uint64_t seed = 40;
  for (const Case& s : {Case{5, 1, 7, 6}, Case{4, 3, 6, 5}, Case{70, 64, 64, 2}})
    for (Op ta : {Op::none, Op::trans})
      for (Op tb : {Op::none, Op::trans}) {
        const index_t lda = ta == Op::none ? s.m : s.k, ldb = tb == Op::none ? s.k : s.n;
        const index_t sa = lda * (ta == Op::none ? s.k : s.m) + 3;
        const index_t sb = ldb * (tb == Op::none ? s.n : s.k) + 1, sc = s.m * s.n + 2;
        const auto a = random_values<T>(static_cast<std::size_t>(sa * s.batch), ++seed);
        const auto b = random_values<T>(static_cast<std::size_t>(sb * s.batch), ++seed);
        auto cm = random_values<T>(static_cast<std::size_t>(sc * s.batch), ++seed);
        std::vector<std::vector<double>> expect;
        for (index_t i = 0; i < s.batch; ++i) {
          const auto at = [&](const std::vector<T>& v, index_t off, index_t len) {
            return std::vector<T>(v.begin() + off, v.begin() + off + len);
          };
          expect.push_back(ref_gemm(ta, tb, s.m, s.n, s.k, 1.0, at(a, i * sa, sa), lda,
                                    at(b, i * sb, sb), ldb, 1.0, at(cm, i * sc, sc), s.m));
        }
        this->c.gemm_strided_batched(ta, tb, s.m, s.n, s.k, T(1), a.data(), lda, sa, b.data(), ldb,
                                     sb, T(1), cm.data(), s.m, sc, s.batch);
        for (index_t i = 0; i < s.batch; ++i) {
          const std::vector<T> got(cm.begin() + i * sc, cm.begin() + (i + 1) * sc);
          EXPECT_LT(rel_diff(got, expect[static_cast<std::size_t>(i)]), this->tol)
              << "m " << s.m << " batch item " << i;
        }
      }
}

TYPED_TEST(Kernels, GemmTallAndThin) {
  // The shapes of the MTTKRP's contractions (op(A) tall, n small; lib/cpu/tall_gemm.hpp
  // on a processor with AVX-512, or AVX2 for float): rows that end inside a tile (one, two or three
  // vectors of it), columns that end inside a panel, A and A^T (transposed in blocks of a vector's
  // lanes, with a last block of k that ends inside one), both op(B), and blocks of rows over
  // threads.
  using T = typename TypeParam::type;
  const ThreeThreads threads;
  struct Case {
    index_t m, n, k;
  };
  std::uint64_t seed = 90;
  for (const Case& s : {Case{203, 64, 200}, Case{1000, 40, 5}, Case{301, 16, 37}, Case{97, 7, 64},
                        Case{48, 24, 1}, Case{2011, 32, 50}})
    for (Op ta : {Op::none, Op::trans})
      for (Op tb : {Op::none, Op::trans})
        for (double beta : {0.0, -0.5}) {
          EXPECT_LT(gemm_error<T>(this->c, ta, tb, s.m, s.n, s.k, 1.5, beta, {3, 2, 5}, seed),
                    this->tol)
              << s.m << "x" << s.n << "x" << s.k << " ta " << int(ta) << " tb " << int(tb)
              << " beta " << beta;
        }
}

TYPED_TEST(Kernels, GemmStridedBatchedWithOneB) {
  // stride_b = 0: every product takes the same B (the MTTKRP's slab products), with A or
  // A^T. The tall kernel's tasks are runs of tiles that cross from one product to the next.
  using T = typename TypeParam::type;
  const ThreeThreads threads;
  std::uint64_t seed = 120;
  for (const auto [m, n, k, batch] :
       {std::tuple<index_t, index_t, index_t, index_t>{203, 64, 30, 5},
        {50, 16, 9, 33},
        {96, 16, 17, 120},
        {3, 4, 5, 2}})
    for (Op ta : {Op::none, Op::trans})
      for (double beta : {0.0, 2.0}) {
        // C_i at c + i m inside C of leading dimension m batch (the slabs side by side).
        const index_t lda = (ta == Op::none ? m : k) + 1, ldc = m * batch;
        const index_t sa = lda * (ta == Op::none ? k : m) + 3;
        const auto a = random_values<T>(static_cast<std::size_t>(sa * batch), ++seed);
        const auto b = random_values<T>(static_cast<std::size_t>(k * n), ++seed);
        auto cm = random_values<T>(static_cast<std::size_t>(ldc * n), ++seed);
        auto c0 = cm;
        if (beta == 0.0) {
          std::fill(cm.begin(), cm.end(), std::numeric_limits<T>::quiet_NaN());
          std::fill(c0.begin(), c0.end(), T(0));
        }
        std::vector<double> expect(cm.size());
        for (index_t i = 0; i < batch; ++i) {
          const std::vector<T> ai(a.begin() + i * sa, a.begin() + (i + 1) * sa);
          std::vector<T> ci(static_cast<std::size_t>(m * n));
          for (index_t j = 0; j < n; ++j)
            for (index_t r = 0; r < m; ++r)
              ci[static_cast<std::size_t>(r + j * m)] =
                  c0[static_cast<std::size_t>(i * m + r + j * ldc)];
          const auto e = ref_gemm(ta, Op::none, m, n, k, 0.5, ai, lda, b, k, beta, ci, m);
          for (index_t j = 0; j < n; ++j)
            for (index_t r = 0; r < m; ++r)
              expect[static_cast<std::size_t>(i * m + r + j * ldc)] =
                  e[static_cast<std::size_t>(r + j * m)];
        }
        this->c.gemm_strided_batched(ta, Op::none, m, n, k, T(0.5), a.data(), lda, sa, b.data(), k,
                                     0, T(beta), cm.data(), ldc, m, batch);
        EXPECT_LT(rel_diff(cm, expect), this->tol)
            << m << "x" << n << "x" << k << " ta " << int(ta) << " beta " << beta;
      }
}

// The tall kernel itself, with each instruction set this processor runs (AVX2 and, where
// the processor has it, AVX-512: the backend's calls above take only the best one),
// against the definition: rows that end inside a tile, columns inside a panel (4 or 8),
// A and A^T, both op(B), beta zero (C not read) or not, batches whose tasks cross from one
// product to the next (the column dots: test_column_dots.cpp). Both sets make the same fused
// multiply-adds in the same order, so their products agree to the bit.
template <class T>
class TallKernel : public ::testing::Test {};
using TallTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TallKernel, TallTypes);

TYPED_TEST(TallKernel, EveryInstructionSetAgainstTheDefinition) {
  using T = TypeParam;
  using detail::Isa;
  if (detail::processor_isa() == Isa::baseline) GTEST_SKIP() << "no AVX2 with FMA";
  const ThreeThreads threads;
  struct Case {
    index_t m, n, k, batch;
  };
  std::uint64_t seed = 170;
  for (const Case& s :
       {Case{203, 64, 200, 1}, Case{1000, 40, 5, 1}, Case{301, 12, 37, 2}, Case{97, 7, 64, 3},
        Case{24, 24, 1, 4}, Case{2011, 36, 50, 1}, Case{50, 20, 9, 33}})
    for (Op ta : {Op::none, Op::trans})
      for (Op tb : {Op::none, Op::trans})
        for (double beta : {0.0, -0.5}) {
          const index_t lda = (ta == Op::none ? s.m : s.k) + 1,
                        ldb = (tb == Op::none ? s.k : s.n) + 2;
          const index_t sa = lda * (ta == Op::none ? s.k : s.m) + 3, sc = s.m + 1,
                        ldc = sc * s.batch;
          const auto a = random_values<T>(static_cast<std::size_t>(sa * s.batch), ++seed);
          const auto b = random_values<T>(
              static_cast<std::size_t>(ldb * (tb == Op::none ? s.n : s.k)), ++seed);
          const auto c0 = random_values<T>(static_cast<std::size_t>(ldc * s.n), ++seed);
          std::vector<T> by_avx2;
          for (Isa isa : {Isa::avx2, Isa::avx512}) {
            if (!detail::tall_gemm_fits<T>(s.m, s.n, s.k, isa)) continue;
            auto cm = c0;
            if (beta == 0.0) std::fill(cm.begin(), cm.end(), std::numeric_limits<T>::quiet_NaN());
            detail::tall_gemm<T>(s.m, s.n, s.k, T(1.5), ta, a.data(), lda, sa, tb, b.data(), ldb,
                                 T(beta), cm.data(), ldc, sc, s.batch, isa);
            for (index_t i = 0; i < s.batch; ++i) {
              const std::vector<T> ai(a.begin() + i * sa, a.begin() + (i + 1) * sa);
              std::vector<T> ci(static_cast<std::size_t>(s.m * s.n)), got = ci;
              for (index_t j = 0; j < s.n; ++j)
                for (index_t r = 0; r < s.m; ++r) {
                  const auto at = static_cast<std::size_t>(i * sc + r + j * ldc);
                  ci[static_cast<std::size_t>(r + j * s.m)] = beta == 0.0 ? T(0) : c0[at];
                  got[static_cast<std::size_t>(r + j * s.m)] = cm[at];
                }
              const auto want =
                  ref_gemm(ta, tb, s.m, s.n, s.k, 1.5, ai, lda, b, ldb, beta, ci, s.m);
              EXPECT_LT(rel_diff(got, want), kernel_tol<T>())
                  << s.m << "x" << s.n << "x" << s.k << " batch item " << i << " isa " << int(isa)
                  << " ta " << int(ta) << " tb " << int(tb) << " beta " << beta;
            }
            // The row between two products of C is not written.
            for (index_t j = 0; j < s.n; ++j)
              for (index_t i = 0; i < s.batch; ++i) {
                const auto gap = static_cast<std::size_t>(i * sc + s.m + j * ldc);
                EXPECT_TRUE(beta == 0.0 ? std::isnan(cm[gap]) : cm[gap] == c0[gap])
                    << "row " << gap;
              }
            // Both sets make the same fused multiply-adds in the same order: the same
            // bits (compared as bits: with beta = 0 the rows between products keep the
            // NaN fill, checked above, which == would call different).
            if (isa == Isa::avx2) {
              by_avx2 = cm;
            } else if (!by_avx2.empty()) {
              EXPECT_TRUE(same_bits(cm, by_avx2))
                  << "AVX-512 and AVX2 disagree, " << s.m << "x" << s.n << "x" << s.k << " ta "
                  << int(ta) << " tb " << int(tb) << " beta " << beta;
            }
          }
        }
}

// Relative difference of syrk (both triangles of C) from its definition, for A of
// n x k (Op::none, C = A A^T) or k x n (Op::trans, C = A^T A) with padded leading
// dimensions. beta != 0 starts from a symmetric C, so that beta C is symmetric too;
// beta = 0 starts from NaN, which must not be read.
template <class T>
double syrk_error(tenfold::detail::Compute<T>& c, Op trans, index_t n, index_t k, double beta,
                  std::uint64_t seed) {
  const index_t lda = (trans == Op::trans ? k : n) + 1, ldc = n + 2;
  const auto a =
      random_values<T>(static_cast<std::size_t>(lda * (trans == Op::trans ? n : k)), seed);
  const Op other = trans == Op::trans ? Op::none : Op::trans;
  std::vector<T> cm(static_cast<std::size_t>(ldc * n)), c0(cm.size());
  const auto r = random_values<T>(cm.size(), seed + 1);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) {
      const auto at = static_cast<std::size_t>(i + j * ldc);
      c0[at] =
          beta == 0.0 ? T(0) : r[static_cast<std::size_t>(std::min(i, j) + std::max(i, j) * ldc)];
      cm[at] = beta == 0.0 ? std::numeric_limits<T>::quiet_NaN() : c0[at];
    }
  const auto expect = ref_gemm(trans, other, n, n, k, 0.75, a, lda, a, lda, beta, c0, ldc);
  c.syrk(trans, n, k, T(0.75), a.data(), lda, T(beta), cm.data(), ldc);
  std::vector<T> got, want;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) {
      got.push_back(cm[static_cast<std::size_t>(i + j * ldc)]);
      want.push_back(static_cast<T>(expect[static_cast<std::size_t>(i + j * ldc)]));
    }
  return rel_diff(got, want);
}

TYPED_TEST(Kernels, SyrkBothTransposesFillsBothTriangles) {
  for (Op trans : {Op::none, Op::trans})
    EXPECT_LT(syrk_error(this->c, trans, 6, 9, 2.0, 50), this->tol) << "trans " << int(trans);
}

TYPED_TEST(Kernels, SyrkInRangesOfKAndInColumnBlocks) {
  // Parallel paths: a short, very wide operand (n = 40, k = 3000: ranges of k) and a
  // tall one (n = 300, k = 60: column blocks of the lower triangle), both transposes,
  // beta = 0 and beta != 0.
  const ThreeThreads threads;
  for (const auto [n, k] : {std::pair<index_t, index_t>{40, 3000}, {300, 60}})
    for (Op trans : {Op::none, Op::trans})
      for (double beta : {0.0, 2.0})
        EXPECT_LT(syrk_error(this->c, trans, n, k, beta, 52), this->tol)
            << n << "x" << k << " trans " << int(trans) << " beta " << beta;
}

// Sizes: one BLAS call; the recursive halving (n > 32) on one thread; and row blocks
// on several threads (m n^2 >= 4e6).
TYPED_TEST(Kernels, CholeskySolveFromTheRight) {
  using T = typename TypeParam::type;
  for (const auto [n, m] : {std::pair<index_t, index_t>{5, 7}, {77, 130}, {150, 301}}) {
    const index_t ld = n + 1, ldb = m + 2;
    const std::vector<T> a = random_spd<T>(n, ld, 60);
    std::vector<T> l = a;
    ASSERT_TRUE(this->c.potrf(n, l.data(), ld));
    // The lower triangle holds L with L L^T = A.
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j <= i; ++j) {
        double s = 0.0;
        for (index_t q = 0; q <= j; ++q)
          s += static_cast<double>(l[static_cast<std::size_t>(i + q * ld)]) *
               l[static_cast<std::size_t>(j + q * ld)];
        EXPECT_NEAR(s, a[static_cast<std::size_t>(i + j * ld)], this->tol * n * 4) << i << "," << j;
      }
    // X = B A^{-1}, checked through X A = B.
    const auto b = random_values<T>(static_cast<std::size_t>(ldb * n), 61);
    std::vector<T> x = b;
    this->c.potrs_right(n, l.data(), ld, m, x.data(), ldb);
    const auto xa = ref_gemm(Op::none, Op::none, m, n, n, 1.0, x, ldb, a, ld, 0.0, x, ldb);
    std::vector<double> got, want;
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < m; ++i) {
        got.push_back(xa[static_cast<std::size_t>(i + j * ldb)]);
        want.push_back(b[static_cast<std::size_t>(i + j * ldb)]);
      }
    EXPECT_LT(rel_diff(got, want), this->tol * 10) << n << " x " << m;
  }
}

TYPED_TEST(Kernels, SymmetricEigendecomposition) {
  using T = typename TypeParam::type;
  const index_t n = 6, ld = 8;
  const auto r = random_values<T>(static_cast<std::size_t>(ld * n), 70);
  std::vector<T> a(r.size());
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i)
      a[static_cast<std::size_t>(i + j * ld)] =
          r[static_cast<std::size_t>(std::min(i, j) + std::max(i, j) * ld)];
  std::vector<T> q = a, w(static_cast<std::size_t>(n));
  this->c.syevd(n, q.data(), ld, w.data());
  EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));
  // A Q = Q diag(w) and Q^T Q = I.
  const auto aq = ref_gemm(Op::none, Op::none, n, n, n, 1.0, a, ld, q, ld, 0.0, q, ld);
  const auto qtq = ref_gemm(Op::trans, Op::none, n, n, n, 1.0, q, ld, q, ld, 0.0, q, ld);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) {
      const auto ij = static_cast<std::size_t>(i + j * ld);
      EXPECT_NEAR(aq[ij], static_cast<double>(q[ij]) * w[static_cast<std::size_t>(j)],
                  this->tol * 10);
      EXPECT_NEAR(qtq[ij], i == j ? 1.0 : 0.0, this->tol * 10);
    }
}

TYPED_TEST(Kernels, ElementwiseAndKhatriRao) {
  using T = typename TypeParam::type;
  const auto x = random_values<T>(100, 80);
  auto y = random_values<T>(100, 81);
  const auto y0 = y;
  this->c.hadamard(100, x.data(), y.data());
  for (std::size_t i = 0; i < 100; ++i) EXPECT_EQ(y[i], x[i] * y0[i]);

  const index_t ma = 4, mb = 3, r = 5;
  const auto a = random_values<T>(static_cast<std::size_t>(ma * r), 82);
  const auto b = random_values<T>(static_cast<std::size_t>(mb * r), 83);
  std::vector<T> kr(static_cast<std::size_t>(ma * mb * r));
  this->c.khatri_rao(ma, mb, r, a.data(), b.data(), kr.data());
  // C(i + ma j, q) = A(i, q) B(j, q).
  for (index_t q = 0; q < r; ++q)
    for (index_t j = 0; j < mb; ++j)
      for (index_t i = 0; i < ma; ++i)
        EXPECT_EQ(
            kr[static_cast<std::size_t>(i + ma * j + ma * mb * q)],
            a[static_cast<std::size_t>(i + ma * q)] * b[static_cast<std::size_t>(j + mb * q)]);
}

TYPED_TEST(Kernels, NormalizeColumnsBothKinds) {
  using T = typename TypeParam::type;
  const index_t m = 5, n = 4, lda = 7;
  auto a0 = random_values<T>(static_cast<std::size_t>(lda * n), 90);
  for (index_t i = 0; i < m; ++i) {
    a0[static_cast<std::size_t>(i + 1 * lda)] = T(0);                    // zero column
    a0[static_cast<std::size_t>(i + 2 * lda)] *= T(0.1);                 // max below one
    a0[static_cast<std::size_t>(i + 3 * lda)] = T(3) * T(i + 1) - T(8);  // max above one
  }
  for (ColumnNorm kind : {ColumnNorm::two, ColumnNorm::max_or_one}) {
    auto a = a0;
    std::vector<T> lambda(static_cast<std::size_t>(n));
    this->c.normalize_columns(kind, m, n, a.data(), lda, lambda.data());
    for (index_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (index_t i = 0; i < m; ++i) {
        const double v = a0[static_cast<std::size_t>(i + j * lda)];
        s = kind == ColumnNorm::two ? s + v * v : std::max(s, std::abs(v));
      }
      s = kind == ColumnNorm::two ? std::sqrt(s) : std::max(s, 1.0);
      EXPECT_NEAR(lambda[static_cast<std::size_t>(j)], s, this->tol * s) << "column " << j;
      for (index_t i = 0; i < m; ++i) {
        const double v = a0[static_cast<std::size_t>(i + j * lda)];
        EXPECT_NEAR(a[static_cast<std::size_t>(i + j * lda)], s > 0.0 ? v / s : v, this->tol);
      }
    }
    EXPECT_EQ(lambda[1], kind == ColumnNorm::two ? T(0) : T(1));
    // Padding rows below m are not touched.
    for (index_t j = 0; j < n; ++j)
      for (index_t i = m; i < lda; ++i)
        EXPECT_EQ(a[static_cast<std::size_t>(i + j * lda)],
                  a0[static_cast<std::size_t>(i + j * lda)]);
  }
}

TYPED_TEST(Kernels, ScaleColumnsAndAddDiagonal) {
  using T = typename TypeParam::type;
  const index_t m = 4, n = 3, lda = 6;
  const auto a0 = random_values<T>(static_cast<std::size_t>(lda * n), 100);
  const auto s = random_values<T>(static_cast<std::size_t>(n), 101);
  auto a = a0;
  this->c.scale_columns(m, n, a.data(), lda, s.data());
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < lda; ++i) {
      const auto ij = static_cast<std::size_t>(i + j * lda);
      EXPECT_EQ(a[ij], i < m ? a0[ij] * s[static_cast<std::size_t>(j)] : a0[ij]);
    }
  a = a0;
  this->c.add_diagonal(n, a.data(), lda, T(2.5));
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < lda; ++i) {
      const auto ij = static_cast<std::size_t>(i + j * lda);
      EXPECT_EQ(a[ij], i == j ? a0[ij] + T(2.5) : a0[ij]);
    }
}

TYPED_TEST(Kernels, DotAndSumSquaresAccumulateInDouble) {
  using T = typename TypeParam::type;
  // Sizes around the chunking (64 chunks) and past the parallel threshold.
  for (std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{1000}, std::size_t{40001}}) {
    const auto x = random_values<T>(n, 110 + n), y = random_values<T>(n, 111 + n);
    double dot = 0.0, ss = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      dot += static_cast<double>(x[i]) * y[i];
      ss += static_cast<double>(x[i]) * x[i];
    }
    // Products of floats are exact in double: only summation order differs.
    EXPECT_NEAR(this->c.dot(n, x.data(), y.data()), dot, 1e-12 * (ss + 1.0)) << n;
    EXPECT_NEAR(this->c.sum_squares(n, x.data()), ss, 1e-12 * (ss + 1.0)) << n;
  }
  // 10^8 + 999 is not a float (its spacing there is 8): a float accumulator loses the ones.
  std::vector<T> v(1000, T(1));
  v[0] = T(10000);
  EXPECT_EQ(this->c.sum_squares(v.size(), v.data()), 1e8 + 999.0);
  EXPECT_EQ(this->c.dot(v.size(), v.data(), v.data()), 1e8 + 999.0);
}

}  // namespace
}  // namespace tenfold::test
