// The building blocks of the Tucker algorithms, written once over a Compute backend.
#pragma once

#include <chrono>
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

/// The input on the backend, the model being built (in backend memory) and timings.
template <class T>
struct TuckerState {
  TuckerState(Compute<T>& compute, TensorView<const T> tensor);

  /// Runs step(), waits for the backend and adds the elapsed seconds to acc.
  template <class F>
  void timed(double& acc, F&& step) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    c.synchronize();
    acc += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  /// ||X - X^|| / ||X|| from ||G||: sqrt(max(0, ||X||^2 - ||G||^2)) / ||X||.
  double relative_error();

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
};

/// Throws InvalidArgument / DimensionMismatch for a shape or options tucker() refuses
/// (everything but the entries).
void validate_tucker_options(const std::vector<index_t>& dims, const TuckerOptions& o);

/// The order in which ST-HOSVD processes the modes (o.mode_order, or automatic).
std::vector<int> choose_mode_order(const std::vector<index_t>& dims, const TuckerOptions& o);

/// From the Gram g (in x in, backend memory, overwritten) of mode n: u (in x r) = its
/// leading eigenvectors, largest first, r given by t; returns r, with all eigenvalues
/// (descending, negatives clamped to 0) in lambda.
template <class T>
index_t truncate_gram(Compute<T>& c, T* g, index_t in, int n, const Truncation& t, Buffer<T>& u,
                      std::vector<double>& lambda);

/// U_n = the leading eigenvectors of Y_(n) Y_(n)^T, with Y (shape ydims, ydims[n] =
/// I_n) in backend memory; sets ranks[n] and, when `record`, eigenvalues[n].
template <class T>
void truncate_mode(TuckerState<T>& s, const T* y, const std::vector<index_t>& ydims, int n,
                   const Truncation& t, bool record);

/// ST-HOSVD: modes in `order`, each truncated on the tensor shrunk by the previous ones.
template <class T>
void sthosvd(TuckerState<T>& s, const Truncation& t, const std::vector<int>& order);

/// HOSVD: every mode truncated on the full tensor, then the core.
template <class T>
void hosvd(TuckerState<T>& s, const Truncation& t);

struct HooiOutcome {
  int iterations = 0;
  bool converged = false;
};

/// HOOI sweeps from the model in `s` (ranks fixed), each updating the modes in the
/// order `sweep` (a permutation); tol = 0 runs all max_iters. error_history receives
/// the start's relative error, then one per sweep.
template <class T>
HooiOutcome hooi(TuckerState<T>& s, const std::vector<int>& sweep, int max_iters, double tol,
                 std::vector<double>& error_history);

}  // namespace tenfold::detail
