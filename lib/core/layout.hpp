// The NumPy-order entry (Layout::row_major): a C-order array is the column-major
// tensor with its modes reversed. The algorithms either run on the array's
// column-major copy in NumPy axis order (the floating-point operations of its
// Fortran-order copy, in the same order) or on the array itself with their mode
// numbering reversed (no copy; sums over the tensor then run in memory order).
#pragma once

#include <algorithm>
#include <vector>

#include "core/memory.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// A copy of `v` in reversed order.
template <class V>
V reversed(V v) {
  std::reverse(v.begin(), v.end());
  return v;
}

/// y(i_{N-1}, ..., i_0) = x(i_0, ..., i_{N-1}): the column-major tensor with the modes
/// of x reversed (an exact copy; reversing twice gives x back).
template <class T>
Tensor<T> reverse_modes(TensorView<const T> x);

/// reverse_modes into x.numel() values at y.
template <class T>
void reverse_modes(TensorView<const T> x, T* y);

/// reverse_modes(x) in allocate_host's memory, for the copies an algorithm reads and
/// drops (a row-major input in axis order): no zeroing pass before the copy, and huge
/// pages where the system gives them, as for the NumPy array it copies. Empty by default.
template <class T>
class ReversedTensor {
 public:
  ReversedTensor() = default;
  explicit ReversedTensor(TensorView<const T> x)
      : values_(static_cast<std::size_t>(x.numel())), dims_(reversed(x.dims())) {
    reverse_modes(x, values_.data());
  }
  TensorView<const T> view() const { return TensorView<const T>(values_.data(), dims_); }

 private:
  HostArray<T> values_;
  std::vector<index_t> dims_{0};  // empty: one mode of size 0
};

/// Mode n of an order-N view in `layout` is this axis of the caller's array.
inline int array_axis(Layout layout, int order, int n) {
  return layout == Layout::row_major ? order - 1 - n : n;
}

/// Whether a dense input of `numel` entries of `bytes_per_entry` in `layout` runs on
/// its column-major copy in NumPy axis order (see RowMajorInput).
inline bool copies_to_axis_order(Layout layout, RowMajorInput input, index_t numel,
                                 std::size_t bytes_per_entry) {
  if (layout == Layout::col_major || input == RowMajorInput::in_place) return false;
  return input == RowMajorInput::copy ||
         static_cast<double>(numel) * static_cast<double>(bytes_per_entry) <=
             static_cast<double>(kRowMajorCopyMaxBytes);
}

}  // namespace tenfold::detail
