// Formatting helpers for error messages.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// "(2, 3, 4)"
std::string shape_string(std::span<const index_t> dims);

/// A number as it would be typed: the shortest text that reads back as `value`
/// ("-1", "1e-20", "0.1", "inf", "nan"), not std::to_string's fixed six decimals.
std::string number_string(double value);

/// Multi-index "(i0, i1, ...)" of a column-major linear offset into a tensor of shape dims.
std::string index_string(std::span<const index_t> dims, index_t linear);

/// Throws InvalidArgument unless a dense tensor of shape `dims` has order >= 2 and no
/// empty mode; `method` names the decomposition in the message ("CP-ALS needs ...").
void validate_dense_shape(std::span<const index_t> dims, std::string_view method);

}  // namespace tenfold::detail
