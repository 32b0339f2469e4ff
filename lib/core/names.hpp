// The names of an enum's values, as one {value, "name"} table per enum: to_string and
// the parser of each public enum are both read from its table.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "tenfold/error.hpp"

namespace tenfold::detail {

template <class E>
struct Named {
  E value;
  std::string_view name;
};

/// The name of `value` in `table` ("?" for a value the table lacks).
template <class E>
std::string_view name_of(std::span<const Named<E>> table, E value) {
  for (const Named<E>& n : table)
    if (n.value == value) return n.name;
  return "?";
}

/// The value named `name`; otherwise InvalidArgument "unknown <what> 'name' (expected a,
/// b or c)", listing the table's names in order.
template <class E>
E parse_named(std::span<const Named<E>> table, std::string_view name, std::string_view what) {
  for (const Named<E>& n : table)
    if (n.name == name) return n.value;
  std::string expected;
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (i > 0) expected += i + 1 == table.size() ? " or " : ", ";
    expected += table[i].name;
  }
  throw InvalidArgument("unknown " + std::string(what) + " '" + std::string(name) + "' (expected " +
                        expected + ")");
}

}  // namespace tenfold::detail
