// Sorting the entries of a coordinate list by a chosen order of its modes.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// The permutation p that sorts nnz entries lexicographically by their indices in the
/// modes `mode_order[0]` (slowest), `mode_order[1]`, ...: entry p[0] first. `indices[m]`
/// holds the nnz indices of mode m (each < dims[m]). Entries with equal coordinates keep
/// their given order. One sort of linear keys when the product of the sizes fits in 63
/// bits, a comparison of the index tuples otherwise.
std::vector<index_t> sorted_entries(std::span<const index_t* const> indices, index_t nnz,
                                    std::span<const index_t> dims, std::span<const int> mode_order);

/// Throws MemoryError when `bytes` of host memory are not available for `what`.
void require_host_bytes(double bytes, const std::string& what);

}  // namespace tenfold::detail
