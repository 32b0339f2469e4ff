// Whether a given start lets a solver move: the one place that checks the starts of
// CP-ALS, CP-APR and GCP for components that could never leave where they start.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tenfold/cp.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold::detail {

/// Components of a start that CP-ALS cannot move, ascending. The first update reads
/// only the factors of the modes `read` (all but the first mode swept), through the
/// normal matrix V = *_m U_m^T U_m, the Gram of their Khatri-Rao product K. Component j
/// is stuck when its column is zero in some U_m (it stays zero in every factor for
/// good) or, when R <= rows(K), when its column of K is numerically a linear
/// combination of the earlier ones (V singular; the updates keep it dependent): pivot
/// of the Cholesky factor of K^T K with unit-norm columns <= 64 R eps (double).
template <class T>
std::vector<index_t> stuck_components(std::span<const Matrix<T>> factors, index_t rank,
                                      const std::vector<int>& read);

/// Throws InvalidArgument naming the first stuck component of a CP-ALS start (see
/// stuck_components), by factor and column for a zero column, with the factors named
/// by NumPy axis for Layout::row_major.
template <class T>
void check_start_can_move(const CpOptions& o, std::span<const Matrix<T>> initial_factors,
                          const std::vector<index_t>& dims);

/// Throws InvalidArgument when some component j of a start has a zero column in more
/// than `zero_factors_allowed` of its factors: `solver` names the method and `why` says
/// why such a component is stuck ("multiplicative updates keep zeros"). CP-APR allows
/// none (a zero column zeroes the weight for good); a gradient method allows one (the
/// gradient of a column vanishes only when another factor's column is zero as well).
template <class T>
void require_live_components(std::span<const Matrix<T>> start, int zero_factors_allowed,
                             const std::string& solver, const std::string& why);

/// Throws InvalidArgument naming the first negative entry of a start (by factor and
/// [row, column]): `solver` and `why` as above.
template <class T>
void require_nonnegative_start(std::span<const Matrix<T>> start, const std::string& solver,
                               const std::string& why);

}  // namespace tenfold::detail
