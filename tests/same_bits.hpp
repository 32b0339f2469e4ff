// Whether two results are the same to the bit (NaNs of the same fill and signed zeros included).
#pragma once

#include <cstring>
#include <vector>

namespace tenfold::test {

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace tenfold::test
