// Tucker decompositions: HOSVD, sequentially truncated HOSVD (ST-HOSVD) and HOOI,
// and CP-ALS of a tensor given in Tucker form. See docs/tucker.md.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "tenfold/backend.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold {

/// Tucker model X = G x_0 U_0 x_1 U_1 ... x_{N-1} U_{N-1}: a core tensor G of shape
/// (r_0, ..., r_{N-1}) and one I_n x r_n factor matrix per mode. The factors that
/// tucker() returns have orthonormal columns; the methods below accept any factors.
template <class T>
struct TENFOLD_API TTensor {
  Tensor<T> core;
  std::vector<Matrix<T>> factors;

  TTensor() = default;
  TTensor(Tensor<T> g, std::vector<Matrix<T>> f) : core(std::move(g)), factors(std::move(f)) {}

  int order() const { return static_cast<int>(factors.size()); }
  /// Mode sizes I_n (rows of the factors).
  std::vector<index_t> dims() const;
  /// Multilinear ranks r_n (sizes of the core).
  std::vector<index_t> ranks() const;

  /// Throws InvalidArgument / DimensionMismatch unless the model is well formed:
  /// order >= 1, one factor per core mode, factor n with r_n >= 1 columns and at
  /// least one row, finite entries.
  void validate() const;

  /// Dense tensor G x_0 U_0 ... (size prod I_n; mind the memory).
  Tensor<T> full() const;

  /// Frobenius norm without forming the tensor: ||X||^2 = <G, G x_0 U_0^T U_0 ...>,
  /// in double (equal to ||G|| when the factors are orthonormal).
  double norm() const;

  /// <X, this> = <X x_0 U_0^T ... x_{N-1} U_{N-1}^T, G>, accumulated in double.
  double inner(TensorView<const T> x) const;
};

/// Which Tucker algorithm tucker() runs.
enum class TuckerMethod {
  sthosvd,  ///< sequentially truncated HOSVD: each mode's Gram on the already shrunk tensor
  hosvd,    ///< truncated HOSVD: every mode's Gram on the full tensor
  hooi,     ///< higher-order orthogonal iteration, started from ST-HOSVD
};

/// "sthosvd", "hosvd" or "hooi".
TENFOLD_API std::string_view to_string(TuckerMethod method);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API TuckerMethod parse_tucker_method(std::string_view name);

/// Why tucker() stopped.
enum class TuckerStop {
  converged,  ///< sthosvd and hosvd always; HOOI when a sweep lowered the error by less than tol
  max_iters,  ///< HOOI ran max_iters sweeps
  callback,   ///< HOOI: the progress callback returned false
};
/// "converged", "max_iters" or "callback".
TENFOLD_API std::string_view to_string(TuckerStop stop);

/// What the progress callback of tucker() sees after each step. A step computes one
/// mode's factor: its Gram, the eigensolver and (ST-HOSVD) the shrinking TTM, or
/// (HOOI) the contraction of the tensor with the other modes' factors, Gram and
/// eigensolver. HOSVD's last step also forms the core, and so does HOOI's at the end of
/// each sweep.
struct TENFOLD_API TuckerProgress {
  /// The algorithm that ran the step: sthosvd (HOOI's start included), hosvd or hooi.
  TuckerMethod stage = TuckerMethod::sthosvd;
  int step = 0;   ///< 1-based count of the call's steps
  int sweep = 0;  ///< HOOI's 1-based sweep; 0 in the sthosvd or hosvd stage
  int mode = 0;   ///< the mode whose factor the step computed (the input's mode order)
  /// ||X - X^|| / ||X|| when the step completes a model, NaN otherwise. ST-HOSVD: after
  /// every step, of the tensor truncated in the modes processed so far (the last one is
  /// the result's); HOSVD: at its last step; HOOI: at the last step of a sweep.
  double relative_error = 0.0;
  double seconds = 0.0;  ///< wall time since the start of the call
};

/// Options of tucker(). Give exactly one of `ranks` and `eps`.
struct TENFOLD_API TuckerOptions {
  TuckerMethod method = TuckerMethod::sthosvd;
  /// Multilinear ranks, one per mode, 1 <= r_n <= min(I_n, prod_{m != n} I_m) (the
  /// mode-n unfolding's rank can be no larger).
  std::vector<index_t> ranks;
  /// Relative error tolerance in (0, 1): each mode keeps the fewest leading
  /// eigenvectors whose discarded eigenvalues sum to at most eps^2 ||X||^2 / N,
  /// which guarantees ||X - X^|| <= eps ||X|| (HOOI keeps the ranks so chosen). Budgets
  /// below the eigenvalues' accuracy (sqrt(machine epsilon) of the Gram's trace) are
  /// met with the projections' energies instead (docs/tucker.md).
  std::optional<double> eps;
  /// Order in which ST-HOSVD (and HOOI's start) processes the modes: a permutation
  /// of 0..N-1. Empty: automatic (with ranks, decreasing I_n / r_n; with eps,
  /// decreasing I_n; ties in mode order). HOSVD does not depend on it.
  std::vector<int> mode_order;
  int max_iters = 50;  ///< HOOI: most sweeps (>= 1)
  double tol = 1e-6;   ///< HOOI: stop when a sweep lowers the relative error by less (>= 0)
  /// The NumPy-order entry. row_major: the input is a C-order array seen as its
  /// reversed column-major tensor (mode n is NumPy axis N-1-n, as io::load_npy returns
  /// it). The automatic mode order (and its ties) and the HOOI sweeps then follow the
  /// NumPy axes. The input is read as row_major_input says: as its column-major copy
  /// in axis order (the result is bit-identical to that of the array's Fortran-order
  /// copy passed with col_major) or in place (no copy; equal to it up to rounding).
  /// ranks, mode_order and the result (factors, core, eigenvalues, mode_order) stay in
  /// the input's mode order.
  Layout layout = Layout::col_major;
  /// row_major input: copied up to kRowMajorCopyMaxBytes, read in place above
  /// (automatic), or as chosen.
  RowMajorInput row_major_input = RowMajorInput::automatic;
  Backend backend = Backend::cpu;
  /// Called after every step (see TuckerProgress), which bounds the time between two
  /// calls by one mode's Gram, eigensolver and TTM; return false to stop. HOOI then
  /// returns the last complete model: the last full sweep, or its ST-HOSVD start
  /// (iterations = 0) when stopped before the first sweep ended, with stop =
  /// TuckerStop::callback and converged = false (a false at the sweep where tol was
  /// reached still counts as converged). ST-HOSVD and HOSVD have no model before
  /// their last step: a false at any earlier step throws Cancelled; a false at their
  /// last step is too late to stop anything, and the result is returned. Exceptions
  /// from the callback propagate out of tucker(). (The distributed tucker of
  /// tenfold/mpi.hpp does not call it.)
  std::function<bool(const TuckerProgress&)> callback;
};

/// Wall-clock seconds spent in each phase.
struct TENFOLD_API TuckerTimings {
  double gram = 0.0;   ///< mode Grams X_(n) X_(n)^T (syrk)
  double eig = 0.0;    ///< symmetric eigensolver and truncation
  double ttm = 0.0;    ///< tensor-times-matrix products (shrinking, core, HOOI contractions)
  double total = 0.0;  ///< whole call, including validation and data transfers
};

/// Result of tucker().
template <class T>
struct TENFOLD_API TuckerResult {
  /// Orthonormal factors, core G = X x_0 U_0^T ...; signs fixed: the largest-magnitude
  /// entry of every factor column is positive (the core's matching slice negated with it).
  TTensor<T> model;
  /// Per mode, all I_n eigenvalues (squared singular values, descending, negatives
  /// from round-off clamped to 0) of the Gram that the truncation of that mode saw:
  /// the full tensor's for HOSVD, the partly shrunk tensor's for ST-HOSVD and for
  /// HOOI's start.
  std::vector<std::vector<double>> eigenvalues;
  /// ||X - X^|| / ||X|| = sqrt(||X||^2 - ||G||^2) / ||X|| (clamped at 0), or below
  /// 16 sqrt(machine epsilon) of T, where that difference cancels, from the formed
  /// residual X - X^ for tensors of at most 64 MiB (docs/tucker.md, "The reported
  /// error"). 0 for a zero tensor.
  double relative_error = 0.0;
  /// numel(X) / (numel(G) + sum_n I_n r_n).
  double compression_ratio = 0.0;
  std::vector<int> mode_order;  ///< order in which ST-HOSVD processed the modes
  int iterations = 0;           ///< HOOI sweeps (0 for sthosvd and hosvd)
  bool converged = false;       ///< stop == TuckerStop::converged
  TuckerStop stop = TuckerStop::converged;
  /// HOOI: relative error of the ST-HOSVD start, then after each sweep; empty otherwise.
  std::vector<double> error_history;
  TuckerTimings timings;
};

/// Tucker decomposition of a dense tensor (order >= 2, all sizes >= 1, finite
/// entries). Throws InvalidArgument / DimensionMismatch on bad input or options,
/// MemoryError, before allocating, when the estimated memory (Grams with the
/// eigensolver's workspace, TTM intermediates, the device copy) cannot fit, and
/// Cancelled when the callback stops ST-HOSVD or HOSVD before their last step.
template <class T>
TENFOLD_API TuckerResult<T> tucker(TensorView<const T> x, const TuckerOptions& options);

template <class T>
TuckerResult<T> tucker(const Tensor<T>& x, const TuckerOptions& options) {
  return tucker(x.view(), options);
}

/// CP-ALS of a tensor given in Tucker form, never formed: each MTTKRP goes through
/// the core (U_n times the core's MTTKRP with the factors U_m^T A_m), norms and
/// inner products come from the core and the factor Grams. Exact for the tensor the
/// model represents; when the model is a lossy compression of some X, the result is
/// CP of the approximation (see docs/tucker.md).
template <class T>
TENFOLD_API CpResult<T> cp_als(const TTensor<T>& x, const CpOptions& options,
                               CpStart<T> initial_factors = {});

}  // namespace tenfold
