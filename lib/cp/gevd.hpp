// The algebraic start of CP on a compressed 3-way core (init = gevd).
#pragma once

#include <cstdint>
#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// Whether gevd_start applies to a core of these sizes at rank R: order 3, the first
/// two sizes equal to R, the third at least 2, R at least 2.
bool gevd_applies(const std::vector<index_t>& dims, index_t rank);

/// Factors A, B, C of a rank-R CP start of the core G (where gevd_applies), from the
/// generalized eigenvectors of two random mixtures of its frontal slices (Leurgans,
/// Ross and Abel 1993; Tensorlab's cpd_gevd). Empty when a step is singular.
template <class T>
std::vector<Matrix<T>> gevd_start(TensorView<const T> g, index_t rank, std::uint64_t seed);

}  // namespace tenfold::detail
