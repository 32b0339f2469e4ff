#include "tenfold/tensor.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "core/format.hpp"
#include "core/layout.hpp"
#include "core/memory.hpp"
#include "core/parallel.hpp"
#include "core/scalar.hpp"
#include "core/scaling.hpp"
#include "tenfold/error.hpp"

namespace tenfold {

index_t checked_numel(std::span<const index_t> dims) {
  // The product of the nonzero sizes must fit, whatever the order of the modes (a
  // shape and its reverse, as in C and Fortran order, are accepted or rejected alike).
  index_t n = 1;
  bool empty = false;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const index_t d = dims[i];
    if (d < 0) {
      throw InvalidArgument("size " + std::to_string(d) + " of mode " + std::to_string(i) +
                            " is negative");
    }
    if (d == 0) {
      empty = true;
      continue;
    }
    if (n > INT64_MAX / d) {
      throw InvalidArgument("tensor of shape " + detail::shape_string(dims) +
                            " has more elements than a 64-bit index can count");
    }
    n *= d;
  }
  return empty ? 0 : n;
}

index_t checked_view_numel(const void* data, std::span<const index_t> dims) {
  const index_t n = checked_numel(dims);
  if (data == nullptr && n > 0) {
    throw InvalidArgument("a view of shape " + detail::shape_string(dims) + " (" +
                          std::to_string(n) + " elements) has a null data pointer");
  }
  return n;
}

namespace {

// Element count of a tensor of T of shape dims, checked to be addressable in bytes.
template <class T>
std::size_t storage_size(std::span<const index_t> dims) {
  const index_t n = checked_numel(dims);
  if (static_cast<std::uint64_t>(n) > static_cast<std::uint64_t>(PTRDIFF_MAX) / sizeof(T)) {
    throw InvalidArgument("an array of shape " + detail::shape_string(dims) + " needs " +
                          std::to_string(n) + " elements of " + std::to_string(sizeof(T)) +
                          " bytes, more than memory can address");
  }
  return static_cast<std::size_t>(n);
}

}  // namespace

template <class T>
Tensor<T>::Tensor(std::vector<index_t> dims) : dims_(std::move(dims)) {
  // A large tensor on transparent huge pages (core/memory.hpp), advised before the
  // zeroing first touches its pages: the MTTKRP's strided reads then miss the TLB far
  // less, as they do on NumPy's arrays.
  const std::size_t n = storage_size<T>(dims_);
  data_.reserve(n);
  detail::advise_huge_pages(data_.data(), n * sizeof(T));
  data_.resize(n);
}

template <class T>
Tensor<T>::Tensor(std::vector<index_t> dims, std::vector<T> data)
    : dims_(std::move(dims)), data_(std::move(data)) {
  const index_t n = checked_numel(dims_);
  if (static_cast<index_t>(data_.size()) != n) {
    throw DimensionMismatch("tensor of shape " + detail::shape_string(dims_) + " needs " +
                            std::to_string(n) + " values, got " + std::to_string(data_.size()));
  }
}

template <class T>
Matrix<T>::Matrix(index_t rows, index_t cols) : rows_(rows), cols_(cols) {
  const index_t dims[2] = {rows, cols};
  data_.resize(storage_size<T>(dims));
}

template <class T>
Matrix<T>::Matrix(index_t rows, index_t cols, std::vector<T> data)
    : rows_(rows), cols_(cols), data_(std::move(data)) {
  const index_t dims[2] = {rows, cols};
  const index_t n = checked_numel(dims);
  if (static_cast<index_t>(data_.size()) != n) {
    throw DimensionMismatch("matrix of shape " + std::to_string(rows) + "x" + std::to_string(cols) +
                            " needs " + std::to_string(n) + " values, got " +
                            std::to_string(data_.size()));
  }
}

template <class T>
double norm(TensorView<const T> x) {
  const T* p = x.data();
  return std::sqrt(detail::chunked_sum(static_cast<std::size_t>(x.numel()),
                                       [p](std::size_t i) { return detail::abs2(p[i]); }));
}

template <class T>
void check_finite(TensorView<const T> x, const char* what) {
  if (detail::magnitudes(x).finite) return;  // one fast pass; the loop names the entry
  const T* p = x.data();
  const index_t n = x.numel();
  for (index_t i = 0; i < n; ++i) {
    if (!detail::finite_value(p[i])) {
      const bool nan = !(p[i] == p[i]);  // a NaN part
      throw InvalidArgument(std::string(what) + " has a non-finite entry (" +
                            (nan ? "NaN" : "Inf") + ") at index " +
                            detail::index_string(x.dims(), i));
    }
  }
}

template <class U, class T>
Tensor<U> convert(TensorView<const T> x) {
  Tensor<U> y(x.dims());
  for (index_t i = 0; i < x.numel(); ++i) y[i] = static_cast<U>(x[i]);
  return y;
}

template <class T>
Tensor<T> transpose(TensorView<const T> x) {
  return detail::reverse_modes(x);
}

template class Tensor<float>;
template class Tensor<double>;
template class Tensor<std::uint8_t>;  // masks of observed entries
template class Tensor<std::complex<float>>;
template class Tensor<std::complex<double>>;
template class Matrix<std::complex<float>>;
template class Matrix<std::complex<double>>;
template double norm<std::complex<float>>(TensorView<const std::complex<float>>);
template double norm<std::complex<double>>(TensorView<const std::complex<double>>);
template void check_finite<std::complex<float>>(TensorView<const std::complex<float>>, const char*);
template void check_finite<std::complex<double>>(TensorView<const std::complex<double>>,
                                                 const char*);
template class Matrix<float>;
template class Matrix<double>;
template double norm<float>(TensorView<const float>);
template double norm<double>(TensorView<const double>);
template void check_finite<float>(TensorView<const float>, const char*);
template void check_finite<double>(TensorView<const double>, const char*);
template Tensor<float> convert<float, float>(TensorView<const float>);
template Tensor<float> convert<float, double>(TensorView<const double>);
template Tensor<double> convert<double, float>(TensorView<const float>);
template Tensor<double> convert<double, double>(TensorView<const double>);
template Tensor<float> transpose<float>(TensorView<const float>);
template Tensor<double> transpose<double>(TensorView<const double>);

}  // namespace tenfold
