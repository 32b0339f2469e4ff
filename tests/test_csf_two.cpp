// Two CSF trees (SPLATT's --csf=two): the tree of the one-tree layout and a second rooted at
// its leaf mode. The operand's MTTKRP of every mode against the coordinates', CP-ALS equal to
// the all-trees run to rounding, and the layout's trees and name.
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
class CsfTwo : public ::testing::Test {};
using ValueTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CsfTwo, ValueTypes);

// x with every index doubled in a tensor of sizes 2 I_n + 1: every odd slice of every mode
// (the last one included) is empty.
template <class T>
SparseTensor<T> with_empty_slices(const SparseTensor<T>& x) {
  std::vector<index_t> dims, coords;
  for (int m = 0; m < x.order(); ++m) {
    dims.push_back(2 * x.dim(m) + 1);
    for (index_t i : x.indices(m)) coords.push_back(2 * i);
  }
  return SparseTensor<T>(std::move(dims), std::move(coords),
                         std::vector<T>(x.values().begin(), x.values().end()));
}

// Column-major copies (I_m x r) of row-major factors.
template <class T>
std::vector<std::vector<T>> column_major(const std::vector<index_t>& dims,
                                         const std::vector<std::vector<T>>& rows, index_t r) {
  std::vector<std::vector<T>> out;
  for (std::size_t m = 0; m < dims.size(); ++m) {
    out.emplace_back(rows[m].size());
    for (index_t i = 0; i < dims[m]; ++i)
      for (index_t j = 0; j < r; ++j)
        out[m][static_cast<std::size_t>(i + j * dims[m])] =
            rows[m][static_cast<std::size_t>(i * r + j)];
  }
  return out;
}

// The operand's MTTKRP of every mode (2- to 5-way, with and without empty slices, at 1 and 3
// threads) is the coordinates' to rounding, and the same bits when run again.
TYPED_TEST(CsfTwo, EveryModesMttkrp) {
  using T = TypeParam;
  const double tol = sizeof(T) == 4 ? 2e-5 : 1e-13;
  const int threads = num_threads();
  auto c = detail::make_compute<T>(Backend::cpu);
  std::uint64_t seed = 150;
  for (const std::vector<index_t>& dims : std::vector<std::vector<index_t>>{
           {70, 9}, {40, 300, 7}, {30, 200, 5, 12}, {6, 15, 4, 9, 5}}) {
    const SparseTensor<T> dense_slices = random_entries<T>(dims, 3000, ++seed);
    for (const SparseTensor<T>& x : {dense_slices, with_empty_slices(dense_slices)}) {
      const index_t r = 5;
      const auto rows = random_factors<T>(x.dims(), r, ++seed);
      const auto cols = column_major(x.dims(), rows, r);
      std::vector<const T*> factors;
      for (const auto& f : cols) factors.push_back(f.data());
      detail::SparseOperand<T> op(*c, x, CsfLayout::two);
      for (int n = 0; n < x.order(); ++n) {
        const std::vector<T> expected = coo_mttkrp(x, rows, n, r);
        for (int t : {1, 3}) {
          set_num_threads(t);
          std::vector<T> a(expected.size()), b(expected.size());
          op.mttkrp(n, factors, r, a.data());
          op.mttkrp(n, factors, r, b.data());
          EXPECT_LT(relative_difference(a, expected), tol)
              << "order " << x.order() << " mode " << n << " sizes " << x.dim(0) << ", " << t
              << " threads";
          EXPECT_TRUE(same_bits(a, b)) << "mode " << n << ", " << t << " threads";
        }
      }
    }
  }
  set_num_threads(threads);
}

// CP-ALS from the same random start on one tree, on two trees and on all trees: the same
// fits and model to rounding.
TYPED_TEST(CsfTwo, CpAlsOnOneAndTwoTreesMatchesAllTrees) {
  using T = TypeParam;
  const double tol = sizeof(T) == 4 ? 1e-4 : 1e-10;
  for (const std::vector<index_t>& dims :
       std::vector<std::vector<index_t>>{{60, 250, 9}, {20, 30, 8, 12}, {6, 15, 4, 9, 5}}) {
    const SparseTensor<T> x = random_entries<T>(dims, 4000, 160);
    CpOptions o;
    o.rank = 4;
    o.init = CpInit::random;
    o.max_iters = 8;
    o.tol = 0.0;
    const CpResult<T> all = cp_als(x, o, {}, {CsfLayout::all});
    for (CsfLayout layout : {CsfLayout::one, CsfLayout::two}) {
      const CpResult<T> got = cp_als(x, o, {}, {layout});
      const std::string where =
          "layout " + std::string(to_string(layout)) + " order " + std::to_string(dims.size());
      ASSERT_EQ(got.fit_history.size(), all.fit_history.size()) << where;
      EXPECT_LT(relative_difference(got.fit_history, all.fit_history), tol) << where;
      EXPECT_LT(relative_difference(got.model.weights, all.model.weights), tol) << where;
      for (std::size_t n = 0; n < dims.size(); ++n) {
        EXPECT_LT(relative_difference(got.model.factors[n].values(), all.model.factors[n].values()),
                  tol)
            << where << " mode " << n;
      }
    }
  }
}

// The first tree is rooted at the smallest mode (the first of equal ones), the second at the
// first's leaf mode (the largest, the last of equal ones); together less than all trees of a
// 4-way tensor; the name parses back.
TEST(CsfTwoLayout, TreesAndName) {
  const SparseTensor<double> x = random_entries<double>({40, 7, 300, 300, 7}, 3000, 170);
  auto c = detail::make_compute<double>(Backend::cpu);
  const detail::SparseOperand<double> two(*c, x, CsfLayout::two);
  const detail::SparseOperand<double> all(*c, x, CsfLayout::all);
  ASSERT_EQ(two.trees().size(), 2u);
  EXPECT_EQ(two.trees()[0]->mode(0), 1);
  EXPECT_EQ(two.trees()[0]->mode(4), 3);
  EXPECT_EQ(two.trees()[1]->mode(0), 3);
  EXPECT_EQ(detail::csf_roots(x.dims(), CsfLayout::two), (std::vector<int>{1, 3}));
  double two_bytes = 0.0, all_bytes = 0.0;
  for (const auto& t : two.trees()) two_bytes += t->bytes();
  for (const auto& t : all.trees()) all_bytes += t->bytes();
  EXPECT_LT(two_bytes, 0.5 * all_bytes);
  EXPECT_EQ(csf_layout_for(x, {CsfLayout::two}), CsfLayout::two);
  EXPECT_EQ(parse_csf_layout("two"), CsfLayout::two);
  EXPECT_EQ(to_string(CsfLayout::two), "two");
  test::expect_throw_with<InvalidArgument>(
      [] { parse_csf_layout("three"); },
      "unknown csf layout 'three' (expected auto, all, two or one)");
}

}  // namespace
}  // namespace tenfold
