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

/// MTTKRP of mode n (I_n x R, column-major) straight from the coordinates, in double,
/// from row-major factors.
template <class T>
std::vector<T> coo_mttkrp(const SparseTensor<T>& x, const std::vector<std::vector<T>>& rows, int n,
                          index_t r) {
  const index_t in = x.dim(n);
  std::vector<double> out(static_cast<std::size_t>(in * r), 0.0);
  for (index_t k = 0; k < x.nnz(); ++k) {
    const auto ks = static_cast<std::size_t>(k);
    for (index_t j = 0; j < r; ++j) {
      double p = static_cast<double>(x.values()[ks]);
      for (int m = 0; m < x.order(); ++m) {
        const index_t i = x.indices(m)[ks];
        if (m != n) p *= static_cast<double>(rows[static_cast<std::size_t>(m)][i * r + j]);
      }
      out[static_cast<std::size_t>(x.indices(n)[ks] + j * in)] += p;
    }
  }
  return std::vector<T>(out.begin(), out.end());
}

}  // namespace tenfold::test
