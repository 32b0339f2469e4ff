// Helpers shared by the sparse tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::test {

/// One row-major factor (I_m x r) per mode, entries uniform in (-1, 1).
template <class T>
std::vector<std::vector<T>> random_factors(const std::vector<index_t>& dims, index_t r,
                                           std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<std::vector<T>> f;
  for (index_t d : dims) {
    f.emplace_back(static_cast<std::size_t>(d * r));
    for (T& v : f.back()) v = static_cast<T>(u(gen));
  }
  return f;
}

}  // namespace tenfold::test
