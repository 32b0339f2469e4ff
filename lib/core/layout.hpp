// The NumPy-order entry (Layout::row_major): a C-order array is the column-major
// tensor with its modes reversed. The algorithms run on the array's column-major
// copy in NumPy axis order, so that a C-order array and its Fortran-order copy go
// through the same floating-point operations in the same order.
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

/// A copy of `v` in reversed order.
template <class V>
V reversed(V v) {
  std::reverse(v.begin(), v.end());
  return v;
}

}  // namespace tenfold::detail
