// The checks of CpOptions, in one place: every CP-ALS entry point (dense, masked,
// sparse, model-form, distributed) calls validate_cp_options, then the refusals that
// apply to its input.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {

/// Throws InvalidOption("rank") for a rank above max_cp_rank(dims): no tensor of that
/// shape needs more components, and each costs memory and work (every CP method).
void check_cp_rank(index_t rank, const std::vector<index_t>& dims);

/// Throws InvalidArgument / DimensionMismatch for options and a start that do not fit
/// `dims` (see CpStart).
template <class T>
void validate_cp_options(const CpOptions& options, std::span<const Matrix<T>> initial_factors,
                         const std::vector<index_t>& dims);

/// Throws InvalidOption for samples < 0 or fit_check_every < 0, InvalidArgument for the
/// sampled solver with nonnegative, line_search, n_starts > 1, compress = on, fixed modes
/// or a backend other than cpu.
void validate_cp_solver(const CpOptions& options);

/// Throws InvalidArgument when options ask for the sampled solver on an input that only
/// the exact one takes (`input` names it, e.g. "a tensor given as a model").
void require_exact_solver(const CpOptions& options, const char* input);

/// CpOptions::sparsity is for a dense tensor without a mask: `input` names any other.
inline void refuse_sparsity(const CpOptions& options, const std::string& input) {
  if (options.sparsity > 0) {
    throw InvalidArgument("sparsity applies to dense tensors without a mask, not to " + input);
  }
}

}  // namespace tenfold::detail
