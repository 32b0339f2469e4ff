// NumPy arrays in (as views, no copy) and out (owning their memory).
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "bindings.hpp"
#include "tenfold/error.hpp"

namespace tenfold::python {

char float_kind(const InArray& a, const char* what) {
  if (a.dtype() == nb::dtype<float>()) return 'f';
  if (a.dtype() == nb::dtype<double>()) return 'd';
  throw InvalidArgument(std::string(what) + " must be float32 or float64");
}

namespace {

// Contiguous in C order (last axis fastest) or Fortran order (first axis fastest);
// axes of size 1 carry no stride information.
bool contiguous(const InArray& a, bool c_order) {
  const auto n = static_cast<std::int64_t>(a.ndim());
  std::int64_t expected = 1;
  for (std::int64_t k = 0; k < n; ++k) {
    const std::size_t axis = static_cast<std::size_t>(c_order ? n - 1 - k : k);
    if (a.shape(axis) != 1 && a.stride(axis) != expected) return false;
    expected *= static_cast<std::int64_t>(a.shape(axis));
  }
  return true;
}

template <class T>
void check_dtype(const InArray& a, const char* what) {
  if (a.dtype() != nb::dtype<T>()) {
    const char* name = std::is_same_v<T, float>                  ? "float32"
                       : std::is_same_v<T, double>               ? "float64"
                       : std::is_same_v<T, std::complex<float>>  ? "complex64"
                       : std::is_same_v<T, std::complex<double>> ? "complex128"
                                                                 : "uint8";
    throw InvalidArgument(std::string(what) + " must be " + name);
  }
}

// Whether x is finite (both parts for complex x), and whether it is (or has) a NaN.
template <class T>
bool finite(T x) {
  if constexpr (nb::detail::is_complex_v<T>) {
    return std::isfinite(x.real()) && std::isfinite(x.imag());
  } else {
    return std::isfinite(x);
  }
}
template <class T>
bool has_nan(T x) {
  return !(x == x);
}

}  // namespace

template <class T>
TensorView<const T> tensor_view(const InArray& a, const char* what, Layout& layout) {
  check_dtype<T>(a, what);
  std::vector<index_t> dims(a.ndim());
  for (std::size_t k = 0; k < a.ndim(); ++k) dims[k] = static_cast<index_t>(a.shape(k));
  // C order first: an array that is both is what numpy.save writes as C order.
  if (contiguous(a, true)) {
    layout = Layout::row_major;
    return TensorView<const T>(static_cast<const T*>(a.data()),
                               std::vector<index_t>(dims.rbegin(), dims.rend()));
  }
  if (contiguous(a, false)) {
    layout = Layout::col_major;
    return TensorView<const T>(static_cast<const T*>(a.data()), std::move(dims));
  }
  throw InvalidArgument(std::string(what) + " must be C- or Fortran-contiguous");
}

template <class T>
void check_finite_numpy(TensorView<const T> x, Layout layout, const char* what,
                        const std::uint8_t* observed) {
  if (observed == nullptr) {
    // The library's check is one vectorised pass over its threads; only when it finds a
    // non-finite entry does the loop below name it by NumPy index.
    try {
      check_finite(x, what);
      return;
    } catch (const InvalidArgument&) {
    }
  }
  for (index_t i = 0; i < x.numel(); ++i) {
    if (finite(x[i]) || (observed != nullptr && observed[i] == 0)) continue;
    // Column-major multi-index of entry i; mode n is NumPy axis N-1-n in row_major.
    const int order = x.order();
    std::vector<index_t> idx(static_cast<std::size_t>(order));
    index_t rest = i;
    for (int n = 0; n < order; ++n) {
      idx[static_cast<std::size_t>(n)] = rest % x.dim(n);
      rest /= x.dim(n);
    }
    if (layout == Layout::row_major) std::reverse(idx.begin(), idx.end());
    std::string where;
    for (std::size_t a = 0; a < idx.size(); ++a) where += (a ? ", " : "") + std::to_string(idx[a]);
    throw InvalidArgument(std::string(what) + " has a non-finite " +
                          (observed != nullptr ? "observed " : "") + "entry (" +
                          (has_nan(x[i]) ? "NaN" : "Inf") + ") at NumPy index [" + where + "]" +
                          (observed != nullptr ? " (mark it missing in the mask)" : ""));
  }
}

template <class T>
Matrix<T> matrix_from(const InArray& a, const char* what) {
  if (a.ndim() != 2) {
    throw InvalidArgument(std::string(what) + " must be a 2-D array, got " +
                          std::to_string(a.ndim()) + " axes");
  }
  Layout layout = Layout::col_major;
  const TensorView<const T> v = tensor_view<T>(a, what, layout);
  const index_t rows = static_cast<index_t>(a.shape(0)), cols = static_cast<index_t>(a.shape(1));
  Matrix<T> m(rows, cols);
  if (layout == Layout::col_major) {
    std::copy(v.data(), v.data() + v.numel(), m.data());
  } else {
    // The view is the cols x rows transpose.
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) m(i, j) = v[j + i * cols];
  }
  return m;
}

template <class T>
nb::object owned_array(std::vector<T>&& values, const std::vector<index_t>& dims, bool reverse) {
  auto* owner = new std::vector<T>(std::move(values));
  nb::capsule capsule(owner, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  const std::size_t n = dims.size();
  std::vector<std::size_t> shape(n);
  std::vector<std::int64_t> strides(n);
  std::int64_t stride = 1;
  for (std::size_t k = 0; k < n; ++k) {
    // Mode k of the column-major tensor has stride prod_{m < k} dims[m]; reversed, it
    // is NumPy axis n-1-k.
    const std::size_t axis = reverse ? n - 1 - k : k;
    shape[axis] = static_cast<std::size_t>(dims[k]);
    strides[axis] = stride;
    stride *= dims[k];
  }
  return nb::cast(
      nb::ndarray<nb::numpy, T>(owner->data(), n, shape.data(), capsule, strides.data()));
}

template <class T>
nb::object owned_matrix(Matrix<T>&& m) {
  const std::vector<index_t> dims{m.rows(), m.cols()};
  return owned_array(std::move(m.values()), dims);
}

nb::list factor_list(std::vector<nb::object> factors, bool reverse) {
  nb::list out;
  if (reverse) std::reverse(factors.begin(), factors.end());
  for (nb::object& f : factors) out.append(std::move(f));
  return out;
}

template <class T>
std::vector<Matrix<T>> given_factors(const std::vector<InArray>& given, bool reverse) {
  std::vector<Matrix<T>> start;
  for (std::size_t k = 0; k < given.size(); ++k) {
    const std::size_t axis = reverse ? given.size() - 1 - k : k;
    const std::string what = "init factor " + std::to_string(axis);
    start.push_back(matrix_from<T>(given[axis], what.c_str()));
  }
  return start;
}

template <class T>
void put_model(nb::dict& d, KTensor<T>&& model, bool reverse) {
  std::vector<nb::object> factors;
  for (Matrix<T>& f : model.factors) factors.push_back(owned_matrix(std::move(f)));
  const index_t rank = model.rank();
  d["weights"] = owned_array(std::move(model.weights), {rank});
  d["factors"] = factor_list(std::move(factors), reverse);
}

template <class T>
void put_tucker_model(nb::dict& d, TTensor<T>&& model, bool reverse) {
  const std::vector<index_t> core_dims = model.core.dims();
  d["core"] = owned_array(std::move(model.core.values()), core_dims, reverse);
  std::vector<nb::object> factors;
  for (Matrix<T>& f : model.factors) factors.push_back(owned_matrix(std::move(f)));
  d["factors"] = factor_list(std::move(factors), reverse);
}

template void put_tucker_model<float>(nb::dict&, TTensor<float>&&, bool);
template void put_tucker_model<double>(nb::dict&, TTensor<double>&&, bool);

std::optional<TensorView<const std::uint8_t>> mask_view(const std::optional<InArray>& mask,
                                                        const std::vector<index_t>& dims,
                                                        Layout layout) {
  if (!mask) return std::nullopt;
  Layout mask_layout = layout;
  const TensorView<const std::uint8_t> m = tensor_view<std::uint8_t>(*mask, "mask", mask_layout);
  if (mask_layout != layout || m.dims() != dims) {
    throw DimensionMismatch("mask must have the tensor's shape and memory order");
  }
  return m;
}

template TensorView<const std::uint8_t> tensor_view<std::uint8_t>(const InArray&, const char*,
                                                                  Layout&);
template TensorView<const float> tensor_view<float>(const InArray&, const char*, Layout&);
template void check_finite_numpy<float>(TensorView<const float>, Layout, const char*,
                                        const std::uint8_t*);
template Matrix<float> matrix_from<float>(const InArray&, const char*);
template nb::object owned_array<float>(std::vector<float>&&, const std::vector<index_t>&, bool);
template nb::object owned_matrix<float>(Matrix<float>&&);
template std::vector<Matrix<float>> given_factors<float>(const std::vector<InArray>&, bool);
template void put_model<float>(nb::dict&, KTensor<float>&&, bool);
template TensorView<const double> tensor_view<double>(const InArray&, const char*, Layout&);
template void check_finite_numpy<double>(TensorView<const double>, Layout, const char*,
                                         const std::uint8_t*);
template Matrix<double> matrix_from<double>(const InArray&, const char*);
template nb::object owned_array<double>(std::vector<double>&&, const std::vector<index_t>&, bool);
template nb::object owned_matrix<double>(Matrix<double>&&);
template std::vector<Matrix<double>> given_factors<double>(const std::vector<InArray>&, bool);
template void put_model<double>(nb::dict&, KTensor<double>&&, bool);
#define TENFOLD_PYTHON_COMPLEX_ARRAYS(T)                                                   \
  template TensorView<const T> tensor_view<T>(const InArray&, const char*, Layout&);       \
  template void check_finite_numpy<T>(TensorView<const T>, Layout, const char*,            \
                                      const std::uint8_t*);                                \
  template Matrix<T> matrix_from<T>(const InArray&, const char*);                          \
  template nb::object owned_array<T>(std::vector<T>&&, const std::vector<index_t>&, bool); \
  template nb::object owned_matrix<T>(Matrix<T> &&);                                       \
  template std::vector<Matrix<T>> given_factors<T>(const std::vector<InArray>&, bool);     \
  template void put_model<T>(nb::dict&, KTensor<T>&&, bool);
TENFOLD_PYTHON_COMPLEX_ARRAYS(std::complex<float>)
TENFOLD_PYTHON_COMPLEX_ARRAYS(std::complex<double>)

}  // namespace tenfold::python
