// CP-APR: CP for Poisson counts by alternating Poisson regression (Chi and Kolda,
// "On tensors, sparsity, and nonnegative factorizations", SIAM J. Matrix Anal. Appl.
// 33(4), 2012), with the multiplicative updates and the inadmissible-zero fix of the
// Tensor Toolbox's cp_apr (algorithm 'mu').
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tenfold/cp.hpp"
#include "tenfold/export.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold {

/// What the per-iteration callback of cp_apr sees.
struct TENFOLD_API CpAprProgress {
  int iteration = 0;         ///< outer iteration, 1-based
  double kkt_violation = 0;  ///< largest violation of the KKT conditions over the modes
  int inner_iterations = 0;  ///< multiplicative updates in this outer iteration
  double seconds = 0.0;      ///< wall time since the start of the call
};

/// Options of cp_apr; the defaults are those of the Tensor Toolbox.
struct TENFOLD_API CpAprOptions {
  index_t rank = 1;          ///< number of components R >= 1
  int max_iters = 1000;      ///< outer iterations (sweeps over the modes), >= 1
  int max_inner_iters = 10;  ///< multiplicative updates per mode and sweep, >= 1
  /// Stop when every mode satisfies the KKT conditions to this tolerance,
  /// max |min(B, 1 - Phi)| < tol, at its first inner iteration (> 0).
  double tol = 1e-4;
  double kappa = 0.01;          ///< inadmissible-zero fix: the amount added (>= 0)
  double kappa_tol = 1e-10;     ///< entries below this with Phi > 1 count as inadmissible zeros
  double eps_div_zero = 1e-10;  ///< the model's value is at least this in X ./ model (> 0)
  std::uint64_t seed = 0;       ///< seed of the random start (entries uniform in [0, 1))
  double time_limit = 0.0;      ///< seconds; 0 means none (checked after each iteration)
  /// Called after every outer iteration; return false to stop early.
  std::function<bool(const CpAprProgress&)> callback;
};

/// Result of cp_apr.
template <class T>
struct TENFOLD_API CpAprResult {
  /// The Poisson rate model: unit 2-norm columns, weights sorted descending (all
  /// entries are nonnegative).
  KTensor<T> model;
  int iterations = 0;        ///< outer iterations run
  int inner_iterations = 0;  ///< multiplicative updates over all modes and iterations
  bool converged = false;    ///< stop == CpStop::converged
  CpStop stop = CpStop::max_iters;
  double kkt_violation = 0.0;       ///< of the last outer iteration
  std::vector<double> kkt_history;  ///< after each outer iteration
  int inadmissible_zero_fixes = 0;  ///< sweeps over a mode that shifted some entries
  /// Poisson log-likelihood sum_i (x_i log m_i - m_i), without the constant -log(x_i!).
  double log_likelihood = 0.0;
  double seconds = 0.0;
};

/// CP-APR of a sparse tensor of nonnegative counts (any nonnegative values; order >= 2,
/// at least one nonzero). The start is `initial_factors` (nonnegative, one I_n x R
/// matrix per mode) or random from `seed`. Each inner iteration is O(nnz R) on the CSF
/// tree of the mode (the entries' Khatri-Rao rows kept per mode, nnz x R, when they take
/// at most a quarter of the free memory; else formed again from the tree, O(nnz N R)),
/// in parallel over its root slices, with the same bits for any thread count. Throws
/// InvalidArgument for a negative value (naming its coordinates), options out of range, or a start
/// of the wrong shape or with negative entries.
template <class T>
TENFOLD_API CpAprResult<T> cp_apr(const SparseTensor<T>& x, const CpAprOptions& options,
                                  CpStart<T> initial_factors = {});

/// CP-APR of a dense tensor of counts: the updates read only the nonzero entries (a
/// zero count adds nothing to X ./ model), so this runs on SparseTensor::from_dense(x),
/// whose memory is checked first. Modes are the view's (column-major).
template <class T>
TENFOLD_API CpAprResult<T> cp_apr(TensorView<const T> x, const CpAprOptions& options,
                                  CpStart<T> initial_factors = {});

}  // namespace tenfold
