// Components that CP-ALS lost: a column that falls to exactly zero in a factor (its
// MTTKRP column was orthogonal to the data, as when the start's components miss every
// nonzero of a hyper-sparse tensor) stays zero in every later update, since its Gram
// row and column are zero. Such a component is started again from random columns.
#pragma once

#include <span>
#include <vector>

#include "core/compute.hpp"
#include "core/random.hpp"

namespace tenfold::detail {

/// Times one component may be started again; after that it stays zero (its weight 0
/// in the result).
inline constexpr int kCpMaxRevivals = 3;

/// The components j with a zero column in any factor n not `fixed[n]`, read from the
/// diagonals of the Grams G_n = U_n^T U_n (R x R, backend memory).
template <class T>
std::vector<index_t> zero_components(Compute<T>& c, std::span<T* const> grams, index_t rank,
                                     const std::vector<bool>& fixed);

/// Column j of every factor U_n not `fixed[n]` (I_n x R, backend memory) <- uniform [0, 1) entries
/// for each j in `columns`, and lambda_j <- 1.
template <class T>
void redraw_columns(Compute<T>& c, std::span<const index_t> dims, std::span<T* const> factors,
                    const std::vector<bool>& fixed, std::span<const index_t> columns, index_t rank,
                    T* lambda, Rng& rng);

}  // namespace tenfold::detail
