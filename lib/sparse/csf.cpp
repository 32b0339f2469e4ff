#include "sparse/csf.hpp"

#include <numeric>

#include "core/instantiate.hpp"
#include "core/thread_pool.hpp"
#include "sparse/entry_order.hpp"

namespace tenfold::detail {
namespace {

// Roots per piece aim at nnz / kPieces leaves each (at least one root per piece).
constexpr index_t kPieces = 512;

}  // namespace

template <class T>
double Csf<T>::bytes_bound(int order, index_t nnz) {
  // Upper levels: at most nnz nodes each (id and child pointer); leaves: id and value;
  // the sort's permutation and keys while building.
  return static_cast<double>(nnz) * (static_cast<double>(order - 1) * 2.0 * sizeof(index_t) +
                                     sizeof(index_t) + sizeof(T) + 3.0 * sizeof(index_t));
}

template <class T>
Csf<T>::Csf(const SparseTensor<T>& x, int root) : root_size_(x.dim(root)) {
  const int order = x.order();
  modes_.push_back(root);
  for (int m = 0; m < order; ++m)
    if (m != root) modes_.push_back(m);
  std::stable_sort(modes_.begin() + 1, modes_.end(),
                   [&](int a, int b) { return x.dim(a) < x.dim(b); });
  std::vector<const index_t*> idx;
  for (int m = 0; m < order; ++m) idx.push_back(x.indices(m).data());
  const index_t nnz = x.nnz();
  const std::vector<index_t> perm = sorted_entries(idx, nnz, x.dims(), modes_);
  // Sorted entry p starts a new node at every level >= the first level at which its
  // coordinates differ from entry p-1's (entries are distinct: the leaf always differs).
  const auto first_new_level = [&](index_t p) {
    if (p == 0) return 0;
    int d = 0;
    while (idx[static_cast<std::size_t>(modes_[static_cast<std::size_t>(d)])][perm[p]] ==
           idx[static_cast<std::size_t>(modes_[static_cast<std::size_t>(d)])][perm[p - 1]])
      ++d;
    return d;
  };
  std::vector<index_t> count(static_cast<std::size_t>(order), 0);
  for (index_t p = 0; p < nnz; ++p)
    for (int d = first_new_level(p); d < order; ++d) ++count[static_cast<std::size_t>(d)];
  ids_.resize(static_cast<std::size_t>(order));
  ptr_.resize(static_cast<std::size_t>(order - 1));
  for (int d = 0; d < order; ++d) {
    ids_[static_cast<std::size_t>(d)].reserve(
        static_cast<std::size_t>(count[static_cast<std::size_t>(d)]));
    if (d < order - 1)
      ptr_[static_cast<std::size_t>(d)].reserve(
          static_cast<std::size_t>(count[static_cast<std::size_t>(d)] + 1));
  }
  values_.reserve(static_cast<std::size_t>(nnz));
  for (index_t p = 0; p < nnz; ++p) {
    const index_t k = perm[static_cast<std::size_t>(p)];
    for (int d = first_new_level(p); d < order; ++d) {
      const auto ds = static_cast<std::size_t>(d);
      ids_[ds].push_back(idx[static_cast<std::size_t>(modes_[ds])][k]);
      // Its first child is the next node of level d+1.
      if (d < order - 1) ptr_[ds].push_back(static_cast<index_t>(ids_[ds + 1].size()));
    }
    values_.push_back(x.values()[static_cast<std::size_t>(k)]);
  }
  for (int d = 0; d < order - 1; ++d) ptr_[static_cast<std::size_t>(d)].push_back(nodes(d + 1));
  // Leaves under each root (the first leaf of root s, following first children down).
  const index_t roots = nodes(0);
  std::vector<index_t> first_leaf(static_cast<std::size_t>(roots + 1));
  for (index_t s = 0; s <= roots; ++s) {
    index_t j = s;
    for (int d = 0; d < order - 1; ++d)
      j = ptr_[static_cast<std::size_t>(d)][static_cast<std::size_t>(j)];
    first_leaf[static_cast<std::size_t>(s)] = j;
  }
  const index_t target = std::max<index_t>(1, (nnz + kPieces - 1) / kPieces);
  cuts_.push_back(0);
  for (index_t s = 1; s <= roots; ++s) {
    if (s == roots || first_leaf[static_cast<std::size_t>(s)] -
                              first_leaf[static_cast<std::size_t>(cuts_.back())] >=
                          target)
      cuts_.push_back(s);
  }
}

template <class T>
void csf_mttkrp(const Csf<T>& tree, std::type_identity_t<std::span<const T* const>> rows,
                index_t rank, T* out) {
  const int last = tree.levels() - 1;
  std::fill(out, out + tree.root_size() * rank, T(0));
  const auto& cuts = tree.cuts();
  parallel_for(static_cast<index_t>(cuts.size()) - 1, [&](index_t piece) {
    // sums[d] (R): partial sum of the node of level d being summed.
    std::vector<T> sums(static_cast<std::size_t>((last + 1) * rank));
    // t = sum over nodes j in [lo, hi) of level d of U_{mode(d)}[id(j)] * (children's t)
    auto subtree = [&](auto&& self, int d, index_t lo, index_t hi, T* t) -> void {
      std::fill(t, t + rank, T(0));
      const T* u = rows[static_cast<std::size_t>(tree.mode(d))];
      const index_t* id = tree.ids(d);
      if (d == last) {
        const T* v = tree.values();
        for (index_t j = lo; j < hi; ++j) {
          const T* row = u + id[j] * rank;
          const T x = v[j];
          for (index_t r = 0; r < rank; ++r) t[r] += x * row[r];
        }
        return;
      }
      T* below = sums.data() + (d + 1) * rank;
      const index_t* child = tree.children(d);
      for (index_t j = lo; j < hi; ++j) {
        self(self, d + 1, child[j], child[j + 1], below);
        const T* row = u + id[j] * rank;
        for (index_t r = 0; r < rank; ++r) t[r] += row[r] * below[r];
      }
    };
    const index_t* root_id = tree.ids(0);
    const index_t* child = tree.children(0);
    for (index_t s = cuts[static_cast<std::size_t>(piece)];
         s < cuts[static_cast<std::size_t>(piece) + 1]; ++s) {
      subtree(subtree, 1, child[s], child[s + 1], out + root_id[s] * rank);
    }
  });
}

#define TENFOLD_INSTANTIATE_CSF(T)                                                            \
  template class Csf<T>;                                                                      \
  template void csf_mttkrp<T>(const Csf<T>&, std::type_identity_t<std::span<const T* const>>, \
                              index_t, T*);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CSF)

}  // namespace tenfold::detail
