// Sorting the entries of a coordinate list by a chosen order of its modes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// Bits of the radix sort's digits: a mode of b index bits is sorted in ceil(b / 11) passes.
inline constexpr int kSortDigitBits = 11;

/// Bytes of the counts that sort_entries keeps beside its two arrays.
inline constexpr double kSortCountBytes = ((1 << kSortDigitBits) + 1) * sizeof(index_t);

/// Reorders `perm`, a permutation of the entries 0..nnz-1 (Word: std::uint32_t when nnz <=
/// 2^32, else index_t), so that their indices in the modes `mode_order[0]` (slowest),
/// `mode_order[1]`, ... increase lexicographically, equal coordinates keeping their order.
/// `indices[m]` holds the nnz indices of mode m (each < dims[m]; Index: index_t, or
/// std::uint32_t when every size is at most 2^32); `spare` (nnz words) is overwritten. A
/// least-significant-digit radix sort: O(nnz) per digit, no other array.
template <class Word, class Index = index_t>
void sort_entries(std::type_identity_t<std::span<const Index* const>> indices,
                  std::span<const index_t> dims, std::span<const int> mode_order,
                  std::vector<Word>& perm, std::vector<Word>& spare);

/// The permutation p that sorts nnz entries as sort_entries does: entry p[0] first.
std::vector<index_t> sorted_entries(std::span<const index_t* const> indices, index_t nnz,
                                    std::span<const index_t> dims, std::span<const int> mode_order);

/// Throws MemoryError when `bytes` of host memory are not available for `what`.
void require_host_bytes(double bytes, const std::string& what);

}  // namespace tenfold::detail
