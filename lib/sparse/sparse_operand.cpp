#include "sparse/sparse_operand.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/instantiate.hpp"
#include "core/thread_pool.hpp"
#include "sparse/entry_order.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

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

template <class T>
SparseOperand<T>::SparseOperand(Compute<T>& c, const SparseTensor<T>& x, CsfLayout layout,
                                index_t max_narrow)
    : CpOperand<T>(c), x_(x), layout_(layout), fresh_(static_cast<std::size_t>(x.order()), false) {
  if (!c.host_memory()) {
    throw InvalidArgument("sparse tensors are decomposed on the cpu backend only, got backend " +
                          std::string(to_string(c.kind())));
  }
  if (layout == CsfLayout::automatic) {
    throw InvalidArgument("the sparse operand needs a CSF layout resolved to all or one");
  }
  const int order = x.order();
  std::vector<int> roots(static_cast<std::size_t>(order));
  std::iota(roots.begin(), roots.end(), 0);
  if (layout == CsfLayout::one) {
    // the smallest mode (the first of equal ones) at the root
    roots = {
        static_cast<int>(std::min_element(x.dims().begin(), x.dims().end()) - x.dims().begin())};
  }
  trees_ = build_csf_trees(
      x, roots, 0.0,
      "the CSF layout of a sparse tensor with " + std::to_string(x.nnz()) + " nonzeros (" +
          (layout == CsfLayout::one ? std::string("one tree") : "one tree per mode") + ")",
      max_narrow);
  if (layout == CsfLayout::one) {
    level_.resize(static_cast<std::size_t>(order));
    for (int d = 0; d < order; ++d) level_[static_cast<std::size_t>(trees_[0]->mode(d))] = d;
  }
  rows_.resize(static_cast<std::size_t>(order));
}

template <class T>
double SparseOperand<T>::norm_squared() {
  const double nx = x_.norm();
  return nx * nx;
}

template <class T>
std::vector<const T*> SparseOperand<T>::factor_rows(std::span<const T* const> factors, index_t rank,
                                                    int skip) {
  if (rank != rows_rank_) {
    fresh_.assign(fresh_.size(), false);
    rows_rank_ = rank;
  }
  std::vector<const T*> out(factors.size(), nullptr);
  for (int m = 0; m < x_.order(); ++m) {
    const auto ms = static_cast<std::size_t>(m);
    if (m == skip) continue;
    if (!fresh_[ms]) {
      // U_m column-major (I_m x R) to row-major.
      const index_t rows = x_.dim(m);
      rows_[ms].resize(static_cast<std::size_t>(rows * rank));
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
  if (layout_ == CsfLayout::all) {
    csf_mttkrp(*trees_[static_cast<std::size_t>(n)], rows, rank, out);
  } else {
    csf_mttkrp_level(*trees_[0], level_[static_cast<std::size_t>(n)], rows, rank, x_.dim(n), out);
  }
}

template <class T>
void SparseOperand<T>::mode_gram(int n, T* out) {
  sparse_mode_gram(x_, n, out);
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
  // Row-major factor copies (host memory, counted in T); one tree: a copy of the largest
  // output per thread; the mode Gram's sort (index_t per entry, twice: the permutation and
  // its spare).
  double e = 0.0, most = 0.0;
  for (index_t d : x_.dims()) {
    e += static_cast<double>(d) * static_cast<double>(rank);
    most = std::max(most, static_cast<double>(d) * static_cast<double>(rank));
  }
  if (layout_ == CsfLayout::one) e += pool_threads() * most;
  if (mode_grams) e += 2.0 * static_cast<double>(x_.nnz()) * sizeof(index_t) / sizeof(T);
  return e;
}

#define TENFOLD_INSTANTIATE_SPARSE_OPERAND(T) \
  template class SparseOperand<T>;            \
  template void sparse_mode_gram<T>(const SparseTensor<T>&, int, T*);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_SPARSE_OPERAND)

}  // namespace tenfold::detail
