// Random attention layers for the attention test files.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "random_matrix.hpp"
#include "tenfold/attention.hpp"

namespace tenfold::test {

/// n entries N(0, 1) drawn from `gen`.
template <class T>
std::vector<T> gaussian_vector(index_t n, std::mt19937_64& gen) {
  return gaussian<T>(n, 1, 1.0, gen).values();
}

/// H heads of width d over D inputs: weights N(0, 1/D); with `biases`, query and key
/// biases N(0, 1) (without, scores are the context term alone).
template <class T>
attention::QueryKeyLayer<T> random_layer(index_t heads, index_t d, index_t input, bool biases,
                                         std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  attention::QueryKeyLayer<T> l;
  l.heads = heads;
  l.head_dim = d;
  const double sd = 1.0 / std::sqrt(static_cast<double>(input));
  l.query_weight = gaussian<T>(input, heads * d, sd, gen);
  l.key_weight = gaussian<T>(input, heads * d, sd, gen);
  if (biases) {
    l.query_bias = gaussian_vector<T>(heads * d, gen);
    l.key_bias = gaussian_vector<T>(heads * d, gen);
  }
  return l;
}

}  // namespace tenfold::test
