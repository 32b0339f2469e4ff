// Deterministic parallel reductions (same result for any thread count).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

#include "core/thread_pool.hpp"

namespace tenfold::detail {

/// sum_{i < n} term(i) in double: a fixed number of chunks summed in order.
template <class F>
double chunked_sum(std::size_t n, F term) {
  constexpr std::size_t kChunks = 64;
  std::array<double, kChunks> partial{};
  const std::size_t chunk = (n + kChunks - 1) / kChunks;
  const auto sum_chunk = [&](index_t c) {
    const std::size_t lo = std::min(n, static_cast<std::size_t>(c) * chunk),
                      hi = std::min(n, lo + chunk);
    double s = 0.0;
    for (std::size_t i = lo; i < hi; ++i) s += term(i);
    partial[static_cast<std::size_t>(c)] = s;
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

}  // namespace tenfold::detail
