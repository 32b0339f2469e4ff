// CsfLayout::automatic: the layout chosen for a given amount of available memory, for a
// tensor kept by the caller and for one that cp_als takes (whose bytes the take frees),
// against thresholds worked out by hand from the per-nonzero bytes of docs/sparse.md
// ("Memory"), and against the peak of the taken path's moments formed here from the byte
// bounds of its parts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sparse/csf.hpp"
#include "sparse/sparse_operand.hpp"
#include "sparse_test_util.hpp"
#include "tenfold/cp.hpp"

namespace tenfold {
namespace {

using test::random_entries;

constexpr double kFree = 0.75;  // the share of the available memory a layout may use

// A shape, its nonzeros, and the bytes per nonzero that each layout's build holds beyond
// the tensor, worked out by hand (below) for kept and taken tensors: the thresholds of
// automatic are these over 3/4.
struct Case {
  std::string name;
  std::vector<index_t> dims;
  index_t nnz;
  double kept_two, kept_all;    // bytes per nonzero
  double taken_two, taken_all;  // bytes per nonzero
};

// Per nonzero, all 32-bit (every size and nnz below 2^32), N modes, values of v bytes, at
// 10^8 nonzeros (the few kB of fixed bytes are within the tests' 0.1 %):
//   a tree      Csf::bytes_bound: 4 N ids (the root level counted as a level below: its 16
//               bytes per root, I_root at most, add only what exceeds that, nothing here),
//               4 (N-2) child pointers below the root, v;
//   the scratch 9; the tensor 8 N + v; its taken entries 4 N + v.
// Kept: K trees and the scratch. Taken: the larger of the narrowing (4 N beyond the tensor)
// and the last tree's build, (K-1) trees, the scratch and the larger of the entries with a
// level's ids (4 N + v + 4) and a whole tree, less the tensor.
std::vector<Case> cases_of(std::size_t value_bytes) {
  const index_t n = 100'000'000;
  if (value_bytes == sizeof(double)) {
    // NELL-2, double: tree 12 + 4 + 8 = 24, entries 20 (24 with a level's ids), tensor 32.
    // Kept: 2 trees 57, 3 trees 81. Taken: narrowing 12; two 24 + 24 + 9 - 32 = 25; all
    // 48 + 24 + 9 - 32 = 49.
    // 5-way, double, sizes 100 to 500: tree 20 + 12 + 8 = 40, entries 28 (32 with a level's
    // ids, < 40), tensor 48. Kept: 89, 209. Taken: narrowing 20; two 40 + 40 + 9 - 48 = 41;
    // all 4 x 40 + 40 + 9 - 48 = 161.
    return {{"NELL-2 double", {12092, 9184, 28818}, n, 57, 81, 25, 49},
            {"5-way double", {100, 200, 300, 400, 500}, n, 89, 209, 41, 161}};
  }
  // NELL-2, float: tree 12 + 4 + 4 = 20, entries 16 (20), tensor 28. Kept: 49, 69. Taken:
  // two 20 + 20 + 9 - 28 = 21; all 40 + 20 + 9 - 28 = 41.
  return {{"NELL-2 float", {12092, 9184, 28818}, n, 49, 69, 21, 41}};
}

// Automatic's choice with `per_nnz` bytes per nonzero of the case's available.
template <class T>
CsfLayout choice(const Case& c, double per_nnz, bool taken) {
  return detail::csf_layout_within<T>(c.dims, c.nnz, per_nnz * static_cast<double>(c.nnz), taken);
}

// Just above a layout's threshold it is taken, just below it the next one with fewer trees.
template <class T>
void expect_thresholds(const Case& c, double two, double all, bool taken) {
  const std::string what = c.name + (taken ? ", taken" : ", kept");
  const double up = 1.0 + 1e-3, down = 1.0 - 1e-3;
  EXPECT_EQ(choice<T>(c, all / kFree * up, taken), CsfLayout::all) << what;
  EXPECT_EQ(choice<T>(c, all / kFree * down, taken), CsfLayout::two) << what;
  EXPECT_EQ(choice<T>(c, two / kFree * up, taken), CsfLayout::two) << what;
  EXPECT_EQ(choice<T>(c, two / kFree * down, taken), CsfLayout::one) << what;
  EXPECT_EQ(choice<T>(c, 1.0, taken), CsfLayout::one) << what;
}

template <class T>
void expect_cases_thresholds() {
  for (const Case& c : cases_of(sizeof(T))) {
    expect_thresholds<T>(c, c.kept_two, c.kept_all, false);
    expect_thresholds<T>(c, c.taken_two, c.taken_all, true);
  }
}

TEST(CsfLayoutChoice, ThresholdsOfKeptAndTakenTensors) {
  expect_cases_thresholds<double>();
  expect_cases_thresholds<float>();
}

// The same tensor in the same memory: where the kept tensor leaves room for one tree, the
// taken one's memory (the tensor's own bytes) holds two, or all.
TEST(CsfLayoutChoice, TakenTensorsBytesHoldMoreTrees) {
  const Case nell2 = cases_of(sizeof(double))[0];
  // Bytes per nonzero (x 10^8: GB): kept two needs 57 / 0.75 = 76, all 108; taken two
  // 25 / 0.75 = 33.3, all 49 / 0.75 = 65.3.
  EXPECT_EQ(choice<double>(nell2, 40.0, false), CsfLayout::one);
  EXPECT_EQ(choice<double>(nell2, 40.0, true), CsfLayout::two);
  EXPECT_EQ(choice<double>(nell2, 70.0, false), CsfLayout::one);
  EXPECT_EQ(choice<double>(nell2, 70.0, true), CsfLayout::all);
  EXPECT_EQ(choice<double>(nell2, 90.0, false), CsfLayout::two);
  EXPECT_EQ(choice<double>(nell2, 110.0, false), CsfLayout::all);
}

// A mode larger than 2^32: its entries are not taken in 32 bits (the trees are built from
// the tensor, freed after them), so the taken tensor gets the kept rule. Per nonzero: ids
// 8 + 4 + 4 below the root; the largest root level is mode 0's (nnz roots of 20 bytes: ids
// 8, pointers 4, first leaves 8) in place of its ids below; pointers 4 below it; values 8;
// the scratch 17 (64-bit entry numbers): a tree 16 - 8 + 20 + 4 + 8 = 40, two trees and
// the scratch 97, three 137.
TEST(CsfLayoutChoice, ModeOver32BitsKeepsTheKeptRule) {
  const Case wide = {"mode over 2^32", {index_t{1} << 33, 20, 3}, 100'000'000, 97, 137, 97, 137};
  expect_thresholds<double>(wide, wide.kept_two, wide.kept_all, false);
  expect_thresholds<double>(wide, wide.taken_two, wide.taken_all, true);
}

// 2-way: a tree (8 of ids, 8 of values per nonzero in double) is smaller than the taken
// entries with a level's ids (8 + 8 + 4), so the last build's levels bound the taken peak.
// Kept: a tree 16 and the scratch 9, both trees (all; two is the same) 41. Taken: two trees,
// 16 + 20 + 9 less the tensor's 24: 21; one, the narrowing, 8.
TEST(CsfLayoutChoice, TwoWayTakenCountsALevelsIdsBesideTheEntries) {
  const std::vector<index_t> dims = {1000, 2000};
  const index_t nnz = 100'000'000;
  const auto n = static_cast<double>(nnz);
  for (bool taken : {false, true}) {
    const double all = (taken ? 21.0 : 41.0) / kFree * n;
    EXPECT_EQ(detail::csf_layout_within<double>(dims, nnz, all * 1.001, taken), CsfLayout::all);
    EXPECT_EQ(detail::csf_layout_within<double>(dims, nnz, all * 0.999, taken), CsfLayout::one);
  }
  EXPECT_NEAR(detail::csf_taken_trees_bytes<double>(dims, nnz, 1) / n, 8.0, 1e-3);
}

// The taken path's moments, from the byte bounds of its parts: the narrowing (the tensor
// and its 32-bit indices); each tree's build but the last (the trees so far, that one
// whole, the entries and the scratch); the last (the trees before it, the entries, the
// scratch and a level's 32-bit ids; or, the entries freed, the tree whole and the
// scratch). The largest, as held in all (the tensor included).
template <class T>
double taken_peak(const std::vector<index_t>& dims, index_t nnz, int trees) {
  const auto n = static_cast<double>(nnz);
  const double tensor = sparse_tensor_bytes(static_cast<int>(dims.size()), nnz, sizeof(T));
  const double tree = detail::Csf<T>::bytes_bound(dims, nnz);
  const double entries = detail::TakenEntries<T>::bytes(dims, nnz);
  const double scratch = detail::CsfScratch::bytes(dims, nnz);
  double peak = tensor + 4.0 * n * static_cast<double>(dims.size());
  for (int k = 0; k + 1 < trees; ++k) peak = std::max(peak, (k + 1) * tree + entries + scratch);
  const double before = (trees - 1) * tree;
  peak = std::max(peak, before + entries + scratch + 4.0 * n);
  return std::max(peak, before + tree + scratch);
}

// From 1 kB to 1 TB available: the layout automatic picks for a taken tensor peaks within
// the tensor and 3/4 of the memory (but one, picked when nothing fits), and no layout with
// more trees would; for a kept tensor the same with its trees and the scratch beside it.
template <class T>
void expect_within_budget(const std::vector<index_t>& dims, index_t nnz) {
  const double tensor = sparse_tensor_bytes(static_cast<int>(dims.size()), nnz, sizeof(T));
  const double scratch = detail::CsfScratch::bytes(dims, nnz);
  const double tree = detail::Csf<T>::bytes_bound(dims, nnz);
  const auto trees = [&](CsfLayout l) {
    return static_cast<int>(detail::csf_roots(dims, l).size());
  };
  const std::vector<CsfLayout> order = {CsfLayout::all, CsfLayout::two, CsfLayout::one};
  int taken_more = 0, seen = 0;
  for (double available = 1e3; available < 1e12; available *= 1.05) {
    const double budget = tensor + kFree * available;
    for (bool taken : {false, true}) {
      const auto peak = [&](CsfLayout l) {
        return taken ? taken_peak<T>(dims, nnz, trees(l)) : tensor + trees(l) * tree + scratch;
      };
      const CsfLayout chosen = detail::csf_layout_within<T>(dims, nnz, available, taken);
      const std::string what = std::to_string(available) + " bytes, " + (taken ? "taken" : "kept") +
                               ", " + std::string(to_string(chosen));
      if (chosen != CsfLayout::one) {
        EXPECT_LE(peak(chosen), budget) << what;
      }
      for (CsfLayout more : order) {
        if (more == chosen) break;
        EXPECT_GT(peak(more), budget) << what << ": " << to_string(more) << " fits";
      }
    }
    const CsfLayout kept = detail::csf_layout_within<T>(dims, nnz, available, false);
    const CsfLayout taken = detail::csf_layout_within<T>(dims, nnz, available, true);
    taken_more += trees(taken) > trees(kept);
    seen += trees(taken) < trees(kept);
  }
  // Taking the tensor never costs a tree, and somewhere gains one.
  EXPECT_EQ(seen, 0);
  EXPECT_GT(taken_more, 0);
}

TEST(CsfLayoutChoice, TakenChoicePeaksWithinTheBudget) {
  expect_within_budget<double>({12092, 9184, 28818}, 100'000'000);
  expect_within_budget<float>({12092, 9184, 28818}, 100'000'000);
  expect_within_budget<double>({100, 200, 300, 400, 500}, 10'000'000);
  expect_within_budget<double>({5000, 3, 4}, 700);          // more slices than entries
  expect_within_budget<float>({9000, 8000, 7000}, 30'000);  // roots near nnz per mode
  expect_within_budget<double>({40, 300, 7, 25}, 4'000'000);
  expect_within_budget<double>({1000, 2000}, 1'000'000);
}

// TakenEntries::bytes is what the taken entries hold (nothing released yet).
TEST(CsfLayoutChoice, TakenEntriesBytesAreTheirArrays) {
  for (const std::vector<index_t>& dims :
       std::vector<std::vector<index_t>>{{40, 300, 7}, {30, 200, 5, 12}, {50, 9}}) {
    SparseTensor<float> x = random_entries<float>(dims, 2000, 7);
    const index_t nnz = x.nnz();
    detail::TakenEntries<float> e(std::move(x));
    double held = static_cast<double>(e.values().size_bytes());
    for (int m = 0; m < e.order(); ++m) held += static_cast<double>(e.indices(m).size_bytes());
    EXPECT_EQ(held, detail::TakenEntries<float>::bytes(dims, nnz));
    EXPECT_EQ(held, static_cast<double>(nnz) * (4.0 * static_cast<double>(dims.size()) + 4.0));
  }
}

// The public call: an explicit layout as given either way; a small tensor's trees fit.
TEST(CsfLayoutChoice, CsfLayoutFor) {
  const SparseTensor<double> x = random_entries<double>({40, 300, 7}, 500, 3);
  for (bool taken : {false, true}) {
    EXPECT_EQ(csf_layout_for(x, {}, taken), CsfLayout::all);
    for (CsfLayout l : {CsfLayout::one, CsfLayout::two, CsfLayout::all})
      EXPECT_EQ(csf_layout_for(x, {l}, taken), l);
  }
}

}  // namespace
}  // namespace tenfold
