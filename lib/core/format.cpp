#include "core/format.hpp"

#include <charconv>

#include "tenfold/error.hpp"

namespace tenfold::detail {

std::string shape_string(std::span<const index_t> dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + ")";
}

std::string number_string(double value) {
  char text[32];  // the longest shortest form of a double is 24 characters
  const auto [end, err] = std::to_chars(text, text + sizeof text, value);
  return std::string(text, err == std::errc() ? end : text);
}

std::string index_string(std::span<const index_t> dims, index_t linear) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ", ";
    const index_t d = dims[i] > 0 ? dims[i] : 1;
    s += std::to_string(linear % d);
    linear /= d;
  }
  return s + ")";
}

void validate_dense_shape(std::span<const index_t> dims, std::string_view method) {
  const int order = static_cast<int>(dims.size());
  if (order < 2) {
    throw InvalidArgument(std::string(method) + " needs a tensor of order >= 2, got order " +
                          std::to_string(order));
  }
  for (int n = 0; n < order; ++n) {
    if (dims[static_cast<std::size_t>(n)] < 1) {
      throw InvalidArgument("tensor of shape " + shape_string(dims) + " is empty (mode " +
                            std::to_string(n) + " has size 0)");
    }
  }
}

}  // namespace tenfold::detail
