// Compressed sparse fibres (CSF, Smith and Karypis 2015, as SPLATT): the entries of a
// sparse tensor as a forest whose level 0 holds the distinct indices of a root mode,
// level 1 those of the next mode under each root, and so on down to one leaf per entry.
// One tree per mode, each rooted at the mode whose MTTKRP it computes: every output row
// is then one root's subtree, so threads own disjoint rows, need no atomics, and each
// row's sum runs in the same order for any thread count (SPLATT's "all-mode" CSF).
#pragma once

#include <algorithm>
#include <span>
#include <type_traits>
#include <vector>

#include "core/simd.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold::detail {

template <class T>
class Csf {
 public:
  /// The tree rooted at mode `root`; the other modes follow by increasing size (shorter
  /// upper levels, more shared prefixes; ties by mode number).
  Csf(const SparseTensor<T>& x, int root);

  /// Upper bound on the bytes of one tree of an order-N tensor with nnz entries.
  static double bytes_bound(int order, index_t nnz);

  int levels() const { return static_cast<int>(modes_.size()); }
  /// The mode of a level (level 0: the root mode).
  int mode(int level) const { return modes_[static_cast<std::size_t>(level)]; }
  index_t nodes(int level) const {
    return static_cast<index_t>(ids_[static_cast<std::size_t>(level)].size());
  }
  /// Index (in the level's mode) of each node of a level.
  const index_t* ids(int level) const { return ids_[static_cast<std::size_t>(level)].data(); }
  /// Children of node j of level d < levels()-1: nodes [ptr[j], ptr[j+1]) of level d+1.
  const index_t* children(int level) const { return ptr_[static_cast<std::size_t>(level)].data(); }
  /// Size of the root mode.
  index_t root_size() const { return root_size_; }
  /// The value of each leaf.
  const T* values() const { return values_.data(); }
  /// Roots split into pieces of about equal numbers of leaves: roots [cuts[c], cuts[c+1]).
  /// A function of the tensor only (not of the thread count).
  const std::vector<index_t>& cuts() const { return cuts_; }
  /// The leaves under root s are leaves [first_leaf(s), first_leaf(s + 1)).
  index_t first_leaf(index_t s) const { return first_leaf_[static_cast<std::size_t>(s)]; }

 private:
  index_t root_size_;
  std::vector<int> modes_;
  std::vector<std::vector<index_t>> ids_, ptr_;
  std::vector<T> values_;
  std::vector<index_t> cuts_;
  std::vector<index_t> first_leaf_;
};

/// out (I_root x R, column-major, as the ALS loop keeps its factors) = the MTTKRP of the
/// tree's root mode, from row-major factors rows[m] (I_m x R) of the other modes. Bottom-up: each
/// node's partial sum t(j) = sum over its children c of U_{mode(c)}[id(c)] * t(c) (leaves: value *
/// row). Parallel over the root pieces; rows of empty slices are zero.
template <class T>
void csf_mttkrp(const Csf<T>& tree, std::type_identity_t<std::span<const T* const>> rows,
                index_t rank, T* out);

/// Phi (I_root x R, row-major) = (X_(n) ./ max(B Pi^T, eps)) Pi for the root mode n, B
/// (I_n x R, row-major) and Pi the Khatri-Rao rows of the other factors rows[m] (row-major)
/// at the nonzeros: CP-APR's multiplicative update (cp_apr.cpp). Parallel over the root
/// pieces; rows of empty slices are zero.
template <class T>
void csf_poisson_phi(const Csf<T>& tree, std::type_identity_t<std::span<const T* const>> rows,
                     const T* b, index_t rank, T eps, T* phi);

/// pi (nnz x R, row-major, in leaf order) = the Khatri-Rao row of every leaf (as
/// for_each_leaf passes it): what csf_poisson_phi recomputes at each call, kept.
template <class T>
void csf_khatri_rao_rows(const Csf<T>& tree, std::type_identity_t<std::span<const T* const>> rows,
                         index_t rank, T* pi);

/// csf_poisson_phi from the rows of csf_khatri_rao_rows.
template <class T>
void csf_poisson_phi_kept(const Csf<T>& tree, const T* pi, const T* b, index_t rank, T eps, T* phi);

/// Scratch of for_each_leaf for one thread.
template <class T>
struct LeafScratch {
  LeafScratch(int levels, index_t rank)
      : prefix(static_cast<std::size_t>(levels * rank)),
        pos(static_cast<std::size_t>(levels)),
        end(static_cast<std::size_t>(levels)) {}
  std::vector<T> prefix;
  std::vector<index_t> pos, end;
};

/// Calls leaf(value, pi) for every leaf under root node s, in order, where pi (R) is the
/// elementwise product of the rows rows[mode(d)][id] of the leaf's ancestors at levels
/// 1..N-1 and of the leaf itself (the Khatri-Rao row of the entry, without the root
/// mode). Top-down and iterative: prefix[d] = prefix[d-1] .* the row of the level-d node
/// on the current path.
template <class T, class Leaf>
TENFOLD_INLINE_INTO_CLONE inline void for_each_leaf(const Csf<T>& tree, index_t s,
                                                    const T* const* rows, index_t rank,
                                                    LeafScratch<T>& scratch, Leaf&& leaf) {
  const int last = tree.levels() - 1;
  T* prefix = scratch.prefix.data();
  index_t* pos = scratch.pos.data();
  index_t* end = scratch.end.data();
  std::fill(prefix, prefix + rank, T(1));
  int d = 1;
  pos[1] = tree.children(0)[s];
  end[1] = tree.children(0)[s + 1];
  for (;;) {
    if (pos[d] == end[d]) {
      if (d == 1) return;
      ++pos[--d];
      continue;
    }
    const index_t j = pos[d];
    const T* row = rows[tree.mode(d)] + tree.ids(d)[j] * rank;
    const T* above = prefix + (d - 1) * rank;
    T* here = prefix + d * rank;
    for (index_t r = 0; r < rank; ++r) here[r] = above[r] * row[r];
    if (d == last) {
      leaf(tree.values()[j], static_cast<const T*>(here));
      ++pos[d];
    } else {
      pos[d + 1] = tree.children(d)[j];
      end[d + 1] = tree.children(d)[j + 1];
      ++d;
    }
  }
}

}  // namespace tenfold::detail
