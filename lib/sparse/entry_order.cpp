#include "sparse/entry_order.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <numeric>
#include <string>

#include "core/memory.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {

template <class Word, class Index>
void sort_entries(std::type_identity_t<std::span<const Index* const>> indices,
                  std::span<const index_t> dims, std::span<const int> mode_order,
                  std::vector<Word>& perm, std::vector<Word>& spare) {
  const std::size_t nnz = perm.size();
  spare.resize(nnz);
  std::vector<index_t> start;
  // Stable passes from the least significant digit (the last mode's lowest bits) to the most
  // significant (the first mode's highest): after them the order is lexicographic.
  for (auto m = mode_order.rbegin(); m != mode_order.rend(); ++m) {
    const Index* idx = indices[static_cast<std::size_t>(*m)];
    const int bits =
        std::bit_width(static_cast<std::uint64_t>(dims[static_cast<std::size_t>(*m)] - 1));
    const int passes = (bits + kSortDigitBits - 1) / kSortDigitBits;
    const int digit_bits = passes == 0 ? 0 : (bits + passes - 1) / passes;
    const std::uint64_t mask = (std::uint64_t{1} << digit_bits) - 1;
    for (int pass = 0; pass < passes; ++pass) {
      const int shift = pass * digit_bits;
      const auto digit = [&](std::size_t e) {
        return static_cast<std::size_t>((static_cast<std::uint64_t>(idx[e]) >> shift) & mask);
      };
      // start[b] = the entries whose digit is below b (every entry is in perm, so the
      // counts come from the indices in their given order)
      start.assign(static_cast<std::size_t>(mask) + 2, 0);
      for (std::size_t e = 0; e < nnz; ++e) ++start[digit(e) + 1];
      if (std::any_of(start.begin(), start.end(),
                      [&](index_t c) { return static_cast<std::size_t>(c) == nnz; }))
        continue;  // one digit value for all: the pass keeps the order
      std::partial_sum(start.begin(), start.end(), start.begin());
      // entry e goes to the next free place of its digit, in the current order
      for (std::size_t k = 0; k < nnz; ++k) {
        const Word e = perm[k];
        spare[static_cast<std::size_t>(start[digit(e)]++)] = e;
      }
      perm.swap(spare);
    }
  }
}

std::vector<index_t> sorted_entries(std::span<const index_t* const> indices, index_t nnz,
                                    std::span<const index_t> dims,
                                    std::span<const int> mode_order) {
  std::vector<index_t> perm(static_cast<std::size_t>(nnz)), spare;
  std::iota(perm.begin(), perm.end(), index_t{0});
  sort_entries(indices, dims, mode_order, perm, spare);
  return perm;
}

void require_host_bytes(double bytes, const std::string& what) {
  const auto available = static_cast<double>(host_available_bytes());
  if (bytes <= available) return;
  throw MemoryError(what + " needs about " + bytes_string(bytes) + " of host memory, but only " +
                    bytes_string(available) + " are available");
}

#define TENFOLD_INSTANTIATE_SORT_ENTRIES(Word, Index)                                          \
  template void sort_entries<Word, Index>(std::type_identity_t<std::span<const Index* const>>, \
                                          std::span<const index_t>, std::span<const int>,      \
                                          std::vector<Word>&, std::vector<Word>&);
TENFOLD_INSTANTIATE_SORT_ENTRIES(std::uint32_t, index_t)
TENFOLD_INSTANTIATE_SORT_ENTRIES(index_t, index_t)
TENFOLD_INSTANTIATE_SORT_ENTRIES(std::uint32_t, std::uint32_t)
TENFOLD_INSTANTIATE_SORT_ENTRIES(index_t, std::uint32_t)

}  // namespace tenfold::detail
