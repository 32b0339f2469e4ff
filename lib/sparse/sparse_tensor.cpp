#include <cmath>
#include <numeric>
#include <string>

#include "core/instantiate.hpp"
#include "core/parallel.hpp"
#include "sparse/entry_order.hpp"
#include "tenfold/error.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold {

double sparse_tensor_bytes(int order, index_t nnz, std::size_t value_bytes) {
  return static_cast<double>(nnz) *
         (static_cast<double>(order) * sizeof(index_t) + static_cast<double>(value_bytes));
}

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
  if (canonical) {
    coords_ = std::move(coords);
    values_ = std::move(values);
    return;
  }
  // Sort (mode 0 slowest), sum the runs of equal coordinates in the given order, drop zeros.
  std::vector<int> modes(static_cast<std::size_t>(order));
  std::iota(modes.begin(), modes.end(), 0);
  const std::vector<index_t> perm =
      detail::sorted_entries(idx, static_cast<index_t>(nnz), dims_, modes);
  std::vector<std::size_t> first;  // first sorted position of each distinct coordinate
  std::vector<T> sums;
  for (std::size_t p = 0; p < nnz; ++p) {
    const auto k = static_cast<std::size_t>(perm[p]);
    if (p > 0 && !before(static_cast<std::size_t>(perm[p - 1]), k)) {
      sums.back() += values[k];
      continue;
    }
    first.push_back(p);
    sums.push_back(values[k]);
  }
  // A sum of finite duplicates can overflow.
  for (std::size_t u = 0; u < sums.size(); ++u) {
    if (std::isfinite(sums[u])) continue;
    const auto k = static_cast<std::size_t>(perm[first[u]]);
    std::string at;
    for (int n = 0; n < order; ++n)
      at += (n > 0 ? ", " : "") + std::to_string(idx[static_cast<std::size_t>(n)][k]);
    throw InvalidArgument("the duplicate entries at index (" + at + ") sum to " +
                          (sums[u] > 0 ? "+Inf" : "-Inf") + ": their sum overflows " +
                          (sizeof(T) == 4 ? "float32" : "float64"));
  }
  std::size_t kept = 0;
  for (T s : sums) kept += s != T(0);
  coords_.resize(kept * static_cast<std::size_t>(order));
  values_.reserve(kept);
  for (std::size_t u = 0, out = 0; u < sums.size(); ++u) {
    if (sums[u] == T(0)) continue;
    const auto k = static_cast<std::size_t>(perm[first[u]]);
    for (int n = 0; n < order; ++n) coords_[n * kept + out] = idx[static_cast<std::size_t>(n)][k];
    values_.push_back(sums[u]);
    ++out;
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
