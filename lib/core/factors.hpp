// What a model in factor form (CP, Tucker) takes from its factor matrices alone.
#pragma once

#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// The model's mode sizes I_n: the rows of its factor matrices.
template <class T>
std::vector<index_t> factor_rows(const std::vector<Matrix<T>>& factors) {
  std::vector<index_t> rows;
  for (const Matrix<T>& f : factors) rows.push_back(f.rows());
  return rows;
}

}  // namespace tenfold::detail
