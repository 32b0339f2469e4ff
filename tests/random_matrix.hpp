// Random matrices for tests and benchmarks: Gaussian entries, orthonormal columns.
#pragma once

#include <cmath>
#include <random>

#include "tenfold/tensor.hpp"

namespace tenfold::test {

/// rows x cols with entries N(0, sd^2), drawn in column-major order from `gen`.
template <class T>
Matrix<T> gaussian(index_t rows, index_t cols, double sd, std::mt19937_64& gen) {
  std::normal_distribution<double> n(0.0, sd);
  Matrix<T> m(rows, cols);
  for (T& x : m.values()) x = static_cast<T>(n(gen));
  return m;
}

/// Orthonormal columns: a Gaussian matrix through Gram-Schmidt (twice, for accuracy).
inline Matrix<double> orthonormal(index_t rows, index_t cols, std::mt19937_64& gen) {
  Matrix<double> m = gaussian<double>(rows, cols, 1.0, gen);
  for (index_t j = 0; j < cols; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (index_t k = 0; k < j; ++k) {
        double s = 0.0;
        for (index_t i = 0; i < rows; ++i) s += m(i, j) * m(i, k);
        for (index_t i = 0; i < rows; ++i) m(i, j) -= s * m(i, k);
      }
    double s = 0.0;
    for (index_t i = 0; i < rows; ++i) s += m(i, j) * m(i, j);
    for (index_t i = 0; i < rows; ++i) m(i, j) /= std::sqrt(s);
  }
  return m;
}

}  // namespace tenfold::test
