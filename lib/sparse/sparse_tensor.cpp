#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <type_traits>

#include "core/instantiate.hpp"
#include "core/parallel.hpp"
#include "sparse/csf.hpp"
#include "sparse/entry_order.hpp"
#include "tenfold/error.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold {

double sparse_tensor_bytes(int order, index_t nnz, std::size_t value_bytes) {
  return static_cast<double>(nnz) *
         (static_cast<double>(order) * sizeof(index_t) + static_cast<double>(value_bytes));
}

namespace {

// Makes the entries (coords, N x nnz mode-major, and values) canonical in place: sorted
// with mode 0 slowest, each run of equal coordinates summed in the given order, sums that
// are exactly zero dropped (coords becomes N x kept). Word: the sort's entry numbers
// (32-bit when nnz allows). Beside the entries it holds those numbers (two arrays while
// sorting) and one mode's indices or the values at a time, while they are put in order.
template <class Word, class T>
void make_canonical(const std::vector<index_t>& dims, std::vector<index_t>& coords,
                    std::vector<T>& values) {
  const std::size_t nnz = values.size(), order = dims.size();
  detail::require_host_bytes(static_cast<double>(nnz) * (sizeof(Word) + sizeof(index_t)),
                             "sorting the " + std::to_string(nnz) + " entries of a sparse tensor");
  const auto mode = [&](std::size_t n) { return coords.data() + n * nnz; };
  {
    std::vector<Word> perm(nnz);
    {
      std::vector<Word> spare;
      std::vector<int> modes(order);
      std::iota(modes.begin(), modes.end(), 0);
      std::vector<const index_t*> idx;
      for (std::size_t n = 0; n < order; ++n) idx.push_back(mode(n));
      std::iota(perm.begin(), perm.end(), Word{0});
      detail::sort_entries<Word>(idx, dims, modes, perm, spare);
    }
    // a[p] = a[perm[p]] for each mode's indices and for the values, through one buffer
    const auto put_in_order = [&](auto* a) {
      std::vector<std::remove_pointer_t<decltype(a)>> sorted(nnz);
      for (std::size_t p = 0; p < nnz; ++p) sorted[p] = a[static_cast<std::size_t>(perm[p])];
      std::copy(sorted.begin(), sorted.end(), a);
    };
    for (std::size_t n = 0; n < order; ++n) put_in_order(mode(n));
    put_in_order(values.data());
  }
  // The runs of equal coordinates are now adjacent, in their given order: each sum goes
  // to the next kept place (never after the run it comes from).
  const auto same = [&](std::size_t a, std::size_t b) {
    for (std::size_t n = 0; n < order; ++n)
      if (mode(n)[a] != mode(n)[b]) return false;
    return true;
  };
  std::size_t kept = 0;
  for (std::size_t lo = 0, hi = 0; lo < nnz; lo = hi) {
    T sum = values[lo];
    for (hi = lo + 1; hi < nnz && same(lo, hi); ++hi) sum += values[hi];
    // A sum of finite duplicates can overflow.
    if (!std::isfinite(sum)) {
      std::string at;
      for (std::size_t n = 0; n < order; ++n)
        at += (n > 0 ? ", " : "") + std::to_string(mode(n)[lo]);
      throw InvalidArgument("the duplicate entries at index (" + at + ") sum to " +
                            (sum > 0 ? "+Inf" : "-Inf") + ": their sum overflows " +
                            (sizeof(T) == 4 ? "float32" : "float64"));
    }
    if (sum == T(0)) continue;
    for (std::size_t n = 0; n < order; ++n) mode(n)[kept] = mode(n)[lo];
    values[kept++] = sum;
  }
  // Mode n moves from offset n nnz down to n kept; the arrays shrink (and give their
  // memory back when at least half of it is unused: the copy then costs at most half).
  for (std::size_t n = 1; n < order; ++n)
    std::copy(mode(n), mode(n) + kept, coords.data() + n * kept);
  coords.resize(kept * order);
  values.resize(kept);
  if (2 * kept <= nnz) {
    coords.shrink_to_fit();
    values.shrink_to_fit();
  }
}

}  // namespace

template <class T>
SparseTensor<T>::SparseTensor(std::vector<index_t> dims, std::vector<index_t> coords,
                              std::vector<T> values)
    : dims_(std::move(dims)) {
  const int order = static_cast<int>(dims_.size());
  if (order < 1) throw InvalidArgument("a sparse tensor needs at least one mode, got none");
  for (int n = 0; n < order; ++n) {
    if (dims_[static_cast<std::size_t>(n)] < 1) {
      throw InvalidArgument("size of mode " + std::to_string(n) + " must be at least 1, got " +
                            std::to_string(dims_[static_cast<std::size_t>(n)]));
    }
  }
  const std::size_t nnz = values.size();
  if (coords.size() != nnz * static_cast<std::size_t>(order)) {
    throw DimensionMismatch("a sparse tensor of order " + std::to_string(order) + " with " +
                            std::to_string(nnz) + " values needs " + std::to_string(order) + " x " +
                            std::to_string(nnz) + " coordinates, got " +
                            std::to_string(coords.size()));
  }
  std::vector<const index_t*> idx(static_cast<std::size_t>(order));
  for (int n = 0; n < order; ++n) idx[static_cast<std::size_t>(n)] = coords.data() + n * nnz;
  // Every index in range, every value finite.
  for (std::size_t k = 0; k < nnz; ++k) {
    for (int n = 0; n < order; ++n) {
      const index_t i = idx[static_cast<std::size_t>(n)][k];
      const index_t d = dims_[static_cast<std::size_t>(n)];
      if (i < 0 || i >= d) {
        throw InvalidArgument("entry " + std::to_string(k) + " has index " + std::to_string(i) +
                              " in mode " + std::to_string(n) + " (NumPy axis " +
                              std::to_string(n) + "), outside [0, " + std::to_string(d) + ")");
      }
    }
    if (!std::isfinite(values[k])) {
      throw InvalidArgument("entry " + std::to_string(k) + " has a non-finite value (" +
                            (std::isnan(values[k]) ? "NaN" : "Inf") + ")");
    }
  }
  // Already canonical (strictly increasing coordinates, no zeros): kept as given.
  const auto before = [&](std::size_t a, std::size_t b) {  // coordinates of a < those of b
    for (int n = 0; n < order; ++n) {
      const index_t* i = idx[static_cast<std::size_t>(n)];
      if (i[a] != i[b]) return i[a] < i[b];
    }
    return false;
  };
  bool canonical = true;
  for (std::size_t k = 0; k < nnz && canonical; ++k) {
    canonical = values[k] != T(0) && (k == 0 || before(k - 1, k));
  }
  coords_ = std::move(coords);
  values_ = std::move(values);
  if (canonical) return;
  if (nnz <= static_cast<std::size_t>(detail::kNarrowLimit)) {
    make_canonical<std::uint32_t>(dims_, coords_, values_);
  } else {
    make_canonical<index_t>(dims_, coords_, values_);
  }
}

template <class T>
SparseTensor<T> SparseTensor<T>::from_dense(TensorView<const T> x) {
  check_finite(x, "tensor");
  const int order = x.order();
  index_t nnz = 0;
  for (index_t i = 0; i < x.numel(); ++i) nnz += x[i] != T(0);
  detail::require_host_bytes(sparse_tensor_bytes(order, nnz, sizeof(T)) * 2.0,
                             "the nonzeros of a dense tensor");
  std::vector<index_t> coords(static_cast<std::size_t>(nnz * order));
  std::vector<T> values;
  values.reserve(static_cast<std::size_t>(nnz));
  // Column-major order (mode 0 fastest); the constructor sorts.
  std::vector<index_t> at(static_cast<std::size_t>(order), 0);
  for (index_t lin = 0; lin < x.numel(); ++lin) {
    if (x[lin] != T(0)) {
      const auto k = values.size();
      for (int n = 0; n < order; ++n)
        coords[static_cast<std::size_t>(n * nnz) + k] = at[static_cast<std::size_t>(n)];
      values.push_back(x[lin]);
    }
    for (int n = 0; n < order; ++n) {
      if (++at[static_cast<std::size_t>(n)] < x.dim(n)) break;
      at[static_cast<std::size_t>(n)] = 0;
    }
  }
  return SparseTensor<T>(x.dims(), std::move(coords), std::move(values));
}

template <class T>
double SparseTensor<T>::norm() const {
  const T* v = values_.data();
  return std::sqrt(detail::chunked_sum(values_.size(), [v](std::size_t k) {
    return static_cast<double>(v[k]) * static_cast<double>(v[k]);
  }));
}

template <class T>
Tensor<T> SparseTensor<T>::full() const {
  const index_t numel = checked_numel(dims_);
  detail::require_host_bytes(static_cast<double>(numel) * sizeof(T),
                             "the dense copy of a sparse tensor");
  Tensor<T> y(dims_);
  const auto n = values_.size();
  for (std::size_t k = 0; k < n; ++k) {
    index_t off = 0, stride = 1;
    for (int m = 0; m < order(); ++m) {
      off += coords_[m * n + k] * stride;
      stride *= dims_[static_cast<std::size_t>(m)];
    }
    y[off] = values_[k];
  }
  return y;
}

#define TENFOLD_INSTANTIATE_SPARSE_TENSOR(T) template class SparseTensor<T>;
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_SPARSE_TENSOR)

}  // namespace tenfold
