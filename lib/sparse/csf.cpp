#include "sparse/csf.hpp"

#include <numeric>
#include <string>
#include <type_traits>

#include "core/instantiate.hpp"
#include "core/memory.hpp"
#include "core/thread_pool.hpp"
#include "sparse/entry_order.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

// Roots per piece aim at nnz / kPieces leaves each (at least one root per piece).
constexpr index_t kPieces = 512;

// Bytes of a tree's small vectors (its modes, the level objects), generously.
constexpr double kTreeOverhead = 4096.0;

}  // namespace

IndexLevel::IndexLevel(index_t capacity, bool wide) : wide_(wide) {
  if (wide_) {
    wide_values_.reserve(static_cast<std::size_t>(capacity));
  } else {
    narrow_values_.reserve(static_cast<std::size_t>(capacity));
  }
}

namespace {

// Bytes of a level of `most`-bounded values (32-bit below kNarrowLimit).
double value_bytes(index_t most) {
  return static_cast<double>(most < kNarrowLimit ? sizeof(std::uint32_t) : sizeof(index_t));
}

// The word of a tree's build: 32-bit when every entry number and index fits.
bool wide_build(std::span<const index_t> dims, index_t nnz) {
  return nnz > kNarrowLimit ||
         std::any_of(dims.begin(), dims.end(), [](index_t d) { return d > kNarrowLimit; });
}

}  // namespace

std::vector<int> csf_mode_order(std::span<const index_t> dims, int root) {
  std::vector<int> modes = {root};
  for (int m = 0; m < static_cast<int>(dims.size()); ++m)
    if (m != root) modes.push_back(m);
  std::stable_sort(modes.begin() + 1, modes.end(), [&](int a, int b) {
    return dims[static_cast<std::size_t>(a)] < dims[static_cast<std::size_t>(b)];
  });
  return modes;
}

CsfScratch::CsfScratch(std::span<const index_t> dims, index_t nnz) : wide_(wide_build(dims, nnz)) {
  if (dims.size() > 255) {
    throw InvalidArgument("a CSF tree holds at most 255 modes, got a tensor of order " +
                          std::to_string(dims.size()));
  }
  const auto n = static_cast<std::size_t>(nnz);
  if (wide_) {
    wide_perm_.resize(n);
    wide_spare_.resize(n);
  } else {
    narrow_perm_.resize(n);
    narrow_spare_.resize(n);
  }
  first_new_.resize(n);
}

double CsfScratch::bytes(std::span<const index_t> dims, index_t nnz) {
  const double word = wide_build(dims, nnz) ? sizeof(index_t) : sizeof(std::uint32_t);
  return static_cast<double>(nnz) * (2.0 * word + 1.0) + kSortCountBytes;
}

template <class T>
double Csf<T>::bytes_bound(std::span<const index_t> dims, index_t nnz) {
  // Root r: at most min(nnz, I_r) roots (ids, child pointers, first leaves); every other
  // level at most nnz nodes (ids 32-bit when the mode's size allows, child pointers when
  // nnz does); a value per leaf; the cuts (at most kPieces + 1 pieces). The largest over r.
  const auto order = static_cast<double>(dims.size());
  const auto n = static_cast<double>(nnz);
  double below = 0.0;  // ids of every level as if none were the root
  for (index_t d : dims) below += n * value_bytes(d - 1);
  double most = 0.0;
  for (index_t d : dims) {
    const auto roots = static_cast<double>(std::min(nnz, d));
    const double root = roots * value_bytes(d - 1) - n * value_bytes(d - 1) +
                        (order > 1 ? (roots + 1.0) * value_bytes(nnz) : 0.0) +
                        (roots + 1.0) * sizeof(index_t);
    most = std::max(most, root);
  }
  return below + most + std::max(order - 2.0, 0.0) * (n + 1.0) * value_bytes(nnz) + n * sizeof(T) +
         2.0 * (kPieces + 2) * sizeof(index_t) + kTreeOverhead;
}

template <class T>
double Csf<T>::bytes() const {
  double b = static_cast<double>(values_.size() * sizeof(T) +
                                 (cuts_.size() + first_leaf_.size()) * sizeof(index_t));
  for (const IndexLevel& l : ids_) b += l.bytes();
  for (const IndexLevel& l : ptr_) b += l.bytes();
  return b;
}

template <class T>
bool TakenEntries<T>::fit(std::span<const index_t> dims) {
  return std::all_of(dims.begin(), dims.end(), [](index_t d) { return d <= kNarrowLimit; });
}

template <class T>
TakenEntries<T>::TakenEntries(SparseTensor<T>&& x)
    : dims_(x.dims()), nnz_(x.nnz()), indices_(dims_.size()) {
  if (!fit(dims_)) {
    throw InvalidArgument(
        "the entries of a sparse tensor with a mode larger than 2^32 are not taken in 32 bits");
  }
  // Each mode's indices into 32 bits (exact: every index is below its size), then x's
  // 64-bit coordinates freed and its values moved: x's memory less 4 bytes per index.
  for (int m = 0; m < order(); ++m) {
    const std::span<const index_t> from = x.indices(m);
    std::vector<std::uint32_t>& to = indices_[static_cast<std::size_t>(m)];
    to.resize(from.size());
    std::transform(from.begin(), from.end(), to.begin(),
                   [](index_t i) { return static_cast<std::uint32_t>(i); });
  }
  values_ = std::move(x.values_);
  x = SparseTensor<T>();
}

template <class T>
void TakenEntries<T>::release_indices(int m) {
  std::vector<std::uint32_t>().swap(indices_[static_cast<std::size_t>(m)]);
}

template <class T>
void TakenEntries<T>::release_values() {
  std::vector<T>().swap(values_);
}

// (The scratch lives until the delegated constructor returns.)
template <class T>
Csf<T>::Csf(const SparseTensor<T>& x, int root, index_t max_narrow)
    : Csf(x, root, *std::make_unique<CsfScratch>(x.dims(), x.nnz()), max_narrow) {}

template <class T>
Csf<T>::Csf(const SparseTensor<T>& x, int root, CsfScratch& scratch, index_t max_narrow)
    : root_size_(x.dim(root)), modes_(csf_mode_order(x.dims(), root)) {
  make(x, scratch, max_narrow, false);
}

template <class T>
Csf<T>::Csf(TakenEntries<T>& entries, int root, CsfScratch& scratch, index_t max_narrow, bool last)
    : root_size_(entries.dim(root)), modes_(csf_mode_order(entries.dims(), root)) {
  make(entries, scratch, max_narrow, last);
}

template <class T>
template <class Entries>
void Csf<T>::make(Entries& x, CsfScratch& scratch, index_t max_narrow, bool release) {
  if (max_narrow < 1 || max_narrow > kNarrowLimit) {
    throw InvalidArgument("a CSF tree's 32-bit limit must be in [1, 2^32], got " +
                          std::to_string(max_narrow));
  }
  if (scratch.first_new_.size() != static_cast<std::size_t>(x.nnz())) {
    throw InvalidArgument("a CSF scratch for " + std::to_string(scratch.first_new_.size()) +
                          " entries cannot build the tree of " + std::to_string(x.nnz()));
  }
  const int order = x.order();
  if (scratch.wide_) {
    build(x, scratch.wide_perm_, scratch.wide_spare_, scratch.first_new_, max_narrow, release);
  } else {
    build(x, scratch.narrow_perm_, scratch.narrow_spare_, scratch.first_new_, max_narrow, release);
  }
  // Leaves under each root (the first leaf of root s, following first children down).
  const index_t roots = nodes(0);
  first_leaf_.resize(static_cast<std::size_t>(roots + 1));
  for (index_t s = 0; s <= roots; ++s) {
    index_t j = s;
    for (int d = 0; d < order - 1; ++d) j = ptr_[static_cast<std::size_t>(d)][j];
    first_leaf_[static_cast<std::size_t>(s)] = j;
  }
  const index_t nnz = x.nnz();
  const index_t target = std::max<index_t>(1, (nnz + kPieces - 1) / kPieces);
  cuts_.push_back(0);
  for (index_t s = 1; s <= roots; ++s) {
    if (s == roots || first_leaf_[static_cast<std::size_t>(s)] -
                              first_leaf_[static_cast<std::size_t>(cuts_.back())] >=
                          target)
      cuts_.push_back(s);
  }
}

template <class T>
template <class Word, class Entries>
void Csf<T>::build(Entries& x, std::vector<Word>& perm, std::vector<Word>& spare,
                   std::vector<std::uint8_t>& first_new, index_t max_narrow, bool release) {
  using Index = typename decltype(x.indices(0))::value_type;
  constexpr bool taken = std::is_same_v<Entries, TakenEntries<T>>;
  const int order = x.order();
  const auto nnz = static_cast<std::size_t>(x.nnz());
  std::vector<const Index*> idx;
  for (int m = 0; m < order; ++m) idx.push_back(x.indices(m).data());
  // perm: the entries in the tree's order (level 0's mode slowest).
  std::iota(perm.begin(), perm.end(), Word{0});
  sort_entries<Word, Index>(idx, x.dims(), modes_, perm, spare);
  // first_new[p]: the first level at which sorted entry p's coordinates differ from entry
  // p-1's (0 for p = 0); p starts a node there and at every level below (entries are
  // distinct: the leaf always differs). `order` while not yet known.
  std::fill(first_new.begin(), first_new.end(), static_cast<std::uint8_t>(order));
  if (nnz > 0) first_new[0] = 0;
  bool any_wide = false, all_wide = true;
  const auto level = [&](std::vector<IndexLevel>& levels, index_t capacity, index_t most) {
    const bool wide = most >= max_narrow;
    any_wide = any_wide || wide;
    all_wide = all_wide && wide;
    levels.emplace_back(capacity, wide);
  };
  std::vector<index_t> count(static_cast<std::size_t>(order), 0);
  for (int d = 0; d < order; ++d) {
    // spare: level d's coordinates in sorted order; its nodes are the entries p with
    // first_new[p] <= d, and their ids those coordinates.
    const Index* from = idx[static_cast<std::size_t>(mode(d))];
    for (std::size_t p = 0; p < nnz; ++p) spare[p] = static_cast<Word>(from[perm[p]]);
    index_t& n = count[static_cast<std::size_t>(d)];
    for (std::size_t p = 0; p < nnz; ++p) {
      if (first_new[p] == order && spare[p] != spare[p - 1])
        first_new[p] = static_cast<std::uint8_t>(d);
      n += first_new[p] <= d;
    }
    level(ids_, n, x.dim(mode(d)) - 1);
    IndexLevel& ids = ids_.back();
    for (std::size_t p = 0; p < nnz; ++p)
      if (first_new[p] <= d) ids.push_back(static_cast<index_t>(spare[p]));
    // No later step reads mode(d)'s indices: the last tree frees them.
    if constexpr (taken)
      if (release) x.release_indices(mode(d));
  }
  // Nor the scratch's spare (sort_entries sizes it again if the scratch is used again): the
  // last tree frees it before the values' gather, which holds the values twice.
  if (release) std::vector<Word>().swap(spare);
  // The leaves' values in sorted order, gathered after the levels (so that the last tree
  // has freed the indices by then), and freed by the last tree.
  values_.resize(nnz);
  for (std::size_t p = 0; p < nnz; ++p) values_[p] = x.values()[static_cast<std::size_t>(perm[p])];
  if constexpr (taken)
    if (release) x.release_values();
  // Child pointers: node j of level d starts at entry p; its first child is the node of
  // level d+1 that p starts, the number of level-(d+1) nodes started before p.
  for (int d = 0; d + 1 < order; ++d)
    level(ptr_, count[static_cast<std::size_t>(d)] + 1, count[static_cast<std::size_t>(d) + 1]);
  std::vector<index_t> started(static_cast<std::size_t>(order), 0);
  for (std::size_t p = 0; p < nnz; ++p) {
    for (int d = first_new[p]; d < order; ++d) {
      const auto ds = static_cast<std::size_t>(d);
      if (d + 1 < order) ptr_[ds].push_back(started[ds + 1]);
      ++started[ds];
    }
  }
  for (int d = 0; d + 1 < order; ++d) ptr_[static_cast<std::size_t>(d)].push_back(nodes(d + 1));
  width_ = !any_wide ? IndexWidth::narrow : all_wide ? IndexWidth::wide : IndexWidth::mixed;
}

template <class T>
std::vector<std::unique_ptr<Csf<T>>> build_csf_trees(const SparseTensor<T>& x,
                                                     std::span<const int> roots, double other_bytes,
                                                     const std::string& what, index_t max_narrow,
                                                     bool one_at_a_time) {
  const auto trees = static_cast<int>(roots.size());
  const double all = other_bytes + trees * Csf<T>::bytes_bound(x.dims(), x.nnz());
  const double scratch = CsfScratch::bytes(x.dims(), x.nnz());
  require_host_bytes(all + scratch, what);
  // k trees at once need k scratches.
  const auto available = static_cast<double>(host_available_bytes());
  int at_once = 1;
  while (!one_at_a_time && at_once < std::min(pool_threads(), trees) &&
         all + (at_once + 1) * scratch <= available)
    ++at_once;
  std::vector<CsfScratch> scratches;
  for (int k = 0; k < at_once; ++k) scratches.emplace_back(x.dims(), x.nnz());
  std::vector<std::unique_ptr<Csf<T>>> out(roots.size());
  for (int first = 0; first < trees; first += at_once) {
    // a last, smaller group frees the scratches it does not use
    const int group = std::min(at_once, trees - first);
    scratches.erase(scratches.begin() + group, scratches.end());
    parallel_for(group, [&](index_t k) {
      const auto t = static_cast<std::size_t>(first + k);
      out[t] =
          std::make_unique<Csf<T>>(x, roots[t], scratches[static_cast<std::size_t>(k)], max_narrow);
    });
  }
  return out;
}

template <class T>
std::vector<std::unique_ptr<Csf<T>>> build_csf_trees(TakenEntries<T>& entries,
                                                     std::span<const int> roots,
                                                     index_t max_narrow) {
  CsfScratch scratch(entries.dims(), entries.nnz());
  std::vector<std::unique_ptr<Csf<T>>> out;
  for (std::size_t t = 0; t < roots.size(); ++t) {
    out.push_back(
        std::make_unique<Csf<T>>(entries, roots[t], scratch, max_narrow, t + 1 == roots.size()));
  }
  return out;
}

template <class T>
SparseTensor<T> csf_entries(const Csf<T>& tree, std::vector<index_t> dims) {
  const int last = tree.levels() - 1;
  const index_t nnz = tree.nodes(last);
  const auto n = static_cast<std::size_t>(nnz);
  std::vector<index_t> coords(dims.size() * n);
  // Level by level from the leaves up: node j of level d covers the leaves [b_j, b_{j+1}),
  // b_j = b'_{ptr_d[j]} from the level below (a leaf covers itself; ptr_d[j] >= j, so b
  // is updated in place), and writes its id there in its mode.
  std::vector<index_t> begin(n + 1);
  std::iota(begin.begin(), begin.end(), index_t{0});
  for (int d = last; d >= 0; --d) {
    const index_t nodes = tree.nodes(d);
    if (d < last) {
      const IndexLevel& ptr = tree.children(d);
      for (index_t j = 0; j <= nodes; ++j)
        begin[static_cast<std::size_t>(j)] = begin[static_cast<std::size_t>(ptr[j])];
    }
    const IndexLevel& ids = tree.ids(d);
    index_t* to = coords.data() + static_cast<std::size_t>(tree.mode(d)) * n;
    for (index_t j = 0; j < nodes; ++j)
      std::fill(to + begin[static_cast<std::size_t>(j)],
                to + begin[static_cast<std::size_t>(j) + 1], ids[j]);
  }
  std::vector<T> values(tree.values(), tree.values() + nnz);
  return SparseTensor<T>(std::move(dims), std::move(coords), std::move(values));
}

namespace {

// MTTKRP rows of the roots [s0, s1) (see csf_mttkrp). Bottom-up and iterative: sums[d]
// (R) collects t of the level-d node on the current path; finishing that node adds
// U_{mode(d)}[id] .* sums[d] into its parent's (root_row for level 1), and root_row goes
// to the root's row of the column-major output.
template <class T, IndexWidth W>
TENFOLD_SIMD_CLONES void mttkrp_roots(const Csf<T>& tree, const CsfIndex<W>& ix,
                                      const T* const* rows, index_t rank, index_t s0, index_t s1,
                                      T* out, T* root_row, T* sums, index_t* pos, index_t* end) {
  const index_t out_rows = tree.root_size();
  for (index_t s = s0; s < s1; ++s) {
    // out(id, :) = S(root) (a root's row is written once: the ids of the roots differ)
    subtree_sum(tree, ix, rows, rank, 0, s, root_row, sums, pos, end);
    T* to = out + ix.ids(0)[s];
    for (index_t r = 0; r < rank; ++r) to[r * out_rows] = root_row[r];
  }
}

// Phi rows of the roots [s0, s1) (see csf_poisson_phi).
template <class T, IndexWidth W>
TENFOLD_SIMD_CLONES void poisson_phi_roots(const Csf<T>& tree, const CsfIndex<W>& ix,
                                           const T* const* rows, const T* b, index_t rank, T eps,
                                           index_t s0, index_t s1, T* phi,
                                           TreeScratch<T>& scratch) {
  for (index_t s = s0; s < s1; ++s) {
    const index_t i = ix.ids(0)[s];
    const T* bi = b + i * rank;
    T* out = phi + i * rank;
    // m = <B(i,:), pi> (the model at the entry); Phi(i,:) += x / max(m, eps) * pi
    for_each_leaf(tree, ix, s, rows, rank, scratch,
                  [&](T x, const T* pi) TENFOLD_INLINE_INTO_CLONE {
                    T m = 0;
                    for (index_t r = 0; r < rank; ++r) m += bi[r] * pi[r];
                    const T w = x / std::max(m, eps);
                    for (index_t r = 0; r < rank; ++r) out[r] += w * pi[r];
                  });
  }
}

// Phi rows of the roots [s0, s1) from the kept Khatri-Rao rows (see csf_poisson_phi_kept).
template <class T, IndexWidth W>
TENFOLD_SIMD_CLONES void poisson_phi_kept_roots(const Csf<T>& tree, const CsfIndex<W>& ix,
                                                const T* pi, const T* b, index_t rank, T eps,
                                                index_t s0, index_t s1, T* phi) {
  const T* values = tree.values();
  for (index_t s = s0; s < s1; ++s) {
    const index_t i = ix.ids(0)[s];
    const T* bi = b + i * rank;
    T* out = phi + i * rank;
    for (index_t k = tree.first_leaf(s); k < tree.first_leaf(s + 1); ++k) {
      const T* p = pi + k * rank;
      T m = 0;
      for (index_t r = 0; r < rank; ++r) m += bi[r] * p[r];
      const T w = values[k] / std::max(m, eps);
      for (index_t r = 0; r < rank; ++r) out[r] += w * p[r];
    }
  }
}

}  // namespace

template <class T>
void csf_khatri_rao_rows(const Csf<T>& tree, std::type_identity_t<std::span<const T* const>> rows,
                         index_t rank, T* pi) {
  const auto& cuts = tree.cuts();
  with_index(tree, [&](const auto& ix) {
    parallel_for(static_cast<index_t>(cuts.size()) - 1, [&](index_t piece) {
      TreeScratch<T> scratch(tree.levels(), rank);
      for (index_t s = cuts[static_cast<std::size_t>(piece)];
           s < cuts[static_cast<std::size_t>(piece) + 1]; ++s) {
        T* to = pi + tree.first_leaf(s) * rank;
        for_each_leaf(tree, ix, s, rows.data(), rank, scratch, [&](T, const T* p) {
          std::copy(p, p + rank, to);
          to += rank;
        });
      }
    });
  });
}

template <class T>
void csf_poisson_phi_kept(const Csf<T>& tree, const T* pi, const T* b, index_t rank, T eps,
                          T* phi) {
  std::fill(phi, phi + tree.root_size() * rank, T(0));
  const auto& cuts = tree.cuts();
  with_index(tree, [&](const auto& ix) {
    parallel_for(static_cast<index_t>(cuts.size()) - 1, [&](index_t piece) {
      poisson_phi_kept_roots(tree, ix, pi, b, rank, eps, cuts[static_cast<std::size_t>(piece)],
                             cuts[static_cast<std::size_t>(piece) + 1], phi);
    });
  });
}

template <class T>
void csf_mttkrp(const Csf<T>& tree, std::type_identity_t<std::span<const T* const>> rows,
                index_t rank, T* out) {
  std::fill(out, out + tree.root_size() * rank, T(0));
  const auto& cuts = tree.cuts();
  with_index(tree, [&](const auto& ix) {
    parallel_for(static_cast<index_t>(cuts.size()) - 1, [&](index_t piece) {
      // the root's row in prefix (no prefix in a bottom-up walk)
      TreeScratch<T> scratch(tree.levels(), rank);
      mttkrp_roots(tree, ix, rows.data(), rank, cuts[static_cast<std::size_t>(piece)],
                   cuts[static_cast<std::size_t>(piece) + 1], out, scratch.prefix.data(),
                   scratch.sums.data(), scratch.pos.data(), scratch.end.data());
    });
  });
}

template <class T>
void csf_poisson_phi(const Csf<T>& tree, std::type_identity_t<std::span<const T* const>> rows,
                     const T* b, index_t rank, T eps, T* phi) {
  std::fill(phi, phi + tree.root_size() * rank, T(0));
  const auto& cuts = tree.cuts();
  with_index(tree, [&](const auto& ix) {
    parallel_for(static_cast<index_t>(cuts.size()) - 1, [&](index_t piece) {
      TreeScratch<T> scratch(tree.levels(), rank);
      poisson_phi_roots(tree, ix, rows.data(), b, rank, eps, cuts[static_cast<std::size_t>(piece)],
                        cuts[static_cast<std::size_t>(piece) + 1], phi, scratch);
    });
  });
}

#define TENFOLD_INSTANTIATE_CSF(T)                                                                 \
  template class TakenEntries<T>;                                                                  \
  template class Csf<T>;                                                                           \
  template std::vector<std::unique_ptr<Csf<T>>> build_csf_trees<T>(                                \
      const SparseTensor<T>&, std::span<const int>, double, const std::string&, index_t, bool);    \
  template std::vector<std::unique_ptr<Csf<T>>> build_csf_trees<T>(TakenEntries<T>&,               \
                                                                   std::span<const int>, index_t); \
  template void csf_mttkrp<T>(const Csf<T>&, std::type_identity_t<std::span<const T* const>>,      \
                              index_t, T*);                                                        \
  template void csf_poisson_phi<T>(const Csf<T>&, std::type_identity_t<std::span<const T* const>>, \
                                   const T*, index_t, T, T*);                                      \
  template void csf_khatri_rao_rows<T>(                                                            \
      const Csf<T>&, std::type_identity_t<std::span<const T* const>>, index_t, T*);                \
  template void csf_poisson_phi_kept<T>(const Csf<T>&, const T*, const T*, index_t, T, T*);        \
  template SparseTensor<T> csf_entries<T>(const Csf<T>&, std::vector<index_t>);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CSF)

}  // namespace tenfold::detail
