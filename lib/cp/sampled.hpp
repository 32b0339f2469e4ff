// Sampled least squares for dense CP-ALS (CpSolver::sampled): CP-ARLS-LEV.
#pragma once

#include <span>

#include "cp/cp_als.hpp"

namespace tenfold::detail {

/// Throws InvalidOption for samples < 0 or fit_check_every < 1, InvalidArgument for the
/// sampled solver with nonnegative, line_search, n_starts > 1, compress = on, fixed modes
/// or a backend other than cpu.
void validate_cp_solver(const CpOptions& options);

/// CP-ALS of the dense tensor x (column-major; `reversed`: its modes are numbered by
/// NumPy axis, as for run_in_axis_numbering) with the sampled solver; options
/// validated, layout col_major.
template <class T>
CpResult<T> run_sampled_cp(TensorView<const T> x, bool reversed, Compute<T>& c,
                           const CpOptions& options, std::span<const Matrix<T>> initial_factors,
                           Clock::time_point start);

}  // namespace tenfold::detail
