#include "sparse/entry_order.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "core/memory.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {

std::vector<index_t> sorted_entries(std::span<const index_t* const> indices, index_t nnz,
                                    std::span<const index_t> dims,
                                    std::span<const int> mode_order) {
  const auto n = static_cast<std::size_t>(nnz);
  std::vector<index_t> perm(n);
  // Linear keys when prod_m I_m < 2^63: key = (...(i_{o0} I_{o1} + i_{o1}) I_{o2} + ...).
  double product = 1.0;
  for (int m : mode_order) product *= static_cast<double>(dims[static_cast<std::size_t>(m)]);
  if (product < 0x1p63) {
    std::vector<std::pair<std::uint64_t, index_t>> keys(n);
    for (std::size_t k = 0; k < n; ++k) {
      std::uint64_t key = 0;
      for (int m : mode_order) {
        key = key * static_cast<std::uint64_t>(dims[static_cast<std::size_t>(m)]) +
              static_cast<std::uint64_t>(indices[static_cast<std::size_t>(m)][k]);
      }
      keys[k] = {key, static_cast<index_t>(k)};
    }
    std::sort(keys.begin(), keys.end());  // ties broken by entry number: stable
    for (std::size_t k = 0; k < n; ++k) perm[k] = keys[k].second;
    return perm;
  }
  std::iota(perm.begin(), perm.end(), index_t{0});
  std::sort(perm.begin(), perm.end(), [&](index_t a, index_t b) {
    for (int m : mode_order) {
      const index_t* idx = indices[static_cast<std::size_t>(m)];
      if (idx[a] != idx[b]) return idx[a] < idx[b];
    }
    return a < b;
  });
  return perm;
}

void require_host_bytes(double bytes, const std::string& what) {
  const auto available = static_cast<double>(host_available_bytes());
  if (bytes <= available) return;
  throw MemoryError(what + " needs about " + bytes_string(bytes) + " of host memory, but only " +
                    bytes_string(available) + " are available");
}

}  // namespace tenfold::detail
