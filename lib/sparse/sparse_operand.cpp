#include "sparse/sparse_operand.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "core/instantiate.hpp"
#include "core/thread_pool.hpp"
#include "sparse/entry_order.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

double squared(double v) { return v * v; }

// Row-major copy `to` of a column-major (rows x cols) matrix, in tiles of kTile rows (a
// tile's columns are read contiguously and stay in cache), in parallel.
constexpr index_t kTile = 64;

template <class T>
void to_row_major(index_t rows, index_t cols, const T* from, T* to) {
  parallel_for((rows + kTile - 1) / kTile, [&](index_t tile) {
    const index_t i0 = tile * kTile, i1 = std::min(rows, i0 + kTile);
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = i0; i < i1; ++i) to[i * cols + j] = from[i + j * rows];
  });
}

}  // namespace

std::vector<int> csf_roots(std::span<const index_t> dims, CsfLayout layout) {
  const int order = static_cast<int>(dims.size());
  const int smallest = static_cast<int>(std::min_element(dims.begin(), dims.end()) - dims.begin());
  switch (layout) {
    case CsfLayout::one:
      return {smallest};
    case CsfLayout::two:
      return {smallest, csf_mode_order(dims, smallest).back()};
    case CsfLayout::all:
      break;
    case CsfLayout::automatic:
      throw InvalidArgument("the sparse operand needs a CSF layout resolved to all, two or one");
  }
  std::vector<int> roots(static_cast<std::size_t>(order));
  std::iota(roots.begin(), roots.end(), 0);
  return roots;
}

template <class T>
CsfLayout csf_layout_within(std::span<const index_t> dims, index_t nnz, double available,
                            bool taken) {
  for (CsfLayout layout : {CsfLayout::all, CsfLayout::two}) {
    const auto trees = static_cast<int>(csf_roots(dims, layout).size());
    if (csf_build_bytes<T>(dims, nnz, trees, taken) <= 0.75 * available) return layout;
  }
  return CsfLayout::one;
}

template <class T>
SparseOperand<T>::SparseOperand(Compute<T>& c, const SparseTensor<T>& x,
                                const SparseTensor<T>* kept, CsfLayout layout)
    : CpOperand<T>(c),
      x_(kept),
      dims_(x.dims()),
      nnz_(x.nnz()),
      norm_squared_(squared(x.norm())),
      layout_(layout),
      fresh_(static_cast<std::size_t>(x.order()), false) {}

template <class T>
SparseOperand<T>::SparseOperand(Compute<T>& c, const SparseTensor<T>& x, CsfLayout layout,
                                index_t max_narrow, bool one_at_a_time)
    : SparseOperand(c, x, &x, layout) {
  const std::vector<int> roots = checked_roots(c);
  trees_ = build_csf_trees(x, roots, 0.0, trees_what(roots), max_narrow, one_at_a_time);
  place_modes(roots);
}

template <class T>
SparseOperand<T>::SparseOperand(Compute<T>& c, SparseTensor<T>&& x, CsfLayout layout,
                                index_t max_narrow)
    : SparseOperand(c, x, nullptr, layout) {
  const std::vector<int> roots = checked_roots(c);
  const std::string what = trees_what(roots);
  if (TakenEntries<T>::fit(dims_)) {
    // Checked before x is taken (an error leaves it whole): the most the take and the
    // builds hold beyond x, whose bytes they free (csf_taken_trees_bytes).
    require_host_bytes(csf_taken_trees_bytes<T>(dims_, nnz_, static_cast<int>(roots.size())), what);
    TakenEntries<T> entries(std::move(x));
    trees_ = build_csf_trees(entries, roots, max_narrow);
  } else {
    // A mode larger than 2^32: the trees are built from x, which goes once they hold it.
    trees_ = build_csf_trees(std::as_const(x), roots, 0.0, what, max_narrow, true);
    const SparseTensor<T> released = std::move(x);
  }
  place_modes(roots);
}

template <class T>
std::vector<int> SparseOperand<T>::checked_roots(const Compute<T>& c) const {
  if (!c.host_memory()) {
    throw InvalidArgument("sparse tensors are decomposed on the cpu backend only, got backend " +
                          std::string(to_string(c.kind())));
  }
  return csf_roots(dims_, layout_);
}

template <class T>
std::string SparseOperand<T>::trees_what(std::span<const int> roots) const {
  const std::string trees = roots.size() == 1   ? "one tree"
                            : roots.size() == 2 ? "two trees"
                                                : "one tree per mode";
  return "the CSF layout of a sparse tensor with " + std::to_string(nnz_) + " nonzeros (" + trees +
         ")";
}

template <class T>
void SparseOperand<T>::place_modes(std::span<const int> roots) {
  // Mode n at its level of the first tree, unless a later tree has it at the root.
  const auto order = dims_.size();
  tree_.assign(order, 0);
  level_.resize(order);
  for (int d = 0; d < trees_[0]->levels(); ++d)
    level_[static_cast<std::size_t>(trees_[0]->mode(d))] = d;
  for (std::size_t t = 1; t < roots.size(); ++t) {
    const auto n = static_cast<std::size_t>(roots[t]);
    tree_[n] = static_cast<int>(t);
    level_[n] = 0;
  }
  rows_.resize(order);
}

template <class T>
double SparseOperand<T>::norm_squared() {
  return norm_squared_;
}

template <class T>
std::vector<const T*> SparseOperand<T>::factor_rows(std::span<const T* const> factors, index_t rank,
                                                    int skip) {
  if (rank != rows_rank_) {
    fresh_.assign(fresh_.size(), false);
    rows_rank_ = rank;
  }
  std::vector<const T*> out(factors.size(), nullptr);
  for (int m = 0; m < this->order(); ++m) {
    const auto ms = static_cast<std::size_t>(m);
    if (m == skip) continue;
    if (!fresh_[ms]) {
      // U_m column-major (I_m x R) to row-major.
      const index_t rows = dims_[ms];
      rows_[ms].resize(random_rows_room<T>(static_cast<std::size_t>(rows * rank)));
      to_row_major(rows, rank, factors[ms], rows_[ms].data());
      fresh_[ms] = true;
    }
    out[ms] = rows_[ms].data();
  }
  return out;
}

template <class T>
void SparseOperand<T>::mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) {
  const std::vector<const T*> rows = factor_rows(factors, rank, n);
  const auto ns = static_cast<std::size_t>(n);
  csf_mttkrp_level(*trees_[static_cast<std::size_t>(tree_[ns])], level_[ns], rows, rank, dims_[ns],
                   out, &copies_);
}

template <class T>
void SparseOperand<T>::mode_gram(int n, T* out) {
  with_entries([&](const SparseTensor<T>& x) { sparse_mode_gram(x, n, out); });
}

template <class T>
void sparse_mode_gram(const SparseTensor<T>& x, int n, T* out) {
  const index_t in = x.dim(n);
  std::fill(out, out + in * in, T(0));
  // Entries sorted by the other modes' indices, then mode n: each run with equal other
  // indices is one column c of X_(n), and adds xc xc^T.
  std::vector<int> modes;
  for (int m = 0; m < x.order(); ++m)
    if (m != n) modes.push_back(m);
  modes.push_back(n);
  std::vector<const index_t*> idx;
  for (int m = 0; m < x.order(); ++m) idx.push_back(x.indices(m).data());
  const std::vector<index_t> perm = sorted_entries(idx, x.nnz(), x.dims(), modes);
  const auto same_column = [&](index_t a, index_t b) {
    for (int m : modes)
      if (m != n && idx[static_cast<std::size_t>(m)][a] != idx[static_cast<std::size_t>(m)][b])
        return false;
    return true;
  };
  const index_t* in_idx = idx[static_cast<std::size_t>(n)];
  const T* v = x.values().data();
  const auto nnz = static_cast<std::size_t>(x.nnz());
  for (std::size_t lo = 0, hi = 0; lo < nnz; lo = hi) {
    for (hi = lo + 1; hi < nnz && same_column(perm[lo], perm[hi]); ++hi) {
    }
    for (std::size_t a = lo; a < hi; ++a)
      for (std::size_t b = lo; b < hi; ++b)
        out[in_idx[perm[a]] + in_idx[perm[b]] * in] += v[perm[a]] * v[perm[b]];
  }
}

template <class T>
double SparseOperand<T>::workspace_elements(index_t rank, bool mode_grams) const {
  // Row-major factor copies (host memory, counted in T); a copy per thread of the largest
  // output computed below a root; the mode Gram's sort (index_t per entry, twice: the
  // permutation and its spare) and, once x is released, the entries rebuilt from a tree
  // (N indices and a value per entry, and csf_entries' leaf bounds).
  double e = 0.0, most = 0.0;
  for (int n = 0; n < this->order(); ++n) {
    const double rows =
        static_cast<double>(dims_[static_cast<std::size_t>(n)]) * static_cast<double>(rank);
    e += rows;
    if (level_[static_cast<std::size_t>(n)] > 0) most = std::max(most, rows);
  }
  e += pool_threads() * most;
  const auto nnz = static_cast<double>(nnz_);
  if (mode_grams) e += 2.0 * nnz * sizeof(index_t) / sizeof(T);
  if (mode_grams && x_ == nullptr)
    e += nnz * ((this->order() + 1.0) * sizeof(index_t) + sizeof(T)) / sizeof(T);
  return e;
}

#define TENFOLD_INSTANTIATE_SPARSE_OPERAND(T)                                               \
  template CsfLayout csf_layout_within<T>(std::span<const index_t>, index_t, double, bool); \
  template class SparseOperand<T>;                                                          \
  template void sparse_mode_gram<T>(const SparseTensor<T>&, int, T*);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_SPARSE_OPERAND)

}  // namespace tenfold::detail
