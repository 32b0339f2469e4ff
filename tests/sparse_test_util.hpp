// Helpers shared by the sparse tests.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "tenfold/sparse.hpp"
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

/// nnz random coordinates (duplicates summed), values uniform in (-1, 1).
template <class T>
SparseTensor<T> random_entries(std::vector<index_t> dims, index_t nnz, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<index_t> coords;
  for (index_t d : dims)
    for (index_t k = 0; k < nnz; ++k)
      coords.push_back(static_cast<index_t>(gen() % static_cast<std::uint64_t>(d)));
  std::vector<T> values;
  for (index_t k = 0; k < nnz; ++k) values.push_back(static_cast<T>(u(gen)));
  return SparseTensor<T>(std::move(dims), std::move(coords), std::move(values));
}

}  // namespace tenfold::test
