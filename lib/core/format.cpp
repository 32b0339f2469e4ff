#include "core/format.hpp"

namespace tenfold::detail {

std::string shape_string(std::span<const index_t> dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + ")";
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

}  // namespace tenfold::detail
