// Sampled least squares for dense CP-ALS (CpSolver::sampled): CP-ARLS-LEV.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/subspace.hpp"
#include "cp/cp_als.hpp"
#include "cp/fit_sample.hpp"

namespace tenfold::detail {

/// CP-ALS of the dense tensor x (column-major; `reversed`: its modes are numbered by
/// NumPy axis, as for run_in_axis_numbering) with the sampled solver; options
/// validated, layout col_major.
template <class T>
CpResult<T> run_sampled_cp(TensorView<const T> x, bool reversed, Compute<T>& c,
                           const CpOptions& options, std::span<const Matrix<T>> initial_factors,
                           Clock::time_point start);

}  // namespace tenfold::detail
