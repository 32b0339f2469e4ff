// The column dots of a batch of products (Compute::gemm_column_dots, and the tall
// kernel's tall_gemm_dots with each instruction set this processor runs) against the
// definitions, for float and double: dots(i, j) = alpha (A_i B)(:, j) . W(:, j), with the
// products written too or not (the 3-way MTTKRP's slab products and their first finish;
// a gradient's last mode), rows that end inside a tile, columns inside a panel, tasks of
// whole products; the same bits on one thread as on three.
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

// A_i (batch of m x k, lda = m + 1, i sa apart), B (k x n), W (m x n, ldw = m + 2); C_i at
// i sc (sc = m + 1, one row left between products, ldc = sc batch), dots of leading
// dimension ldd = batch + 1; in double from ref_gemm's products: `want_c` (product after
// product, column after column) and `want_dots` (dots(i, j) at i + j batch).
template <class T>
struct DotsCase {
  index_t m, n, k, batch;
  index_t lda = m + 1, sa = lda * k + 3, ldw = m + 2, ldd = batch + 1, sc = m + 1, ldc = sc * batch;
  std::vector<T> a, b, w;
  std::vector<double> want_c, want_dots;
  DotsCase(index_t m_, index_t n_, index_t k_, index_t batch_, std::uint64_t& seed)
      : m(m_), n(n_), k(k_), batch(batch_) {
    a = random_values<T>(static_cast<std::size_t>(sa * batch), ++seed);
    b = random_values<T>(static_cast<std::size_t>(k * n), ++seed);
    w = random_values<T>(static_cast<std::size_t>(ldw * n), ++seed);
    want_dots.assign(static_cast<std::size_t>(batch * n), 0.0);
    for (index_t i = 0; i < batch; ++i) {
      const std::vector<T> ai(a.begin() + i * sa, a.begin() + (i + 1) * sa);
      const auto ci = ref_gemm(Op::none, Op::none, m, n, k, 0.5, ai, lda, b, k, 0.0,
                               std::vector<T>(static_cast<std::size_t>(m * n)), m);
      for (index_t j = 0; j < n; ++j)
        for (index_t r = 0; r < m; ++r) {
          const double y = ci[static_cast<std::size_t>(r + j * m)];
          want_c.push_back(y);
          want_dots[static_cast<std::size_t>(i + j * batch)] +=
              y * static_cast<double>(w[static_cast<std::size_t>(r + j * ldw)]);
        }
    }
  }
  // dots(i, j) (leading dimension ldd) in the order of want_dots.
  std::vector<T> dots_in_order(const std::vector<T>& dots) const {
    std::vector<T> v;
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < batch; ++i) v.push_back(dots[static_cast<std::size_t>(i + j * ldd)]);
    return v;
  }
  // The products of C in the order of want_c.
  std::vector<T> products(const std::vector<T>& c) const {
    std::vector<T> v;
    for (index_t i = 0; i < batch; ++i)
      for (index_t j = 0; j < n; ++j)
        for (index_t r = 0; r < m; ++r)
          v.push_back(c[static_cast<std::size_t>(i * sc + r + j * ldc)]);
    return v;
  }
  std::string shape() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " batch " +
           std::to_string(batch);
  }
};

template <class T>
std::vector<DotsCase<T>> dots_cases() {
  std::uint64_t seed = 150;
  std::vector<DotsCase<T>> cases;
  cases.emplace_back(203, 64, 30, 5, seed);
  cases.emplace_back(50, 16, 9, 33, seed);
  cases.emplace_back(96, 40, 17, 70, seed);
  cases.emplace_back(25, 12, 9, 33, seed);
  cases.emplace_back(200, 60, 200, 7, seed);
  return cases;
}

template <class T>
class ColumnDots : public ::testing::Test {};
using DotsTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ColumnDots, DotsTypes);

TYPED_TEST(ColumnDots, BackendsAgainstTheDefinition) {
  // The cpu backend takes the kernel wherever tall_gemm_suits, the reference backend never
  // (it declines, writing nothing).
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (const Backend backend : {Backend::cpu, Backend::reference}) {
    const auto c = detail::make_compute<T>(backend);
    for (const auto& d : dots_cases<T>())
      for (const bool write : {true, false}) {
        std::vector<T> cm(static_cast<std::size_t>(d.ldc * d.n), nan);
        std::vector<T> dots(static_cast<std::size_t>(d.ldd * d.n), nan);
        auto serial_c = cm, serial_dots = dots;
        const auto call = [&](std::vector<T>& to_c, std::vector<T>& to_dots) {
          return c->gemm_column_dots(d.m, d.n, d.k, T(0.5), d.a.data(), d.lda, d.sa, d.b.data(),
                                     d.k, d.w.data(), d.ldw, to_dots.data(), d.ldd, d.batch,
                                     write ? to_c.data() : nullptr, d.ldc, d.sc);
        };
        bool done = false;
        {
          const ThreeThreads threads;
          done = call(cm, dots);
        }
        EXPECT_EQ(done, backend == Backend::cpu && detail::tall_gemm_suits<T>(d.m, d.n, d.k))
            << d.shape();
        if (!done) {
          EXPECT_TRUE(std::isnan(dots[0]) && std::isnan(cm[0]))
              << "written by a backend that declined";
          continue;
        }
        EXPECT_LT(rel_diff(d.dots_in_order(dots), d.want_dots), kernel_tol<T>()) << d.shape();
        if (write) {
          EXPECT_LT(rel_diff(d.products(cm), d.want_c), kernel_tol<T>()) << d.shape();
        } else {
          for (const T v : cm) ASSERT_TRUE(std::isnan(v)) << "C written where c is null";
        }
        set_num_threads(1);
        call(serial_c, serial_dots);
        set_num_threads(0);
        EXPECT_TRUE(same_bits(dots, serial_dots)) << "thread count changed the dots, " << d.shape();
        EXPECT_TRUE(same_bits(cm, serial_c)) << "thread count changed the products, " << d.shape();
      }
  }
}

TYPED_TEST(ColumnDots, EveryInstructionSetAgainstTheDefinition) {
  using T = TypeParam;
  using detail::Isa;
  if (detail::processor_isa() == Isa::baseline) GTEST_SKIP() << "no AVX2 with FMA";
  const ThreeThreads threads;
  for (const auto& d : dots_cases<T>())
    for (Isa isa : {Isa::avx2, Isa::avx512})
      for (const bool write : {true, false}) {
        if (!detail::tall_gemm_fits<T>(d.m, d.n, d.k, isa)) continue;
        std::vector<T> cm(static_cast<std::size_t>(d.ldc * d.n),
                          std::numeric_limits<T>::quiet_NaN());
        std::vector<T> dots(static_cast<std::size_t>(d.ldd * d.n),
                            std::numeric_limits<T>::quiet_NaN());
        detail::tall_gemm_dots<T>(d.m, d.n, d.k, T(0.5), d.a.data(), d.lda, d.sa, Op::none,
                                  d.b.data(), d.k, d.w.data(), d.ldw, dots.data(), d.ldd, d.batch,
                                  write ? cm.data() : nullptr, d.ldc, d.sc, isa);
        EXPECT_LT(rel_diff(d.dots_in_order(dots), d.want_dots), kernel_tol<T>())
            << d.shape() << " isa " << int(isa);
        if (write) {
          EXPECT_LT(rel_diff(d.products(cm), d.want_c), kernel_tol<T>())
              << d.shape() << " isa " << int(isa);
        }
      }
}

}  // namespace
}  // namespace tenfold::test
