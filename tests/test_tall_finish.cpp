// Products with their MTTKRP finish (Compute::gemm_finished, and the tall kernel's
// tall_gemm_finished with each instruction set this processor runs) against the
// definitions, for float and double: the products written or not, the finish summed over
// the rows of each block (Sum::rows, the blocks being the products) or over the blocks
// (Sum::blocks, blocks that end inside a vector of a tile), op(A) = A or A^T, rows that
// end inside a tile, columns inside a panel, batches whose tasks cross products; the same
// bits on one thread as on three.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/compute.hpp"
#include "cp_test_util.hpp"
#include "cpu/tall_gemm.hpp"
#include "same_bits.hpp"
#include "tenfold/threads.hpp"

namespace tenfold::test {
namespace {

using detail::Op;
template <class T>
using Finish = detail::ProductFinish<T>;

// C_i = 0.5 op(A_i) B (i < batch; A_i at i sa, op(A_i) m x k with lda one more than its
// rows; C_i at i sc, sc = m + 1, one row left between products) and the finish of the
// products read as Y(p, q, j), blocks of `period` rows: `want_c` (product after product,
// column after column) and `want_out` (out_rows x n), in double from ref_gemm's products.
template <class T>
struct FinishCase {
  Op ta;
  index_t m, n, k, batch, period;
  typename Finish<T>::Sum over;
  index_t lda = (ta == Op::none ? m : k) + 1, sa = lda * (ta == Op::none ? k : m) + 3;
  index_t sc = m + 1, ldc = sc * batch;
  index_t blocks = batch * (m / period);
  index_t w_rows = over == Finish<T>::Sum::rows ? period : blocks, ldw = w_rows + 2;
  index_t out_rows = over == Finish<T>::Sum::rows ? blocks : period, ldo = out_rows + 1;
  std::vector<T> a, b, w;
  std::vector<double> want_c, want_out;

  FinishCase(Op ta_, index_t m_, index_t n_, index_t k_, index_t batch_, index_t period_,
             typename Finish<T>::Sum over_, std::uint64_t& seed)
      : ta(ta_), m(m_), n(n_), k(k_), batch(batch_), period(period_), over(over_) {
    a = random_values<T>(static_cast<std::size_t>(sa * batch), ++seed);
    b = random_values<T>(static_cast<std::size_t>(k * n), ++seed);
    w = random_values<T>(static_cast<std::size_t>(ldw * n), ++seed);
    want_out.assign(static_cast<std::size_t>(out_rows * n), 0.0);
    for (index_t i = 0; i < batch; ++i) {
      const std::vector<T> ai(a.begin() + i * sa, a.begin() + (i + 1) * sa);
      const auto ci = ref_gemm(ta, Op::none, m, n, k, 0.5, ai, lda, b, k, 0.0,
                               std::vector<T>(static_cast<std::size_t>(m * n)), m);
      for (index_t j = 0; j < n; ++j)
        for (index_t r = 0; r < m; ++r) {
          const double y = ci[static_cast<std::size_t>(r + j * m)];
          want_c.push_back(y);
          // Y(p, q, j): row p of block q.
          const index_t p = r % period, q = i * (m / period) + r / period;
          const bool rows = over == Finish<T>::Sum::rows;
          const double wt = w[static_cast<std::size_t>((rows ? p : q) + j * ldw)];
          want_out[static_cast<std::size_t>((rows ? q : p) + j * out_rows)] += y * wt;
        }
    }
  }
  Finish<T> finish(T* out) const { return Finish<T>{over, period, w.data(), ldw, out, ldo}; }
  // The products of C (or NaN where c was not written) in want_c's order.
  std::vector<T> products(const std::vector<T>& c) const {
    std::vector<T> v;
    for (index_t i = 0; i < batch; ++i)
      for (index_t j = 0; j < n; ++j)
        for (index_t r = 0; r < m; ++r)
          v.push_back(c[static_cast<std::size_t>(i * sc + r + j * ldc)]);
    return v;
  }
  std::vector<T> finished(const std::vector<T>& out) const {
    std::vector<T> v;
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < out_rows; ++i)
        v.push_back(out[static_cast<std::size_t>(i + j * ldo)]);
    return v;
  }
};

// The shapes: Sum::rows where each product is a block (the 3-way MTTKRP's slab products,
// and the contractions of modes 0 and 2 cut into blocks); Sum::blocks over one product of
// several blocks (modes 0 and 2 whole) and over several products (the slabs).
template <class T>
std::vector<FinishCase<T>> finish_cases() {
  using Sum = typename Finish<T>::Sum;
  std::uint64_t seed = 500;
  std::vector<FinishCase<T>> cases;
  cases.emplace_back(Op::none, 203, 60, 30, 5, 203, Sum::rows, seed);
  cases.emplace_back(Op::trans, 96, 40, 17, 7, 96, Sum::rows, seed);
  cases.emplace_back(Op::none, 25, 12, 9, 33, 25, Sum::rows, seed);
  cases.emplace_back(Op::none, 318, 40, 31, 1, 53, Sum::blocks, seed);
  cases.emplace_back(Op::trans, 200, 24, 53, 1, 40, Sum::blocks, seed);
  cases.emplace_back(Op::none, 106, 24, 20, 3, 53, Sum::blocks, seed);
  cases.emplace_back(Op::trans, 102, 16, 20, 4, 17, Sum::blocks, seed);
  cases.emplace_back(Op::none, 1000, 8, 64, 1, 100, Sum::blocks, seed);
  return cases;
}

template <class T>
std::string shape(const FinishCase<T>& d) {
  return std::to_string(d.m) + "x" + std::to_string(d.n) + "x" + std::to_string(d.k) + " batch " +
         std::to_string(d.batch) + " period " + std::to_string(d.period) + " ta " +
         std::to_string(int(d.ta)) + " over " + std::to_string(int(d.over));
}

template <class T>
class TallFinish : public ::testing::Test {};
using FinishTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TallFinish, FinishTypes);

TYPED_TEST(TallFinish, BackendsAgainstTheDefinition) {
  // The cpu backend takes the kernel wherever tall_gemm_suits and tall_finish_fits, the
  // reference backend never (it declines, writing nothing).
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (const Backend backend : {Backend::cpu, Backend::reference}) {
    const auto c = detail::make_compute<T>(backend);
    for (const auto& d : finish_cases<T>())
      for (const bool write : {true, false}) {
        std::vector<T> cm(static_cast<std::size_t>(d.ldc * d.n), nan),
            out(static_cast<std::size_t>(d.ldo * d.n), nan);
        auto serial_c = cm, serial_out = out;
        bool done = false;
        {
          const ThreeThreads threads;
          done = c->gemm_finished(d.ta, d.m, d.n, d.k, T(0.5), d.a.data(), d.lda, d.sa, d.b.data(),
                                  d.k, write ? cm.data() : nullptr, d.ldc, d.sc, d.batch,
                                  d.finish(out.data()));
        }
        const bool fits = detail::tall_gemm_suits<T>(d.m, d.n, d.k) &&
                          detail::tall_finish_fits(d.m, d.finish(out.data()));
        EXPECT_EQ(done, backend == Backend::cpu && fits) << shape(d);
        if (!done) {
          EXPECT_TRUE(std::isnan(out[0]) && std::isnan(cm[0]))
              << "written by a backend that declined";
          continue;
        }
        EXPECT_LT(rel_diff(d.finished(out), d.want_out), kernel_tol<T>()) << shape(d);
        if (write) {
          EXPECT_LT(rel_diff(d.products(cm), d.want_c), kernel_tol<T>()) << shape(d);
        } else {
          for (const T v : cm) ASSERT_TRUE(std::isnan(v)) << "C written where c is null";
        }
        set_num_threads(1);
        c->gemm_finished(d.ta, d.m, d.n, d.k, T(0.5), d.a.data(), d.lda, d.sa, d.b.data(), d.k,
                         write ? serial_c.data() : nullptr, d.ldc, d.sc, d.batch,
                         d.finish(serial_out.data()));
        set_num_threads(0);
        EXPECT_TRUE(same_bits(out, serial_out)) << "thread count changed the finish, " << shape(d);
        EXPECT_TRUE(same_bits(cm, serial_c)) << "thread count changed the products, " << shape(d);
      }
  }
}

TYPED_TEST(TallFinish, EveryInstructionSetAgainstTheDefinition) {
  using T = TypeParam;
  using detail::TallIsa;
  if (detail::tall_gemm_isa() == TallIsa::none) GTEST_SKIP() << "no AVX2 with FMA";
  const ThreeThreads threads;
  for (const auto& d : finish_cases<T>())
    for (TallIsa isa : {TallIsa::avx2, TallIsa::avx512}) {
      std::vector<T> cm(static_cast<std::size_t>(d.ldc * d.n)),
          out(static_cast<std::size_t>(d.ldo * d.n), std::numeric_limits<T>::quiet_NaN());
      if (!detail::tall_gemm_fits<T>(d.m, d.n, d.k, isa) ||
          !detail::tall_finish_fits(d.m, d.finish(out.data())))
        continue;
      detail::tall_gemm_finished<T>(d.m, d.n, d.k, T(0.5), d.ta, d.a.data(), d.lda, d.sa, Op::none,
                                    d.b.data(), d.k, cm.data(), d.ldc, d.sc, d.batch,
                                    d.finish(out.data()), isa);
      EXPECT_LT(rel_diff(d.finished(out), d.want_out), kernel_tol<T>())
          << shape(d) << " isa " << int(isa);
      EXPECT_LT(rel_diff(d.products(cm), d.want_c), kernel_tol<T>())
          << shape(d) << " isa " << int(isa);
    }
}

}  // namespace
}  // namespace tenfold::test
