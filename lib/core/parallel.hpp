// Deterministic parallel reductions (same result for any thread count).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

#include "core/thread_pool.hpp"

namespace tenfold::detail {

/// sum over a fixed cut of [0, n) into chunks [lo, hi) of block_sum(lo, hi), in order.
template <class F>
double chunked_block_sum(std::size_t n, F block_sum) {
  constexpr std::size_t kChunks = 64;
  std::array<double, kChunks> partial{};
  const std::size_t chunk = (n + kChunks - 1) / kChunks;
  const auto sum_chunk = [&](index_t c) {
    const std::size_t lo = std::min(n, static_cast<std::size_t>(c) * chunk),
                      hi = std::min(n, lo + chunk);
    partial[static_cast<std::size_t>(c)] = block_sum(lo, hi);
  };
  if (n > 32768) {
    parallel_for(kChunks, sum_chunk);
  } else {
    for (std::size_t c = 0; c < kChunks; ++c) sum_chunk(static_cast<index_t>(c));
  }
  double s = 0.0;
  for (double p : partial) s += p;
  return s;
}

/// sum_{i < n} term(i) in double: a fixed number of chunks, each summed in order.
template <class F>
double chunked_sum(std::size_t n, F term) {
  return chunked_block_sum(n, [&](std::size_t lo, std::size_t hi) {
    double s = 0.0;
    for (std::size_t i = lo; i < hi; ++i) s += term(i);
    return s;
  });
}

}  // namespace tenfold::detail
