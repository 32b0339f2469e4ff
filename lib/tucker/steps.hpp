// The building blocks of the Tucker algorithms, written once over a Compute backend.
#pragma once

#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include "core/compute.hpp"
#include "core/dense_mttkrp.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::detail {

/// How a mode's rank is chosen: the given ranks, or (ranks empty) the fewest
/// leading eigenvectors whose discarded eigenvalues sum to at most max_discarded.
struct Truncation {
  std::vector<index_t> ranks;
  double max_discarded = 0.0;
};

/// Runs step(), waits for the backend c and adds the elapsed seconds to acc.
template <class T, class F>
void timed(Compute<T>& c, double& acc, F&& step) {
  const auto t0 = std::chrono::steady_clock::now();
  step();
  c.synchronize();
  acc += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The input on the backend, the model being built (in backend memory) and timings.
template <class T>
struct TuckerState {
  TuckerState(Compute<T>& compute, TensorView<const T> tensor);

  /// timed(c, acc, step)
  template <class F>
  void timed(double& acc, F&& step) {
    detail::timed(c, acc, std::forward<F>(step));
  }

  /// ||X - X^|| / ||X|| of the model (orthonormal factors, G = X x_0 U_0^T ...):
  /// sqrt(max(0, ||X||^2 - ||G||^2)) / ||X||, which cancels (its absolute error is
  /// about sqrt(eps) ||X||), so below kDirectErrorBelow sqrt(eps) it is recomputed from
  /// the residual X - G x_0 U_0 ... itself (accurate to about eps ||X||; two tensors
  /// more of memory, so only for tensors of at most kFormedResidualMaxBytes and when
  /// the memory is available). Uses work0 and work1.
  double relative_error();
  /// The same for X^ = Y x_n U_n ... over some modes, with Y (numel entries, backend
  /// memory) = X x_n U_n^T ... : X^ is X's orthogonal projection, so ||X - X^||^2 =
  /// ||X||^2 - ||Y||^2.
  double relative_error(const T* y, index_t numel);

  /// After a step of `stage` that computed mode n's factor: the progress callback, if
  /// any, with `error` (NaN when no model is complete); returns whether to go on.
  bool report(TuckerMethod stage, int sweep, int n, double error);
  /// Throws Cancelled for a callback that stopped `stage` at step k of its `steps`.
  [[noreturn]] void cancelled(TuckerMethod stage, int k, int steps) const;

  Compute<T>& c;
  std::vector<index_t> dims;
  DeviceTensor<T> x;  ///< X on the backend, with its norm
  double norm_x2 = 0.0;
  std::vector<index_t> ranks;  ///< r_n, set when mode n is truncated
  std::vector<Buffer<T>> u;    ///< U_n (I_n x r_n)
  Buffer<T> core;              ///< G, of shape ranks
  std::vector<std::vector<double>> eigenvalues;
  TuckerTimings timings;
  Buffer<T> gram, work0, work1;
  /// The options' progress callback (may be empty), the start of the call, steps so far.
  std::function<bool(const TuckerProgress&)> callback;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int steps = 0;
};

/// Throws InvalidArgument / DimensionMismatch for a shape or options tucker() refuses
/// (everything but the entries).
void validate_tucker_options(const std::vector<index_t>& dims, const TuckerOptions& o);

/// The order in which ST-HOSVD processes the modes (o.mode_order, or automatic).
std::vector<int> choose_mode_order(const std::vector<index_t>& dims, const TuckerOptions& o);

/// Relative errors below this multiple of sqrt(eps) are computed from the residual.
inline constexpr double kDirectErrorBelow = 16.0;
/// Largest tensor (in bytes) whose residual is formed for that (it takes two tensors
/// more of memory).
inline constexpr std::size_t kFormedResidualMaxBytes = std::size_t{64} << 20;

/// For the eigenvectors v_i of a mode's Gram (in x in, backend memory, ascending
/// eigenvalues): ||v_i^T Y_(n)||^2 in descending order of the eigenvalues.
template <class T>
using ProjectedEnergies = std::function<std::vector<double>(const T* vectors)>;

/// From the Gram g (in x in, backend memory, overwritten) of mode n: u (in x r) = its
/// leading eigenvectors, largest first, r given by t; returns r, with all eigenvalues
/// (descending, negatives clamped to 0) in lambda. The eigenvalues of a computed Gram
/// are accurate only to about eps trace(g) absolutely, so when t.max_discarded is below
/// sqrt(eps) trace(g) the discarded sums come from `energies` (if given) instead: the
/// energies of the projections, accurate to about eps^2 trace(g).
template <class T>
index_t truncate_gram(Compute<T>& c, T* g, index_t in, int n, const Truncation& t, Buffer<T>& u,
                      std::vector<double>& lambda, const ProjectedEnergies<T>& energies = {});

/// U_n = the leading eigenvectors of Y_(n) Y_(n)^T, with Y (shape ydims, ydims[n] =
/// I_n) in backend memory; sets ranks[n] and, when `record`, eigenvalues[n].
template <class T>
void truncate_mode(TuckerState<T>& s, const T* y, const std::vector<index_t>& ydims, int n,
                   const Truncation& t, bool record);

/// ST-HOSVD: modes in `order`, each truncated on the tensor shrunk by the previous ones.
/// Throws Cancelled when the callback stops a step before the last; returns its answer
/// after the last.
template <class T>
bool sthosvd(TuckerState<T>& s, const Truncation& t, const std::vector<int>& order);

/// HOSVD: every mode truncated on the full tensor, then the core. Throws Cancelled when
/// the callback stops a step before the last.
template <class T>
void hosvd(TuckerState<T>& s, const Truncation& t);

/// Fixes the signs of a Tucker model without changing it: the largest-magnitude entry of
/// every factor column made positive (the first one on ties), by negating the column
/// and the core's slice that multiplies it. The eigensolvers' signs are arbitrary, so
/// this makes backends, memory orders and process counts agree on the factors.
template <class T>
void fix_signs(TTensor<T>& model);

struct HooiOutcome {
  int iterations = 0;
  TuckerStop stop = TuckerStop::max_iters;
};

/// HOOI sweeps from the model in `s` (ranks fixed), each updating the modes in the
/// order `sweep` (a permutation); tol = 0 runs all max_iters. error_history receives
/// the start's relative error, then one per sweep. When the callback stops a sweep
/// half-way, `s` is set back to the last complete model.
template <class T>
HooiOutcome hooi(TuckerState<T>& s, const std::vector<int>& sweep, int max_iters, double tol,
                 std::vector<double>& error_history);

}  // namespace tenfold::detail
