// The CP-ALS loop, written once over a CpOperand and a Compute backend.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "core/layout.hpp"
#include "cp/cp_options.hpp"
#include "cp/operand.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {

using Clock = std::chrono::steady_clock;

/// Seconds from t to now.
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Runs CP-ALS on an operand whose options and start were validated: from
/// `initial_factors` when there are any, else from options.init; `start` is when the
/// public call began (for the time limit and the init timing).
template <class T>
CpResult<T> run_cp_als(CpOperand<T>& x, Compute<T>& c, const CpOptions& options,
                       std::span<const Matrix<T>> initial_factors,
                       std::chrono::steady_clock::time_point start);

/// Most random starts, and the fewest sweeps left for one, that n_starts = 0 adds.
inline constexpr int kCpMaxAutomaticStarts = 8;
inline constexpr int kCpMinAutomaticSweeps = 5;

/// Runs options.n_starts starts of run_cp_als on x (reset between starts): start 0 from
/// `initial_factors` or options.init and seed, start s > 0 random with seed + s; with
/// `extra_sweeps` >= 0, no random start begins once the random starts have run that many
/// sweeps in all. n_starts = 0 with init automatic, no given or fixed factors and no
/// `extra_sweeps` adds random starts within half the first start's sweeps (see
/// multi_start.cpp). Returns the best final fit, with every start's fit in start_fits and
/// the total time in timings.total.
template <class T>
CpResult<T> run_cp_starts(CpOperand<T>& x, Compute<T>& c, const CpOptions& options,
                          std::span<const Matrix<T>> initial_factors,
                          std::chrono::steady_clock::time_point start, int extra_sweeps = -1);
/// CP-ALS in the array's axis order: for Layout::row_major, `run` receives the options
/// (layout col_major, mode numbers of a tensor of order `order` in NumPy axis order) and
/// the initial factors in NumPy axis order, must run on the
/// operand in that order, and its model's factors are returned in the caller's mode
/// order again.
template <class T, class Run>
CpResult<T> run_in_axis_order(const CpOptions& options, int order,
                              std::span<const Matrix<T>> initial_factors, Run&& run) {
  if (options.layout == Layout::col_major) return run(options, initial_factors);
  CpOptions axis_order = options;
  axis_order.layout = Layout::col_major;
  for (int& n : axis_order.fixed_modes) n = order - 1 - n;
  for (int& n : axis_order.nonnegative_modes) n = order - 1 - n;
  const std::vector<Matrix<T>> factors_in_axis_order =
      reversed(std::vector<Matrix<T>>(initial_factors.begin(), initial_factors.end()));
  CpResult<T> res = run(axis_order, std::span<const Matrix<T>>(factors_in_axis_order));
  res.model.factors = reversed(std::move(res.model.factors));
  res.compression_ranks = reversed(std::move(res.compression_ranks));
  return res;
}

/// CP-ALS of a tensor given as a model (KTensor or TTensor) through its operand type:
/// the model and the options checked (below order 2 the message says "got <order_of>
/// order N"), then every start run in the array's axis order, for Layout::row_major on
/// reverse_modes(x), the model with its modes in NumPy axis order.
template <template <class> class Operand, class T, class Model, class ReverseModes>
CpResult<T> cp_als_of_model(const Model& x, const CpOptions& options,
                            std::span<const Matrix<T>> initial_factors, const std::string& order_of,
                            ReverseModes&& reverse_modes) {
  const auto start = Clock::now();
  x.validate();
  if (x.order() < 2) {
    throw InvalidArgument("CP-ALS needs a tensor of order >= 2, got " + order_of + "order " +
                          std::to_string(x.order()));
  }
  validate_cp_options(options, initial_factors, x.dims());
  require_exact_solver(options, "a tensor given as a model");
  refuse_sparsity(options, "a tensor given in CP or Tucker form");
  auto c = make_compute<T>(options.backend);
  const bool reverse = options.layout == Layout::row_major;
  const Model axis_order = reverse ? reverse_modes(x) : Model();
  return run_in_axis_order(options, x.order(), initial_factors,
                           [&](const CpOptions& o, std::span<const Matrix<T>> initial) {
                             Operand<T> op(*c, reverse ? axis_order : x);
                             return run_cp_starts(op, *c, o, initial, start);
                           });
}

/// Normalises every column to unit 2-norm (into the weights), sorts components by
/// descending weight and fixes signs: the largest-magnitude entry of each column is
/// made positive in pairs of modes, so the model is unchanged; with an odd count of
/// negative ones, the mode whose largest magnitude is smallest keeps a negative one.
/// The signs are thus a function of the model (the Tensor Toolbox's fixsigns flips
/// the first negatives in mode order, which depends on the signs it is given). Modes
/// marked in `nonnegative` (non-negative factors) are never the one left negative.
template <class T>
void arrange(KTensor<T>& model, const std::vector<bool>& nonnegative = {});

}  // namespace tenfold::detail
