// CSF trees whose levels are stored in 32 bits, in 64 bits, or some of each: the same
// MTTKRP, CP-APR kernels and CP-ALS to the bit, and the MTTKRP of the coordinates.
#include <gtest/gtest.h>

#include "core/compute.hpp"
#include "cp/cp_als.hpp"
#include "expect_throw.hpp"
#include "relative_difference.hpp"
#include "same_bits.hpp"
#include "sparse/sparse_operand.hpp"
#include "sparse_test_util.hpp"
#include "tenfold/error.hpp"

namespace tenfold {
namespace {

using test::coo_mttkrp;
using test::random_entries;
using test::random_factors;
using test::relative_difference;
using test::same_bits;

// A limit below which the small modes stay narrow and the large ones (and most child
// pointers) go wide.
constexpr index_t kSmallLimit = 100;

template <class T>
class CsfWidth : public ::testing::Test {};
using ValueTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CsfWidth, ValueTypes);

// Every root of a 3-way and a 4-way tensor, trees all 32-bit, mixed and all 64-bit: the
// kernels that read the levels give the same bits, and the MTTKRP is the coordinates'.
TYPED_TEST(CsfWidth, MixedAndWideLevelsGiveTheSameBits) {
  using T = TypeParam;
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-13;
  std::uint64_t seed = 40;
  for (const std::vector<index_t>& dims :
       std::vector<std::vector<index_t>>{{40, 300, 7}, {30, 200, 5, 12}}) {
    const SparseTensor<T> x = random_entries<T>(dims, 3000, ++seed);
    const index_t r = 5;
    const auto f = random_factors<T>(dims, r, ++seed);
    std::vector<const T*> rows;
    for (const auto& v : f) rows.push_back(v.data());
    for (int n = 0; n < x.order(); ++n) {
      const auto size = static_cast<std::size_t>(x.dim(n) * r);
      std::vector<T> b = random_factors<T>({x.dim(n)}, r, ++seed)[0];
      for (T& v : b) v = std::abs(v);
      // MTTKRP, Phi walked and Phi from the kept Khatri-Rao rows of one tree
      const auto kernels = [&](const detail::Csf<T>& tree) {
        std::vector<std::vector<T>> out(4);
        out[0].resize(size);
        detail::csf_mttkrp(tree, rows, r, out[0].data());
        out[1].resize(size);
        detail::csf_poisson_phi(tree, rows, b.data(), r, T(1e-10), out[1].data());
        out[2].resize(static_cast<std::size_t>(x.nnz() * r));
        detail::csf_khatri_rao_rows(tree, rows, r, out[2].data());
        out[3].resize(size);
        detail::csf_poisson_phi_kept(tree, out[2].data(), b.data(), r, T(1e-10), out[3].data());
        return out;
      };
      const detail::Csf<T> narrow(x, n);
      const detail::Csf<T> mixed(x, n, kSmallLimit);
      const detail::Csf<T> wide(x, n, 1);
      ASSERT_EQ(narrow.index_width(), detail::IndexWidth::narrow);
      ASSERT_EQ(mixed.index_width(), detail::IndexWidth::mixed);
      ASSERT_EQ(wide.index_width(), detail::IndexWidth::wide);
      const auto expected = kernels(narrow);
      for (const detail::Csf<T>* tree : {&mixed, &wide}) {
        const auto got = kernels(*tree);
        for (std::size_t k = 0; k < got.size(); ++k)
          EXPECT_TRUE(same_bits(got[k], expected[k]))
              << "order " << dims.size() << " root " << n << " kernel " << k;
      }
      EXPECT_LT(relative_difference(expected[0], coo_mttkrp(x, f, n, r)), tol)
          << "order " << dims.size() << " root " << n;
    }
  }
}

// A level's ids are 64-bit when its mode's size reaches the limit, its child pointers when
// the next level's node count does; every 32-bit level saves 4 bytes per value, and the
// tree stays within bytes_bound.
TEST(CsfWidthLayout, LevelsGoWideAtTheLimitAndBytesFollow) {
  const SparseTensor<double> x = random_entries<double>({40, 300, 7}, 3000, 50);
  for (int n = 0; n < 3; ++n) {
    const detail::Csf<double> narrow(x, n);
    const detail::Csf<double> mixed(x, n, kSmallLimit);
    const detail::Csf<double> wide(x, n, 1);
    double values = 0.0;
    for (int d = 0; d < 3; ++d) {
      EXPECT_EQ(mixed.ids(d).wide(), x.dim(mixed.mode(d)) > kSmallLimit) << "level " << d;
      values += static_cast<double>(narrow.nodes(d));
      if (d < 2) {
        EXPECT_EQ(mixed.children(d).wide(), narrow.nodes(d + 1) >= kSmallLimit) << "level " << d;
        values += static_cast<double>(narrow.nodes(d) + 1);
      }
    }
    EXPECT_EQ(wide.bytes() - narrow.bytes(), 4.0 * values);
    EXPECT_LT(narrow.bytes(), mixed.bytes());
    EXPECT_LE(narrow.bytes(), detail::Csf<double>::bytes_bound(x.dims(), x.nnz()));
  }
  test::expect_throw_with<InvalidArgument>([&] { detail::Csf<double>(x, 0, 0); },
                                           "32-bit limit must be in [1, 2^32], got 0");
}

// CP-ALS on trees of 64-bit or mixed levels: the 32-bit run's result, to the bit.
TYPED_TEST(CsfWidth, CpAlsUnchanged) {
  using T = TypeParam;
  const SparseTensor<T> x = random_entries<T>({60, 250, 9}, 4000, 60);
  auto c = detail::make_compute<T>(Backend::cpu);
  CpOptions o;
  o.rank = 4;
  o.init = CpInit::random;
  o.max_iters = 8;
  o.tol = 0.0;
  std::vector<CpResult<T>> runs;
  for (index_t max_narrow : {detail::kNarrowLimit, kSmallLimit, index_t{1}}) {
    detail::SparseOperand<T> op(*c, x, CsfLayout::all, max_narrow);
    runs.push_back(detail::run_cp_starts<T>(op, *c, o, {}, detail::Clock::now()));
  }
  for (std::size_t k = 1; k < runs.size(); ++k) {
    EXPECT_EQ(runs[k].fit_history, runs[0].fit_history);
    EXPECT_EQ(runs[k].model.weights, runs[0].model.weights);
    for (int n = 0; n < 3; ++n) {
      EXPECT_TRUE(same_bits(runs[k].model.factors[static_cast<std::size_t>(n)].values(),
                            runs[0].model.factors[static_cast<std::size_t>(n)].values()));
    }
  }
}

}  // namespace
}  // namespace tenfold
