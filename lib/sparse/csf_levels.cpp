// MTTKRP of any mode from one CSF tree (SPLATT's one-tree layout): the mode of level k >= 1
// gathers, at every node j of level k, the product of the rows of j's ancestors (top-down)
// times j's subtree sum (bottom-up, as the root kernel), into output rows that many roots
// share. Each task adds its contiguous range of roots into its own copy of the output;
// the copies are summed in task order.
#include <algorithm>
#include <vector>

#include "core/instantiate.hpp"
#include "core/memory.hpp"
#include "core/thread_pool.hpp"
#include "sparse/csf.hpp"

namespace tenfold::detail {
namespace {

// acc (I_mode(k) x R, row-major) += the MTTKRP rows of mode(k), k >= 1, from the roots
// [s0, s1): for every node j of level k, acc(id(j)) += P(j) .* S(j), where P(j) is the
// elementwise product of the rows of j's ancestors (levels 0..k-1) and S(j) the sum over
// j's leaves of value times the rows of the levels below k on their path (S = value at a
// leaf). prefix[d] holds P of the level-(d+1) nodes on the current path, sums[d] the S of
// the level-d node being summed; pos and end walk levels 1..k-1 top-down and k+1..last
// bottom-up.
template <class T, IndexWidth W>
TENFOLD_SIMD_CLONES void mttkrp_level_roots(const Csf<T>& tree, const CsfIndex<W>& ix, int k,
                                            const T* const* rows, index_t rank, index_t s0,
                                            index_t s1, T* acc, T* prefix, T* sums, index_t* pos,
                                            index_t* end) {
  const int last = tree.levels() - 1;
  const T* values = tree.values();
  // acc(id(j)) += P .* S(j) for the level-k nodes [lo, hi), children of one node whose
  // own P times its row is `above`
  const LevelRead<W> level_id = ix.ids(k);
  T* t = sums + k * rank;
  const auto add_nodes = [&](index_t lo, index_t hi, const T* above) TENFOLD_INLINE_INTO_CLONE {
    for (index_t j = lo; j < hi; ++j) {
      prefetch_row(level_id, acc, rank, j);
      T* to = acc + level_id[j] * rank;
      if (k == last) {
        const T x = values[j];
        TENFOLD_DISJOINT_ROWS
        for (index_t r = 0; r < rank; ++r) to[r] += x * above[r];
      } else {
        subtree_sum(tree, ix, rows, rank, k, j, t, sums, pos, end);
        TENFOLD_DISJOINT_ROWS
        for (index_t r = 0; r < rank; ++r) to[r] += above[r] * t[r];
      }
    }
  };
  const T* root_rows = rows[tree.mode(0)];
  for (index_t s = s0; s < s1; ++s) {
    std::copy_n(root_rows + ix.ids(0)[s] * rank, rank, prefix);
    if (k == 1) {
      add_nodes(ix.children(0)[s], ix.children(0)[s + 1], prefix);
      continue;
    }
    // Every level-(k-1) node with P = the root's row .* its ancestors' rows .* its own.
    for_each_path(tree, ix, s, k - 1, rows, rank, prefix, pos, end,
                  [&](index_t j, const T* here) TENFOLD_INLINE_INTO_CLONE {
                    add_nodes(ix.children(k - 1)[j], ix.children(k - 1)[j + 1], here);
                  });
  }
}

// acc as mttkrp_level_roots for a 3-way tree (levels 0, 1 and the leaves), in the two
// loops SPLATT writes for it: no stack of levels per fibre, whose bookkeeping cost as much
// as the fibre's own work (NELL-2's fibres hold 1.4 leaves on average). k = 1: acc(id(f))
// += U_root[id(s)] .* sum over f's leaves of value * U_leaf[id]; k = 2: acc(id(leaf)) +=
// value * (U_root[id(s)] .* U_1[id(f)]).
template <class T, IndexWidth W>
TENFOLD_SIMD_CLONES void mttkrp_level_roots3(const Csf<T>& tree, const CsfIndex<W>& ix, int k,
                                             const T* const* rows, index_t rank, index_t s0,
                                             index_t s1, T* acc, T* here) {
  const LevelRead<W> root_id = ix.ids(0), fibres = ix.children(0), fibre_id = ix.ids(1),
                     leaves = ix.children(1), leaf_id = ix.ids(2);
  const T* values = tree.values();
  const T* root_rows = rows[tree.mode(0)];
  const T* fibre_rows = rows[tree.mode(1)];
  const T* leaf_rows = rows[tree.mode(2)];
  for (index_t s = s0; s < s1; ++s) {
    const T* above = root_rows + root_id[s] * rank;
    for (index_t f = fibres[s]; f < fibres[s + 1]; ++f) {
      if (k == 1) {
        prefetch_row(fibre_id, acc, rank, f);
        leaf_sum(leaf_id, leaf_rows, values, rank, leaves[f], leaves[f + 1], here);
        T* to = acc + fibre_id[f] * rank;
        TENFOLD_DISJOINT_ROWS
        for (index_t r = 0; r < rank; ++r) to[r] += above[r] * here[r];
        continue;
      }
      prefetch_row(fibre_id, fibre_rows, rank, f);
      const T* row = fibre_rows + fibre_id[f] * rank;
      TENFOLD_DISJOINT_ROWS
      for (index_t r = 0; r < rank; ++r) here[r] = above[r] * row[r];
      for (index_t c = leaves[f]; c < leaves[f + 1]; ++c) {
        prefetch_row(leaf_id, acc, rank, c);
        T* to = acc + leaf_id[c] * rank;
        const T x = values[c];
        TENFOLD_DISJOINT_ROWS
        for (index_t r = 0; r < rank; ++r) to[r] += x * here[r];
      }
    }
  }
}

}  // namespace

template <class T>
void csf_mttkrp_level(const Csf<T>& tree, int level,
                      std::type_identity_t<std::span<const T* const>> rows, index_t rank,
                      index_t out_rows, T* out, std::vector<HostArray<T>>* copies) {
  if (level == 0) {
    csf_mttkrp(tree, rows, rank, out);
    return;
  }
  const auto& cuts = tree.cuts();
  const auto pieces = static_cast<index_t>(cuts.size()) - 1;
  // parts (one per thread, at least one): contiguous ranges of pieces, each into its own
  // row-major copy of the output, added to at random rows: on huge pages
  // (random_rows_room), kept by the caller from one call to the next (memory mapped anew
  // at every call is zeroed page by page by the system first)
  const index_t parts = std::max<index_t>(1, std::min<index_t>(pool_threads(), pieces));
  const auto size = static_cast<std::size_t>(out_rows * rank);
  std::vector<HostArray<T>> own;
  std::vector<HostArray<T>>& acc = copies != nullptr ? *copies : own;
  if (acc.size() < static_cast<std::size_t>(parts)) acc.resize(static_cast<std::size_t>(parts));
  with_index(tree, [&](const auto& ix) {
    parallel_for(parts, [&](index_t part) {
      HostArray<T>& a = acc[static_cast<std::size_t>(part)];
      a.resize(random_rows_room<T>(size));
      std::fill_n(a.data(), size, T(0));
      TreeScratch<T> scratch(tree.levels(), rank);
      const index_t first = part * pieces / parts, past = (part + 1) * pieces / parts;
      if (first == past) return;
      const index_t s0 = cuts[static_cast<std::size_t>(first)],
                    s1 = cuts[static_cast<std::size_t>(past)];
      if (tree.levels() == 3) {
        mttkrp_level_roots3(tree, ix, level, rows.data(), rank, s0, s1, a.data(),
                            scratch.sums.data());
      } else {
        mttkrp_level_roots(tree, ix, level, rows.data(), rank, s0, s1, a.data(),
                           scratch.prefix.data(), scratch.sums.data(), scratch.pos.data(),
                           scratch.end.data());
      }
    });
  });
  // out(i, r) = sum over the parts, in order, of acc_part(i, r) (column-major out), in
  // tiles of rows
  constexpr index_t kTile = 64;
  parallel_for((out_rows + kTile - 1) / kTile, [&](index_t tile) {
    const index_t i0 = tile * kTile, i1 = std::min(out_rows, i0 + kTile);
    for (index_t r = 0; r < rank; ++r) {
      for (index_t i = i0; i < i1; ++i) {
        T v = acc[0].data()[i * rank + r];
        for (std::size_t p = 1; p < static_cast<std::size_t>(parts); ++p)
          v += acc[p].data()[i * rank + r];
        out[i + r * out_rows] = v;
      }
    }
  });
}

#define TENFOLD_INSTANTIATE_CSF_LEVEL(T)                                                      \
  template void csf_mttkrp_level<T>(const Csf<T>&, int,                                       \
                                    std::type_identity_t<std::span<const T* const>>, index_t, \
                                    index_t, T*, std::vector<HostArray<T>>*);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CSF_LEVEL)

}  // namespace tenfold::detail
