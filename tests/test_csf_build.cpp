// Building CSF trees: the radix sort of the entries against a comparison sort (and the
// tensor's own sort against an ordered map), every tree against the sorted coordinates it
// compresses, trees built in one reused scratch, in parallel or from taken entries the
// same as trees built alone, the memory bound and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <string>

#include "core/memory.hpp"
#include "expect_throw.hpp"
#include "same_bits.hpp"
#include "sparse/csf.hpp"
#include "sparse/entry_order.hpp"
#include "sparse_test_util.hpp"
#include "tenfold/error.hpp"
#include "tenfold/threads.hpp"

namespace tenfold {
namespace {

using test::random_entries;
using test::random_factors;
using test::same_bits;

// The entries of `indices` in lexicographic order of `modes`, equal ones in their order.
std::vector<index_t> reference_order(const std::vector<std::vector<index_t>>& indices,
                                     const std::vector<int>& modes) {
  std::vector<index_t> perm(indices[0].size());
  std::iota(perm.begin(), perm.end(), index_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](index_t a, index_t b) {
    for (int m : modes) {
      const auto& i = indices[static_cast<std::size_t>(m)];
      if (i[static_cast<std::size_t>(a)] != i[static_cast<std::size_t>(b)])
        return i[static_cast<std::size_t>(a)] < i[static_cast<std::size_t>(b)];
    }
    return false;
  });
  return perm;
}

template <class Word>
class SortEntries : public ::testing::Test {};
using Words = ::testing::Types<std::uint32_t, index_t>;
TYPED_TEST_SUITE(SortEntries, Words);

// Modes of size 1 (no digit), of one digit, of several (2^40: four passes), many equal
// coordinates: the radix sort is the stable comparison sort.
TYPED_TEST(SortEntries, IsTheStableLexicographicSort) {
  using Word = TypeParam;
  const std::vector<index_t> dims = {1, 3, 5000, (index_t{1} << 40) + 7, 70000};
  const std::size_t nnz = 20000;
  std::mt19937_64 gen(7);
  std::vector<std::vector<index_t>> indices;
  std::vector<const index_t*> idx;
  for (index_t d : dims) {
    indices.emplace_back(nnz);
    // small ranges as well, so that many coordinates repeat
    const std::uint64_t range =
        std::min<std::uint64_t>(static_cast<std::uint64_t>(d), 1 + gen() % 4000);
    for (index_t& i : indices.back())
      i = static_cast<index_t>((gen() % range) * (static_cast<std::uint64_t>(d) / range));
    idx.push_back(indices.back().data());
  }
  for (const std::vector<int>& modes :
       std::vector<std::vector<int>>{{0, 1, 2, 3, 4}, {3, 1, 4, 0, 2}, {2, 4}, {4, 3, 2, 1, 0}}) {
    std::vector<Word> perm(nnz), spare;
    std::iota(perm.begin(), perm.end(), Word{0});
    detail::sort_entries<Word>(idx, dims, modes, perm, spare);
    const std::vector<index_t> expected = reference_order(indices, modes);
    EXPECT_TRUE(std::equal(perm.begin(), perm.end(), expected.begin(), expected.end()))
        << "modes " << modes[0] << " " << modes[1] << "...";
  }
}

// The tensor's own sort, on coordinates with few and with many repeats (some summing to
// exactly zero): the entries of an ordered map that sums them in the given order.
TEST(SparseTensorSort, SumsRepeatsInOrderAsAMapDoes) {
  std::mt19937_64 gen(9);
  for (const std::vector<index_t>& dims :
       std::vector<std::vector<index_t>>{{50, 40, 30}, {3, 4, 2}, {7}, {100000, 3}}) {
    const std::size_t nnz = 5000;
    std::vector<index_t> coords(dims.size() * nnz);
    std::vector<double> values(nnz);
    std::map<std::vector<index_t>, double> expected;
    for (std::size_t k = 0; k < nnz; ++k) {
      std::vector<index_t> at;
      for (std::size_t n = 0; n < dims.size(); ++n) {
        coords[n * nnz + k] = static_cast<index_t>(gen() % static_cast<std::uint64_t>(dims[n]));
        at.push_back(coords[n * nnz + k]);
      }
      values[k] = static_cast<double>(static_cast<int>(gen() % 7) - 3);  // zeros and cancellations
      expected[at] += values[k];
    }
    const SparseTensor<double> x(dims, coords, values);
    std::size_t k = 0;
    for (const auto& [at, v] : expected) {
      if (v == 0.0) continue;
      ASSERT_LT(k, static_cast<std::size_t>(x.nnz()));
      for (std::size_t n = 0; n < dims.size(); ++n)
        EXPECT_EQ(x.indices(static_cast<int>(n))[k], at[n]) << "entry " << k;
      EXPECT_EQ(x.values()[k], v) << "entry " << k;
      ++k;
    }
    EXPECT_EQ(static_cast<std::size_t>(x.nnz()), k);
    EXPECT_EQ(x.coords().size(), k * dims.size());
  }
}

// Walks every leaf of a tree: its path's ids are the coordinates of the entries sorted by
// the tree's modes, its value theirs, and siblings have increasing ids (each level holds
// every distinct prefix once).
template <class T>
void expect_tree_of(const detail::Csf<T>& tree, const SparseTensor<T>& x) {
  const int order = x.order();
  std::vector<std::vector<index_t>> indices;
  for (int m = 0; m < order; ++m) indices.emplace_back(x.indices(m).begin(), x.indices(m).end());
  std::vector<int> modes;
  for (int d = 0; d < order; ++d) modes.push_back(tree.mode(d));
  const std::vector<index_t> expected = reference_order(indices, modes);
  std::vector<index_t> path(static_cast<std::size_t>(order));
  index_t leaf = 0;
  bool ok = true;
  const auto walk = [&](const auto& self, int d, index_t lo, index_t hi) -> void {
    for (index_t j = lo; j < hi && ok; ++j) {
      path[static_cast<std::size_t>(d)] = tree.ids(d)[j];
      if (j > lo && tree.ids(d)[j] <= tree.ids(d)[j - 1]) ok = false;
      if (d + 1 < order) {
        if (tree.children(d)[j] >= tree.children(d)[j + 1]) ok = false;  // no childless node
        self(self, d + 1, tree.children(d)[j], tree.children(d)[j + 1]);
        continue;
      }
      const auto e = static_cast<std::size_t>(expected[static_cast<std::size_t>(leaf)]);
      for (int l = 0; l < order; ++l)
        if (path[static_cast<std::size_t>(l)] != indices[static_cast<std::size_t>(modes[l])][e])
          ok = false;
      if (!same_bits(std::vector<T>{tree.values()[leaf]}, std::vector<T>{x.values()[e]}))
        ok = false;
      ++leaf;
    }
  };
  walk(walk, 0, 0, tree.nodes(0));
  EXPECT_TRUE(ok) << "root mode " << tree.mode(0) << ", at leaf " << leaf;
  EXPECT_EQ(leaf, x.nnz());
  EXPECT_EQ(tree.first_leaf(tree.nodes(0)), x.nnz());
}

// Every root of 2-, 3- and 4-way tensors, levels all 32-bit and all 64-bit, one scratch
// reused from tree to tree; the entries read back from each tree are the tensor's.
TEST(CsfBuild, TreesHoldTheSortedCoordinates) {
  std::uint64_t seed = 80;
  for (const std::vector<index_t>& dims : std::vector<std::vector<index_t>>{
           {50, 9}, {40, 300, 7}, {30, 200, 5, 12}, {1, 60, 1}, {index_t{1} << 33, 20, 3}}) {
    const SparseTensor<double> x = random_entries<double>(dims, 2500, ++seed);
    detail::CsfScratch scratch(x.dims(), x.nnz());
    for (int n = 0; n < x.order(); ++n) {
      for (index_t max_narrow : {detail::kNarrowLimit, index_t{1}}) {
        const detail::Csf<double> tree(x, n, scratch, max_narrow);
        expect_tree_of(tree, x);
        const SparseTensor<double> back = detail::csf_entries(tree, x.dims());
        EXPECT_EQ(back.coords(), x.coords()) << "root " << n;
        EXPECT_EQ(back.values(), x.values()) << "root " << n;
      }
    }
  }
  const SparseTensor<float> empty({4, 5, 6}, {}, {});
  const detail::Csf<float> tree(empty, 1);
  EXPECT_EQ(tree.nodes(0), 0);
  EXPECT_EQ(tree.first_leaf(0), 0);
  EXPECT_EQ(detail::csf_entries(tree, empty.dims()).nnz(), 0);
}

// Trees from taken entries (32-bit indices, sizes up to 2^32), levels 32- and 64-bit: every
// root's tree holds the tensor's sorted coordinates and is the size of the tensor's own;
// the tensor is left empty, the last tree releases every array it read, and the scratch
// (whose spare it freed) builds the tensor's tree after it. A mode larger than 2^32 is not
// taken.
TEST(CsfBuild, TreesOfTakenEntriesAreTheTensorsTrees) {
  std::uint64_t seed = 120;
  for (const std::vector<index_t>& dims : std::vector<std::vector<index_t>>{
           {50, 9}, {40, 300, 7}, {30, 200, 5, 12}, {1, 60, 1}, {index_t{1} << 32, 20, 3}}) {
    const SparseTensor<double> x = random_entries<double>(dims, 2500, ++seed);
    SparseTensor<double> copy = x;
    detail::TakenEntries<double> taken(std::move(copy));
    EXPECT_EQ(copy.nnz(), 0);
    EXPECT_TRUE(copy.coords().empty());
    detail::CsfScratch scratch(x.dims(), x.nnz());
    for (int n = 0; n < x.order(); ++n) {
      const bool last = n + 1 == x.order();
      const index_t max_narrow = n % 2 == 0 ? detail::kNarrowLimit : 1;
      const detail::Csf<double> tree(taken, n, scratch, max_narrow, last);
      expect_tree_of(tree, x);
      const detail::Csf<double> own(x, n, scratch, max_narrow);
      EXPECT_EQ(tree.bytes(), own.bytes()) << "root " << n;
      EXPECT_EQ(tree.index_width(), own.index_width()) << "root " << n;
      for (int m = 0; m < x.order(); ++m)
        EXPECT_EQ(taken.indices(m).empty(), last) << "root " << n << ", mode " << m;
      EXPECT_EQ(taken.values().empty(), last) << "root " << n;
    }
    // build_csf_trees from taken entries: the same trees, the entries released.
    SparseTensor<double> again = x;
    detail::TakenEntries<double> entries(std::move(again));
    std::vector<int> roots(dims.size());
    std::iota(roots.begin(), roots.end(), 0);
    const auto trees = detail::build_csf_trees(entries, roots);
    for (int n = 0; n < x.order(); ++n) expect_tree_of(*trees[static_cast<std::size_t>(n)], x);
    EXPECT_TRUE(entries.values().empty());
  }
  SparseTensor<double> wide = random_entries<double>({(index_t{1} << 32) + 1, 4}, 10, 130);
  const SparseTensor<double> kept = wide;
  test::expect_throw_with<InvalidArgument>(
      [&] { detail::TakenEntries<double> e(std::move(wide)); },
      "the entries of a sparse tensor with a mode larger than 2^32 are not taken in 32 bits");
  EXPECT_EQ(wide.coords(), kept.coords());
}

// build_csf_trees, one tree at a time or several (1 and 3 threads): the trees built alone,
// to the bit (their MTTKRPs), each within bytes_bound.
TEST(CsfBuild, TreesBuiltTogetherAreTheTreesBuiltAlone) {
  const SparseTensor<double> x = random_entries<double>({40, 300, 7, 25}, 4000, 90);
  const index_t r = 3;
  const auto f = random_factors<double>(x.dims(), r, 91);
  std::vector<const double*> rows;
  for (const auto& v : f) rows.push_back(v.data());
  const std::vector<int> roots = {0, 1, 2, 3};
  const int threads = num_threads();
  for (int t : {1, 3}) {
    set_num_threads(t);
    const auto trees = detail::build_csf_trees(x, roots, 0.0, "test trees");
    for (int n = 0; n < 4; ++n) {
      const detail::Csf<double> alone(x, n);
      std::vector<double> a(static_cast<std::size_t>(x.dim(n) * r)), b(a.size());
      detail::csf_mttkrp(*trees[static_cast<std::size_t>(n)], rows, r, a.data());
      detail::csf_mttkrp(alone, rows, r, b.data());
      EXPECT_TRUE(same_bits(a, b)) << t << " threads, root " << n;
      EXPECT_EQ(trees[static_cast<std::size_t>(n)]->bytes(), alone.bytes());
      EXPECT_LE(alone.bytes(), detail::Csf<double>::bytes_bound(x.dims(), x.nnz()));
    }
  }
  set_num_threads(threads);
}

// The bound holds for every root, with more slices than entries, and with a mode whose
// ids take 64 bits.
TEST(CsfBuild, BytesBoundHoldsForEveryRoot) {
  for (const std::vector<index_t>& dims : std::vector<std::vector<index_t>>{
           {5000, 3, 4}, {2, 3}, {9000, 8000, 7000}, {index_t{1} << 33, 20, 3}}) {
    const SparseTensor<float> x = random_entries<float>(dims, 700, 100);
    for (int n = 0; n < x.order(); ++n)
      EXPECT_LE(detail::Csf<float>(x, n).bytes(),
                detail::Csf<float>::bytes_bound(x.dims(), x.nnz()));
  }
}

// Refusals in one line: memory that is not there, more than 255 modes, a scratch made for
// another tensor.
TEST(CsfBuild, Refusals) {
  const SparseTensor<double> x = random_entries<double>({40, 300, 7}, 500, 110);
  const std::vector<int> roots = {0, 1, 2};
  test::expect_throw_with<MemoryError>(
      [&] {
        detail::build_csf_trees(x, roots, 4.0 * static_cast<double>(detail::host_available_bytes()),
                                "the trees of a test");
      },
      "the trees of a test needs about ");
  const SparseTensor<double> wide_order(std::vector<index_t>(256, 1), std::vector<index_t>(256, 0),
                                        {1.0});
  test::expect_throw_with<InvalidArgument>(
      [&] { detail::Csf<double>(wide_order, 0); },
      "a CSF tree holds at most 255 modes, got a tensor of order 256");
  detail::CsfScratch other(x.dims(), x.nnz() + 1);
  test::expect_throw_with<InvalidArgument>([&] { detail::Csf<double>(x, 0, other); },
                                           "a CSF scratch for " + std::to_string(x.nnz() + 1) +
                                               " entries cannot build the tree of " +
                                               std::to_string(x.nnz()));
}

}  // namespace
}  // namespace tenfold
