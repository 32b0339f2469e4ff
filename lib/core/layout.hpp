// The NumPy-order entry (Layout::row_major): a C-order array is the column-major
// tensor with its modes reversed. The algorithms either run on the array's
// column-major copy in NumPy axis order (the floating-point operations of its
// Fortran-order copy, in the same order) or on the array itself with their mode
// numbering reversed (no copy; sums over the tensor then run in memory order).
#pragma once

#include <algorithm>
#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// y(i_{N-1}, ..., i_0) = x(i_0, ..., i_{N-1}): the column-major tensor with the modes
/// of x reversed (an exact copy; reversing twice gives x back).
template <class T>
Tensor<T> reverse_modes(TensorView<const T> x);

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

/// A copy of `v` in reversed order.
template <class V>
V reversed(V v) {
  std::reverse(v.begin(), v.end());
  return v;
}

}  // namespace tenfold::detail
