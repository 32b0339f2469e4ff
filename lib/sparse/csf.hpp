// Compressed sparse fibres (CSF, Smith and Karypis 2015, as SPLATT): the entries of a
// sparse tensor as a forest whose level 0 holds the distinct indices of a root mode,
// level 1 those of the next mode under each root, and so on down to one leaf per entry.
// One tree per mode, each rooted at the mode whose MTTKRP it computes: every output row
// is then one root's subtree, so threads own disjoint rows, need no atomics, and each
// row's sum runs in the same order for any thread count (SPLATT's "all-mode" CSF). Or
// one tree for all modes (csf_mttkrp_level: the other modes' rows are shared by roots),
// or that tree and a second rooted at its leaf mode (SPLATT's two-tree CSF).
// Each level keeps its node ids and child pointers in 32 bits where they fit, else in 64
// (chosen when the tree is built); the kernels are compiled once per width (CsfIndex)
// and with_index picks one per call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/memory.hpp"
#include "core/simd.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold::detail {

/// Values below this fit in 32 bits.
inline constexpr index_t kNarrowLimit = index_t{1} << 32;

/// One level's node ids or child pointers: 32-bit values, or 64-bit where some value is
/// not below the level's limit.
class IndexLevel {
 public:
  /// An empty level of 64-bit values when `wide`, with room for `capacity` values.
  IndexLevel(index_t capacity, bool wide);
  void push_back(index_t v) {
    if (wide_) {
      wide_values_.push_back(v);
    } else {
      narrow_values_.push_back(static_cast<std::uint32_t>(v));
    }
  }
  bool wide() const { return wide_; }
  index_t size() const {
    return static_cast<index_t>(wide_ ? wide_values_.size() : narrow_values_.size());
  }
  /// The values: std::uint32_t, or index_t when wide().
  const void* data() const {
    return wide_ ? static_cast<const void*>(wide_values_.data()) : narrow_values_.data();
  }
  index_t operator[](index_t j) const {
    const auto k = static_cast<std::size_t>(j);
    return wide_ ? wide_values_[k] : static_cast<index_t>(narrow_values_[k]);
  }
  double bytes() const {
    return static_cast<double>(size()) * (wide_ ? sizeof(index_t) : sizeof(std::uint32_t));
  }

 private:
  bool wide_;
  std::vector<std::uint32_t> narrow_values_;
  std::vector<index_t> wide_values_;
};

/// How the levels of a tree are stored: all 32-bit, all 64-bit, or some of each.
enum class IndexWidth { narrow, wide, mixed };

/// The transient arrays of building a tree, kept from one tree to the next: the sorted
/// entry numbers, a spare array (the sort's other half, then one level's coordinates in
/// sorted order), 32-bit when nnz and every mode's size are at most 2^32, and the level at
/// which each sorted entry starts new nodes (one byte).
class CsfScratch {
 public:
  /// For trees of a tensor of sizes `dims` with nnz entries (at most 255 modes).
  CsfScratch(std::span<const index_t> dims, index_t nnz);
  /// Bytes a CsfScratch for such a tensor holds while a tree is built.
  static double bytes(std::span<const index_t> dims, index_t nnz);

 private:
  template <class T>
  friend class Csf;
  bool wide_;
  std::vector<std::uint32_t> narrow_perm_, narrow_spare_;
  std::vector<index_t> wide_perm_, wide_spare_;
  std::vector<std::uint8_t> first_new_;
};

/// A tensor's entries taken to build its trees (x left empty), so that each array goes as
/// soon as no tree reads it again: every mode's indices narrowed to 32 bits, in an array of
/// its own (4 bytes per entry and mode against x's 8), and the values moved. The last tree
/// built from them releases each array after its last read of it (Csf's constructor with
/// `last`). For tensors whose every mode's size is at most 2^32 (fit).
template <class T>
class TakenEntries {
 public:
  /// Whether the entries of a tensor of sizes `dims` can be taken (their indices fit).
  static bool fit(std::span<const index_t> dims);
  /// Bytes the taken entries of a tensor of sizes `dims` with nnz entries hold before any
  /// is released: a 32-bit index per mode and a value per entry.
  static double bytes(std::span<const index_t> dims, index_t nnz) {
    return static_cast<double>(nnz) *
           (static_cast<double>(dims.size()) * sizeof(std::uint32_t) + sizeof(T));
  }
  /// Takes x's entries, x's sizes fitting; x is left empty.
  explicit TakenEntries(SparseTensor<T>&& x);

  int order() const { return static_cast<int>(dims_.size()); }
  index_t dim(int m) const { return dims_[static_cast<std::size_t>(m)]; }
  const std::vector<index_t>& dims() const { return dims_; }
  index_t nnz() const { return nnz_; }
  /// The indices of mode m (empty once released).
  std::span<const std::uint32_t> indices(int m) const {
    return indices_[static_cast<std::size_t>(m)];
  }
  /// The values (empty once released).
  std::span<const T> values() const { return values_; }
  /// Frees the indices of mode m.
  void release_indices(int m);
  /// Frees the values.
  void release_values();

 private:
  std::vector<index_t> dims_;
  index_t nnz_;
  std::vector<std::vector<std::uint32_t>> indices_;
  std::vector<T> values_;
};

/// The modes of the levels of a tree rooted at `root` of a tensor of sizes `dims`: the root,
/// then the others by increasing size (shorter upper levels, more shared prefixes; ties by
/// mode number), as SPLATT orders them.
std::vector<int> csf_mode_order(std::span<const index_t> dims, int root);

template <class T>
class Csf {
 public:
  /// The tree rooted at mode `root`, its levels in csf_mode_order. A level is stored in 32
  /// bits when all its values are below `max_narrow` (at most kNarrowLimit; tests pass
  /// less to force 64-bit levels), else in 64. Builds in `scratch` (made for x).
  Csf(const SparseTensor<T>& x, int root, CsfScratch& scratch, index_t max_narrow = kNarrowLimit);
  /// The same with a scratch of its own.
  Csf(const SparseTensor<T>& x, int root, index_t max_narrow = kNarrowLimit);
  /// The same from taken entries. `last`: no tree is built from them after this one, which
  /// then releases each mode's indices once it has made that mode's level, the scratch's
  /// spare array after the levels (made again if the scratch is used again), and the values
  /// once it has gathered them.
  Csf(TakenEntries<T>& entries, int root, CsfScratch& scratch, index_t max_narrow, bool last);

  /// Upper bound on the bytes of one tree (any root) of a tensor of sizes `dims` with nnz
  /// entries (its build's scratch apart: CsfScratch::bytes).
  static double bytes_bound(std::span<const index_t> dims, index_t nnz);

  int levels() const { return static_cast<int>(modes_.size()); }
  /// The mode of a level (level 0: the root mode).
  int mode(int level) const { return modes_[static_cast<std::size_t>(level)]; }
  index_t nodes(int level) const { return ids_[static_cast<std::size_t>(level)].size(); }
  /// Index (in the level's mode) of each node of a level (read by the kernels through
  /// CsfIndex).
  const IndexLevel& ids(int level) const { return ids_[static_cast<std::size_t>(level)]; }
  /// Children of node j of level d < levels()-1: nodes [ptr[j], ptr[j+1]) of level d+1.
  const IndexLevel& children(int level) const { return ptr_[static_cast<std::size_t>(level)]; }
  IndexWidth index_width() const { return width_; }
  /// Bytes held by the tree.
  double bytes() const;
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
  // Entries: const SparseTensor<T>, or TakenEntries<T> (released as read when `release`).
  template <class Entries>
  void make(Entries& x, CsfScratch& scratch, index_t max_narrow, bool release);
  template <class Word, class Entries>
  void build(Entries& x, std::vector<Word>& perm, std::vector<Word>& spare,
             std::vector<std::uint8_t>& first_new, index_t max_narrow, bool release);

  index_t root_size_;
  std::vector<int> modes_;
  std::vector<IndexLevel> ids_, ptr_;
  IndexWidth width_;
  std::vector<T> values_;
  std::vector<index_t> cuts_;
  std::vector<index_t> first_leaf_;
};

/// The trees of x rooted at `roots`: as many built at once as the threads and the memory
/// allow (a scratch each; the same trees however many), else, or when `one_at_a_time`, one
/// after another in one scratch. Throws MemoryError naming `what` when the trees and one
/// scratch do not fit in the available memory beside `other_bytes` that the caller is
/// about to allocate.
template <class T>
std::vector<std::unique_ptr<Csf<T>>> build_csf_trees(const SparseTensor<T>& x,
                                                     std::span<const int> roots, double other_bytes,
                                                     const std::string& what,
                                                     index_t max_narrow = kNarrowLimit,
                                                     bool one_at_a_time = false);

/// The trees of taken entries rooted at `roots`, one after another in one scratch, the last
/// releasing the entries as it reads them (they are empty on return). Unlike the above,
/// the memory is not checked here: the caller checks csf_taken_trees_bytes before taking them.
template <class T>
std::vector<std::unique_ptr<Csf<T>>> build_csf_trees(TakenEntries<T>& entries,
                                                     std::span<const int> roots,
                                                     index_t max_narrow = kNarrowLimit);

/// Bytes that `trees` trees of a tensor of sizes `dims` with nnz entries and the one
/// scratch that builds them take at most.
template <class T>
double csf_trees_bytes(std::span<const index_t> dims, index_t nnz, int trees) {
  return trees * Csf<T>::bytes_bound(dims, nnz) + CsfScratch::bytes(dims, nnz);
}

/// Bytes that taking a tensor of sizes `dims` (TakenEntries::fit) with nnz entries and
/// building `trees` trees from its entries (build_csf_trees, 32-bit levels allowed) hold at
/// most beyond the tensor's own bytes (sparse_tensor_bytes), which they free on the way. The
/// larger of two moments' bounds: the narrowing, the tensor whole beside its 32-bit indices
/// (4 N bytes per entry beyond it); and the last tree's build: the trees before it, the
/// entries (TakenEntries::bytes), the scratch and one level's 32-bit ids, which the level
/// holds before the last tree frees its mode's indices (4 bytes per entry; the values'
/// gather, which holds them twice after the scratch's spare is freed, is within that), or,
/// once it has freed the entries, the whole tree beside the scratch; less the tensor's
/// bytes. An earlier tree's build (the trees so far, the entries and the scratch) holds less
/// than the last one's.
template <class T>
double csf_taken_trees_bytes(std::span<const index_t> dims, index_t nnz, int trees) {
  const auto n = static_cast<double>(nnz);
  const double tree = Csf<T>::bytes_bound(dims, nnz);
  const double narrowed = n * static_cast<double>(dims.size()) * sizeof(std::uint32_t);
  const double last =
      std::max(TakenEntries<T>::bytes(dims, nnz) + n * sizeof(std::uint32_t), tree) +
      CsfScratch::bytes(dims, nnz);
  const double tensor = sparse_tensor_bytes(static_cast<int>(dims.size()), nnz, sizeof(T));
  return std::max(narrowed, (trees - 1) * tree + last - tensor);
}

/// Bytes that building `trees` trees of a tensor of sizes `dims` with nnz entries holds at
/// most beyond the tensor held now: taken (cp_als(SparseTensor&&)) and its sizes fitting,
/// csf_taken_trees_bytes; else (kept by the caller, or a mode larger than 2^32, whose
/// tensor is freed only once the trees are built) the trees and one scratch.
template <class T>
double csf_build_bytes(std::span<const index_t> dims, index_t nnz, int trees, bool taken) {
  return taken && TakenEntries<T>::fit(dims) ? csf_taken_trees_bytes<T>(dims, nnz, trees)
                                             : csf_trees_bytes<T>(dims, nnz, trees);
}

/// The entries of the tensor a tree was built from (of sizes `dims`): every leaf's index in
/// each mode and its value, as a SparseTensor (sorted with mode 0 slowest).
template <class T>
SparseTensor<T> csf_entries(const Csf<T>& tree, std::vector<index_t> dims);

/// One level's values as the kernels read them: compiled for 32-bit, 64-bit, or either
/// (a test per read, for trees of both kinds of level). Held by value in the kernels, so
/// that its pointer and size stay in registers.
template <IndexWidth W>
struct LevelRead {
  explicit LevelRead(const IndexLevel& level)
      : data(level.data()), size(level.size()), wide(level.wide()) {}
  const void* data;
  index_t size;
  bool wide;
  TENFOLD_INLINE_INTO_CLONE index_t operator[](index_t j) const {
    if (W == IndexWidth::wide || (W == IndexWidth::mixed && wide))
      return static_cast<const index_t*>(data)[j];
    return static_cast<const std::uint32_t*>(data)[j];
  }
};

/// A tree's ids and child pointers, read as width W (as Csf::ids and Csf::children).
template <IndexWidth W>
class CsfIndex {
 public:
  template <class T>
  explicit CsfIndex(const Csf<T>& tree) {
    for (int d = 0; d < tree.levels(); ++d) {
      ids_.emplace_back(tree.ids(d));
      if (d + 1 < tree.levels()) ptr_.emplace_back(tree.children(d));
    }
  }
  TENFOLD_INLINE_INTO_CLONE LevelRead<W> ids(int level) const {
    return ids_[static_cast<std::size_t>(level)];
  }
  TENFOLD_INLINE_INTO_CLONE LevelRead<W> children(int level) const {
    return ptr_[static_cast<std::size_t>(level)];
  }

 private:
  std::vector<LevelRead<W>> ids_, ptr_;
};

/// f(CsfIndex<W>(tree)) for the tree's width W: the one dispatch of a kernel call.
template <class T, class F>
decltype(auto) with_index(const Csf<T>& tree, F&& f) {
  switch (tree.index_width()) {
    case IndexWidth::narrow:
      return f(CsfIndex<IndexWidth::narrow>(tree));
    case IndexWidth::wide:
      return f(CsfIndex<IndexWidth::wide>(tree));
    case IndexWidth::mixed:
      break;
  }
  return f(CsfIndex<IndexWidth::mixed>(tree));
}

/// out (I_root x R, column-major, as the ALS loop keeps its factors) = the MTTKRP of the
/// tree's root mode, from row-major factors rows[m] (I_m x R) of the other modes. Bottom-up: each
/// node's partial sum t(j) = sum over its children c of U_{mode(c)}[id(c)] * t(c) (leaves: value *
/// row). Parallel over the root pieces; rows of empty slices are zero.
template <class T>
void csf_mttkrp(const Csf<T>& tree, std::type_identity_t<std::span<const T* const>> rows,
                index_t rank, T* out);

/// out (out_rows x R, column-major) = the MTTKRP of the mode of `level`, from row-major
/// factors of every other mode (the root's included): csf_mttkrp at level 0; below it, each
/// node's ancestors' row product times its subtree sum, added by contiguous ranges of roots
/// (one per thread) into private copies of the output (out_rows x R each), which are summed
/// in range order: the same bits for the same thread count. `copies`: those copies, kept
/// by the caller from one call to the next (grown as needed), or null: made for the call.
template <class T>
void csf_mttkrp_level(const Csf<T>& tree, int level,
                      std::type_identity_t<std::span<const T* const>> rows, index_t rank,
                      index_t out_rows, T* out, std::vector<HostArray<T>>* copies = nullptr);

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

/// One task's scratch for walking a tree: rank values per level in `prefix` and in `sums`
/// (the rows on the current path, the subtree sums), a position and an end per level.
/// Each array on cache lines of its own (HostArray): the threads write theirs all the
/// time, and small arrays from malloc shared lines between threads (the root MTTKRP ran
/// 1.4 times, not 2 times, as fast on two threads as on one).
template <class T>
struct TreeScratch {
  TreeScratch(int levels, index_t rank)
      : prefix(static_cast<std::size_t>(levels * rank)),
        sums(static_cast<std::size_t>(levels * rank)),
        pos(static_cast<std::size_t>(levels)),
        end(static_cast<std::size_t>(levels)) {}
  HostArray<T> prefix, sums;
  HostArray<index_t> pos, end;
};

/// Calls visit(j, p) for every node j of level `depth` >= 1 under root node s, in order,
/// where p (R) is prefix[0 .. R) (set by the caller) times the elementwise product of the
/// rows rows[mode(d)][id] of j's ancestors at levels 1..depth-1 and of j itself.
/// Top-down and iterative: prefix[d] = prefix[d-1] .* the row of the level-d node on the
/// current path (prefix: (depth + 1) R values; pos, end: per level). `ix` reads the tree's
/// levels (with_index).
template <class T, IndexWidth W, class Visit>
TENFOLD_INLINE_INTO_CLONE inline void for_each_path(const Csf<T>& tree, const CsfIndex<W>& ix,
                                                    index_t s, int depth, const T* const* rows,
                                                    index_t rank, T* prefix, index_t* pos,
                                                    index_t* end, Visit&& visit) {
  int d = 1;
  pos[1] = ix.children(0)[s];
  end[1] = ix.children(0)[s + 1];
  for (;;) {
    if (pos[d] == end[d]) {
      if (d == 1) return;
      ++pos[--d];
      continue;
    }
    const index_t j = pos[d];
    const T* row = rows[tree.mode(d)] + ix.ids(d)[j] * rank;
    const T* above = prefix + (d - 1) * rank;
    T* here = prefix + d * rank;
    TENFOLD_DISJOINT_ROWS
    for (index_t r = 0; r < rank; ++r) here[r] = above[r] * row[r];
    if (d == depth) {
      visit(j, static_cast<const T*>(here));
      ++pos[d];
    } else {
      pos[d + 1] = ix.children(d)[j];
      end[d + 1] = ix.children(d)[j + 1];
      ++d;
    }
  }
}

/// Calls leaf(value, pi) for every leaf under root node s, in order, where pi (R) is the
/// elementwise product of the rows of the leaf's ancestors at levels 1..N-1 and of the
/// leaf itself (the Khatri-Rao row of the entry, without the root mode).
template <class T, IndexWidth W, class Leaf>
TENFOLD_INLINE_INTO_CLONE inline void for_each_leaf(const Csf<T>& tree, const CsfIndex<W>& ix,
                                                    index_t s, const T* const* rows, index_t rank,
                                                    TreeScratch<T>& scratch, Leaf&& leaf) {
  T* prefix = scratch.prefix.data();
  std::fill(prefix, prefix + rank, T(1));
  const T* values = tree.values();
  for_each_path(tree, ix, s, tree.levels() - 1, rows, rank, prefix, scratch.pos.data(),
                scratch.end.data(),
                [&](index_t j, const T* pi) TENFOLD_INLINE_INTO_CLONE { leaf(values[j], pi); });
}

// The kernels read factor rows at random places (a factor rarely fits in cache): the row
// of node j + kRowsAhead of a level (its ids, the factor of its mode) is requested early.
inline constexpr index_t kRowsAhead = 8;
template <class T, IndexWidth W>
TENFOLD_INLINE_INTO_CLONE inline void prefetch_row(const LevelRead<W>& ids, const T* factor,
                                                   index_t rank, index_t j) {
  if (j + kRowsAhead >= ids.size) return;
  prefetch_bytes(factor + ids[j + kRowsAhead] * rank, rank * static_cast<index_t>(sizeof(T)));
}

// to = sum over the leaves [lo, hi) of value * U_leaf[id] (zero for none), the first leaf's
// term set (not added to zeros: no zeroing pass, a call of memset per fibre with a
// run-time rank).
template <class T, IndexWidth W>
TENFOLD_INLINE_INTO_CLONE inline void leaf_sum(const LevelRead<W>& leaf_id, const T* leaf_rows,
                                               const T* values, index_t rank, index_t lo,
                                               index_t hi, T* to) {
  if (lo == hi) {
    std::fill(to, to + rank, T(0));
    return;
  }
  prefetch_row(leaf_id, leaf_rows, rank, lo);
  const T* first = leaf_rows + leaf_id[lo] * rank;
  const T x0 = values[lo];
  TENFOLD_DISJOINT_ROWS
  for (index_t r = 0; r < rank; ++r) to[r] = x0 * first[r];
  for (index_t c = lo + 1; c < hi; ++c) {
    prefetch_row(leaf_id, leaf_rows, rank, c);
    const T* row = leaf_rows + leaf_id[c] * rank;
    const T x = values[c];
    TENFOLD_DISJOINT_ROWS
    for (index_t r = 0; r < rank; ++r) to[r] += x * row[r];
  }
}

// t = S(j) for node j of level k < last: S(node) = sum over its children c of
// U_mode(c)[id(c)] .* S(c), S(leaf) = its value; bottom-up, with sums, pos and end
// indexed by level (rank values per level in sums).
template <class T, IndexWidth W>
TENFOLD_INLINE_INTO_CLONE inline void subtree_sum(const Csf<T>& tree, const CsfIndex<W>& ix,
                                                  const T* const* rows, index_t rank, int k,
                                                  index_t j, T* t, T* sums, index_t* pos,
                                                  index_t* end) {
  const int last = tree.levels() - 1;
  const T* values = tree.values();
  const LevelRead<W> leaf_id = ix.ids(last);
  const T* leaf_rows = rows[tree.mode(last)];
  const auto sum_leaves = [&](index_t lo, index_t hi, T* to) TENFOLD_INLINE_INTO_CLONE {
    leaf_sum(leaf_id, leaf_rows, values, rank, lo, hi, to);
  };
  if (k == last - 1) {
    sum_leaves(ix.children(k)[j], ix.children(k)[j + 1], t);
    return;
  }
  if (k == last - 2) {
    // j's children are fibres: t = sum over them of U_mode(k+1)[id] .* their leaves' sum,
    // one loop (a 3-way tree's root), the first fibre's term set
    const LevelRead<W> fibre_id = ix.ids(k + 1), leaves = ix.children(k + 1);
    const T* fibre_rows = rows[tree.mode(k + 1)];
    T* here = sums + (k + 1) * rank;
    const index_t lo = ix.children(k)[j], hi = ix.children(k)[j + 1];
    if (lo == hi) std::fill(t, t + rank, T(0));
    for (index_t f = lo; f < hi; ++f) {
      prefetch_row(fibre_id, fibre_rows, rank, f);
      sum_leaves(leaves[f], leaves[f + 1], here);
      const T* row = fibre_rows + fibre_id[f] * rank;
      if (f == lo) {
        TENFOLD_DISJOINT_ROWS
        for (index_t r = 0; r < rank; ++r) t[r] = row[r] * here[r];
      } else {
        TENFOLD_DISJOINT_ROWS
        for (index_t r = 0; r < rank; ++r) t[r] += row[r] * here[r];
      }
    }
    return;
  }
  std::fill(t, t + rank, T(0));
  // parent .+= U_mode(d)[id(pos[d])] .* sums[d], then the next node of level d
  const auto finish = [&](int d) TENFOLD_INLINE_INTO_CLONE {
    T* parent = d == k + 1 ? t : sums + (d - 1) * rank;
    const T* row = rows[tree.mode(d)] + ix.ids(d)[pos[d]] * rank;
    const T* below = sums + d * rank;
    TENFOLD_DISJOINT_ROWS
    for (index_t r = 0; r < rank; ++r) parent[r] += row[r] * below[r];
    ++pos[d];
  };
  int d = k + 1;
  pos[d] = ix.children(k)[j];
  end[d] = ix.children(k)[j + 1];
  for (;;) {
    if (pos[d] == end[d]) {
      if (d == k + 1) return;
      finish(--d);
      continue;
    }
    const index_t c = pos[d];
    prefetch_row(ix.ids(d), rows[tree.mode(d)], rank, c);
    T* here = sums + d * rank;
    if (d == last - 1) {
      sum_leaves(ix.children(d)[c], ix.children(d)[c + 1], here);
      finish(d);
    } else {
      std::fill(here, here + rank, T(0));
      pos[d + 1] = ix.children(d)[c];
      end[d + 1] = ix.children(d)[c + 1];
      ++d;
    }
  }
}

}  // namespace tenfold::detail
