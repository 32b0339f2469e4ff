// The CP-ALS loop, written once over a CpOperand and a Compute backend.
#pragma once

#include <chrono>

#include "cp/operand.hpp"
#include "tenfold/cp.hpp"

namespace tenfold::detail {

/// Throws InvalidArgument / DimensionMismatch for options that do not fit `dims`.
template <class T>
void validate_cp_options(const CpOptions<T>& options, const std::vector<index_t>& dims);

/// Runs CP-ALS on an operand whose options were validated; `start` is when the
/// public call began (for the time limit and the init timing).
template <class T>
CpResult<T> run_cp_als(CpOperand<T>& x, Compute<T>& c, const CpOptions<T>& options,
                       std::chrono::steady_clock::time_point start);

/// Runs options.n_starts starts of run_cp_als on x (reset between starts): start 0 with
/// options.init and seed, start s > 0 random with seed + s. Returns the best final fit,
/// with every start's fit in start_fits and the total time in timings.total.
template <class T>
CpResult<T> run_cp_starts(CpOperand<T>& x, Compute<T>& c, const CpOptions<T>& options,
                          std::chrono::steady_clock::time_point start);

/// Normalises every column to unit 2-norm (into the weights), sorts components by
/// descending weight and fixes signs as the Tensor Toolbox does: the largest-magnitude
/// entry of each column is made positive in pairs of modes, so the model is unchanged.
template <class T>
void arrange(KTensor<T>& model);

}  // namespace tenfold::detail
