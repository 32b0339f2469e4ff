// One CSF tree for all modes: the MTTKRP of every level against the coordinates', the same
// bits for the same thread count, CP-ALS equal to the all-trees run to rounding, and the
// layout option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/compute.hpp"
#include "expect_throw.hpp"
#include "relative_difference.hpp"
#include "same_bits.hpp"
#include "sparse/sparse_operand.hpp"
#include "sparse_test_util.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/threads.hpp"

namespace tenfold {
namespace {

using test::coo_mttkrp;
using test::random_entries;
using test::random_factors;
using test::relative_difference;
using test::same_bits;

template <class T>
class CsfOne : public ::testing::Test {};
using ValueTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CsfOne, ValueTypes);

// Every level of trees with every root (2- to 5-way; levels 32-bit, mixed and 64-bit), at 1
// and 3 threads: the MTTKRP of the level's mode is the coordinates' to rounding; at one
// thread count twice, the same bits, the second time with per-thread copies kept from every
// call before (of other sizes, holding their sums).
TYPED_TEST(CsfOne, EveryLevelGivesItsModesMttkrp) {
  using T = TypeParam;
  const double tol = sizeof(T) == 4 ? 2e-5 : 1e-13;
  std::uint64_t seed = 120;
  const int threads = num_threads();
  std::vector<detail::HostArray<T>> kept;
  for (const std::vector<index_t>& dims : std::vector<std::vector<index_t>>{
           {70, 9}, {40, 300, 7}, {30, 200, 5, 12}, {6, 15, 4, 9, 5}}) {
    const SparseTensor<T> x = random_entries<T>(dims, 3000, ++seed);
    const index_t r = 5;
    const auto f = random_factors<T>(dims, r, ++seed);
    std::vector<const T*> rows;
    for (const auto& v : f) rows.push_back(v.data());
    for (int root = 0; root < x.order(); ++root) {
      for (index_t max_narrow : {detail::kNarrowLimit, index_t{100}, index_t{1}}) {
        const detail::Csf<T> tree(x, root, max_narrow);
        for (int level = 0; level < x.order(); ++level) {
          const int n = tree.mode(level);
          const auto size = static_cast<std::size_t>(x.dim(n) * r);
          const std::vector<T> expected = coo_mttkrp(x, f, n, r);
          for (int t : {1, 3}) {
            set_num_threads(t);
            std::vector<T> a(size), b(size);
            detail::csf_mttkrp_level(tree, level, rows, r, x.dim(n), a.data());
            detail::csf_mttkrp_level(tree, level, rows, r, x.dim(n), b.data(), &kept);
            EXPECT_LT(relative_difference(a, expected), tol)
                << "order " << dims.size() << " root " << root << " level " << level << ", " << t
                << " threads";
            EXPECT_TRUE(same_bits(a, b)) << "level " << level << ", " << t << " threads";
          }
        }
      }
    }
  }
  set_num_threads(threads);
}

// The operand builds one tree rooted at the smallest mode (the first of equal ones) and
// takes about 1/N of the trees' bytes; automatic resolves before it and names stay
// parseable.
TEST(CsfOneLayout, OneTreeAndTheOption) {
  const SparseTensor<double> x = random_entries<double>({40, 7, 300, 7}, 3000, 140);
  auto c = detail::make_compute<double>(Backend::cpu);
  const detail::SparseOperand<double> one(*c, x, CsfLayout::one);
  const detail::SparseOperand<double> all(*c, x, CsfLayout::all);
  ASSERT_EQ(one.trees().size(), 1u);
  ASSERT_EQ(all.trees().size(), 4u);
  EXPECT_EQ(one.trees()[0]->mode(0), 1);
  double all_bytes = 0.0;
  for (const auto& t : all.trees()) all_bytes += t->bytes();
  EXPECT_LT(one.trees()[0]->bytes(), 0.3 * all_bytes);
  EXPECT_EQ(csf_layout_for(x, {CsfLayout::one}), CsfLayout::one);
  EXPECT_EQ(csf_layout_for(x, {CsfLayout::all}), CsfLayout::all);
  EXPECT_EQ(csf_layout_for(x, {}), CsfLayout::all);  // a small tensor: all trees fit
  for (CsfLayout l : {CsfLayout::automatic, CsfLayout::all, CsfLayout::two, CsfLayout::one})
    EXPECT_EQ(parse_csf_layout(to_string(l)), l);
  test::expect_throw_with<InvalidArgument>(
      [&] { detail::SparseOperand<double>(*c, x, CsfLayout::automatic); },
      "needs a CSF layout resolved to all, two or one");
}

}  // namespace
}  // namespace tenfold
