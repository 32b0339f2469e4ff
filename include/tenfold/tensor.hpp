// Dense tensors and matrices: column-major storage, mode 0 fastest (as BLAS,
// Fortran and the MATLAB Tensor Toolbox). A NumPy C-order array of shape
// (a, b, c) is the same memory as a Tenfold tensor of shape (c, b, a).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "tenfold/export.hpp"

namespace tenfold {

/// Signed index and size type used throughout the library.
using index_t = std::int64_t;

/// Product of the sizes; throws InvalidArgument on a negative size or when the product
/// of the nonzero sizes overflows (whether or not another size is zero).
TENFOLD_API index_t checked_numel(std::span<const index_t> dims);

/// checked_numel(dims), and throws InvalidArgument if `data` is null while the
/// product is nonzero (a view must point at its elements).
TENFOLD_API index_t checked_view_numel(const void* data, std::span<const index_t> dims);

/// How the memory of a caller's array maps onto the modes of a TensorView, for the
/// algorithms' NumPy-order entry (CpOptions::layout, TuckerOptions::layout).
enum class Layout {
  /// Fortran order, Tenfold's own: mode n of the view is axis n of the array.
  col_major,
  /// C order (NumPy's default): the view is the array's memory with the shape reversed
  /// (as io::load_npy returns a C-order file), so mode n is NumPy axis N-1-n.
  row_major,
};

/// How the algorithms read a dense row_major input (CpOptions::row_major_input,
/// TuckerOptions::row_major_input). Sums over the tensor run in memory order, so a
/// C-order array and its Fortran-order copy can give the same bits only when one of
/// them is transposed; this chooses between that copy and memory.
enum class RowMajorInput {
  /// copy when the tensor takes at most kRowMajorCopyMaxBytes, in place otherwise
  automatic,
  /// run on the array's column-major copy in NumPy axis order (one more copy of the
  /// tensor in memory): bit for bit the result of its Fortran-order copy
  copy,
  /// run on the array itself, with everything whose order matters (starts, sweeps,
  /// mode orders, ties) in NumPy axis order: no copy, and the result of the
  /// Fortran-order copy up to rounding (the sums run in another order)
  in_place,
};

/// Largest dense row_major input (in bytes) that RowMajorInput::automatic copies: small
/// tensors, whose copy takes well under a millisecond, give their Fortran-order copy's
/// bits. Above it the copy would cost up to a fifth of a 10-sweep CP call or two fifths
/// of an ST-HOSVD (docs/performance.md, "C-order input in place"), for no better result.
inline constexpr std::size_t kRowMajorCopyMaxBytes = std::size_t{1} << 20;

/// Non-owning view of a dense column-major tensor. `T` may be const-qualified.
template <class T>
class TENFOLD_API TensorView {
 public:
  using value_type = std::remove_const_t<T>;

  TensorView() = default;
  /// Views `data`, which must hold checked_numel(dims) elements. Throws
  /// InvalidArgument on a negative or overflowing size, or a null `data` with a
  /// nonzero element count, so that every view reaching the library is well formed.
  TensorView(T* data, std::vector<index_t> dims) : data_(data), dims_(std::move(dims)) {
    numel_ = checked_view_numel(data_, dims_);
  }
  /// A view of mutable data converts to a view of const data.
  template <class U>
  requires(std::is_const_v<T>&& std::is_same_v<const U, T>)
      TensorView(const TensorView<U>& other)  // NOLINT(google-explicit-constructor)
      : data_(other.data()), dims_(other.dims()), numel_(other.numel()) {}

  int order() const { return static_cast<int>(dims_.size()); }
  index_t dim(int n) const { return dims_[static_cast<std::size_t>(n)]; }
  const std::vector<index_t>& dims() const { return dims_; }
  index_t numel() const { return numel_; }
  T* data() const { return data_; }
  T& operator[](index_t linear) const { return data_[linear]; }

  /// Element at a multi-index (i_0, i_1, ...), column-major.
  template <class... I>
  T& operator()(I... idx) const {
    return data_[offset({static_cast<index_t>(idx)...})];
  }
  /// Column-major linear offset of a multi-index (not bounds-checked).
  index_t offset(std::initializer_list<index_t> idx) const {
    index_t off = 0, stride = 1;
    std::size_t n = 0;
    for (index_t i : idx) {
      off += i * stride;
      stride *= dims_[n++];
    }
    return off;
  }

 private:
  T* data_ = nullptr;
  std::vector<index_t> dims_;
  index_t numel_ = 0;
};

/// Owning dense column-major tensor of any order.
template <class T>
class TENFOLD_API Tensor {
 public:
  using value_type = T;

  Tensor() = default;
  /// Zero-filled tensor of the given sizes; throws InvalidArgument (before allocating)
  /// on a negative size or when the element count or byte size overflows. On Linux,
  /// storage of 2 MiB or more is advised for transparent huge pages before it is zeroed.
  explicit Tensor(std::vector<index_t> dims);
  /// Takes ownership of `data` (column-major); throws DimensionMismatch if sizes disagree.
  Tensor(std::vector<index_t> dims, std::vector<T> data);

  int order() const { return static_cast<int>(dims_.size()); }
  index_t dim(int n) const { return dims_[static_cast<std::size_t>(n)]; }
  const std::vector<index_t>& dims() const { return dims_; }
  index_t numel() const { return static_cast<index_t>(data_.size()); }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  std::vector<T>& values() { return data_; }
  const std::vector<T>& values() const { return data_; }
  T& operator[](index_t linear) { return data_[static_cast<std::size_t>(linear)]; }
  const T& operator[](index_t linear) const { return data_[static_cast<std::size_t>(linear)]; }

  template <class... I>
  T& operator()(I... idx) {
    return view()(idx...);
  }
  template <class... I>
  const T& operator()(I... idx) const {
    return view()(idx...);
  }

  TensorView<T> view() { return TensorView<T>(data_.data(), dims_); }
  TensorView<const T> view() const { return TensorView<const T>(data_.data(), dims_); }
  operator TensorView<const T>() const { return view(); }  // NOLINT(google-explicit-constructor)

 private:
  std::vector<index_t> dims_;
  std::vector<T> data_;
};

/// Owning column-major matrix (rows x cols), used for factor matrices.
template <class T>
class TENFOLD_API Matrix {
 public:
  using value_type = T;

  Matrix() = default;
  /// Zero-filled rows x cols matrix; throws InvalidArgument (before allocating) on
  /// negative sizes or when the element count or byte size overflows.
  Matrix(index_t rows, index_t cols);
  /// Takes ownership of column-major `data`; throws DimensionMismatch if sizes disagree.
  Matrix(index_t rows, index_t cols, std::vector<T> data);

  index_t rows() const { return rows_; }
  index_t cols() const { return cols_; }
  index_t size() const { return rows_ * cols_; }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  T* col(index_t j) { return data_.data() + j * rows_; }
  const T* col(index_t j) const { return data_.data() + j * rows_; }
  T& operator()(index_t i, index_t j) { return data_[static_cast<std::size_t>(i + j * rows_)]; }
  const T& operator()(index_t i, index_t j) const {
    return data_[static_cast<std::size_t>(i + j * rows_)];
  }
  std::vector<T>& values() { return data_; }
  const std::vector<T>& values() const { return data_; }

 private:
  index_t rows_ = 0;
  index_t cols_ = 0;
  std::vector<T> data_;
};

/// Frobenius norm, accumulated in double.
template <class T>
TENFOLD_API double norm(TensorView<const T> x);

/// Throws InvalidArgument naming the first NaN or Inf entry (as a multi-index), if any.
template <class T>
TENFOLD_API void check_finite(TensorView<const T> x, const char* what);

/// Tensor with the same shape whose entries are `x` converted to U.
template <class U, class T>
TENFOLD_API Tensor<U> convert(TensorView<const T> x);

/// NumPy's x.T: y(i_{N-1}, ..., i_0) = x(i_0, ..., i_{N-1}), the column-major tensor of
/// the reversed shape (an exact copy; transposing twice gives x back). A C-order array
/// of NumPy shape (a, b, c) is the column-major tensor of shape (c, b, a): its
/// transpose is the array in NumPy axis order.
template <class T>
TENFOLD_API Tensor<T> transpose(TensorView<const T> x);

}  // namespace tenfold
