// Non-negative Tucker decomposition: min ||X - G x_0 U_0 ... x_{N-1} U_{N-1}|| over G >= 0,
// U_n >= 0, by the multiplicative updates of Kim and Choi (CVPR 2007) or by HALS on the
// factors (Cichocki and Phan 2009) with FISTA on the core (Beck and Teboulle 2009), as
// TensorLy 0.10's non_negative_tucker and non_negative_tucker_hals. See
// docs/decompositions.md, "Non-negative Tucker".
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "tenfold/backend.hpp"
#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold {

/// How nonnegative_tucker() updates the model.
enum class NonnegativeTuckerMethod {
  /// Per mode U_n <- U_n .* max(M_n, e) ./ max(U_n V_n, e), then the core alike
  /// (TensorLy's non_negative_tucker; e = 1e-11).
  multiplicative,
  /// Per mode a few HALS passes over U_n's columns, then FISTA on the core
  /// (TensorLy's non_negative_tucker_hals with algorithm='fista').
  hals,
};
/// "multiplicative" or "hals".
TENFOLD_API std::string_view to_string(NonnegativeTuckerMethod method);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API NonnegativeTuckerMethod parse_nonnegative_tucker_method(std::string_view name);

/// How the HALS method updates the core.
enum class NonnegativeTuckerCoreSolver {
  /// FISTA passes (TensorLy's algorithm='fista'): projected accelerated gradient steps.
  fista,
  /// TensorLy's active_set_nnls (algorithm='active_set', Bro and de Jong 1997) on the normal
  /// equations with the Kronecker product of the Grams: prod r_n squared doubles of memory.
  active_set,
};

/// The start of nonnegative_tucker() when none is given.
enum class NonnegativeTuckerInit {
  /// |U_n| of ST-HOSVD's factors (the leading singular vectors of each unfolding), and
  /// the core |X x_0 |U_0|^T ...|. (TensorLy's own 'svd' start is NNDSVD; the TensorLy
  /// patch passes it as a given start.)
  svd,
  /// Factors uniform in [0, 1), the core uniform in [0.01, 1.01), from `seed`.
  random,
};

/// What the progress callback sees after each iteration.
struct TENFOLD_API NonnegativeTuckerProgress {
  int iteration = 0;            ///< 1-based
  double relative_error = 0.0;  ///< ||X - X^|| / ||X|| of the model after the iteration
  double seconds = 0.0;         ///< wall time since the start of the call
};

/// Options of nonnegative_tucker().
struct TENFOLD_API NonnegativeTuckerOptions {
  /// Multilinear ranks, one per mode, 1 <= r_n <= I_n.
  std::vector<index_t> ranks;
  NonnegativeTuckerMethod method = NonnegativeTuckerMethod::hals;
  int max_iters = 100;  ///< most iterations (>= 0; 0 returns the start)
  /// Stop after iteration k >= 3 when |e_{k-1} - e_k| < tol for the relative errors e (as
  /// TensorLy; finite, >= 0; 0 runs max_iters).
  double tol = 1e-8;
  NonnegativeTuckerCoreSolver core_solver = NonnegativeTuckerCoreSolver::fista;
  /// HALS: most passes of the core solver per iteration (0: max_iters, as TensorLy). FISTA
  /// stops earlier when |sum(G_old - G_new)| falls below 1e-8 of the first pass's, the
  /// active set when no active coordinate's gradient exceeds 1e-7.
  int core_iters = 0;
  /// After every iteration but a converged one: factor columns scaled to unit 2-norm, the
  /// scales moved into the core (TensorLy's normalize_factors).
  bool normalize_factors = false;
  NonnegativeTuckerInit init = NonnegativeTuckerInit::svd;
  std::uint64_t seed = 0;  ///< of the random start
  /// The NumPy-order entry (as TuckerOptions::layout): row_major input is a C-order array
  /// seen as its reversed column-major tensor; the sweeps then visit the modes in NumPy
  /// axis order (the view's last mode first). ranks, a given start and the result stay in
  /// the view's mode order. The tensor is read in place either way.
  Layout layout = Layout::col_major;
  Backend backend = Backend::cpu;
  /// Called after every iteration; return false to stop (the model of that iteration is
  /// returned, converged = false).
  std::function<bool(const NonnegativeTuckerProgress&)> callback;
};

/// Result of nonnegative_tucker().
template <class T>
struct TENFOLD_API NonnegativeTuckerResult {
  TTensor<T> model;                   ///< core and factors, every entry >= 0
  std::vector<double> error_history;  ///< ||X - X^|| / ||X|| after each iteration
  double relative_error = 0.0;        ///< the last of them (of the start when no iteration ran)
  int iterations = 0;
  bool converged = false;  ///< stopped by tol
  double seconds = 0.0;
};

/// Non-negative Tucker decomposition of a dense tensor (order >= 2, sizes >= 1, finite
/// entries; negative entries are allowed, as TensorLy allows them, and only fit worse).
/// `start` (optional): core of shape ranks and I_n x r_n factors, every entry >= 0.
/// Throws InvalidArgument / DimensionMismatch on bad input, options or start, MemoryError
/// before allocating when the run cannot fit.
template <class T>
TENFOLD_API NonnegativeTuckerResult<T> nonnegative_tucker(TensorView<const T> x,
                                                          const NonnegativeTuckerOptions& options,
                                                          const TTensor<T>* start = nullptr);

template <class T>
NonnegativeTuckerResult<T> nonnegative_tucker(const Tensor<T>& x,
                                              const NonnegativeTuckerOptions& options,
                                              const TTensor<T>* start = nullptr) {
  return nonnegative_tucker(x.view(), options, start);
}

}  // namespace tenfold
