// PARAFAC2 by alternating least squares (Kiers, ten Berge and Bro 1999), as TensorLy's
// parafac2: slices X_k (I_k x J, the row counts I_k may differ) modelled as
//   X_k ~ P_k B diag(a_k) C^T,   P_k^T P_k = I (I_k x R),
// A (K x R, row k = a_k), B (R x R) and C (J x R) shared by every slice.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "tenfold/backend.hpp"
#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold {

/// How the factors A, B, C start.
enum class Parafac2Init {
  /// A = ones, B = I, C the leading R eigenvectors of sum_k X_k^T X_k (TensorLy's "svd";
  /// with missing entries, of the slices filled with their observed means)
  svd,
  random,  ///< A, B, C uniform in [0, 1) from `seed` (as TensorLy's random_parafac2)
  given,   ///< the start passed to parafac2 (Parafac2Start)
};

/// Options of parafac2. The defaults are TensorLy 0.10's, except the start (svd, which is
/// deterministic and recovers planted models more often than one random start).
struct TENFOLD_API Parafac2Options {
  index_t rank = 1;      ///< components R, 1 <= R <= J
  int max_iters = 2000;  ///< outer iterations (projections, then the inner CP), >= 0
  /// ALS sweeps of the CP of the projected slices per outer iteration (TensorLy's
  /// n_iter_parafac), >= 1. Each sweep updates A, B and C in turn through the library's
  /// CP-ALS loop, at the scales TensorLy's unnormalised factors have.
  int inner_iters = 5;
  /// Stop when two successive relative errors differ by less than tol (>= 0; 0 runs
  /// max_iters iterations).
  double tol = 1e-8;
  Parafac2Init init = Parafac2Init::svd;  ///< given when a start is passed
  std::uint64_t seed = 0;                 ///< seed of the random start
  /// Bro's extrapolation as TensorLy's linesearch: every second iteration after the sixth
  /// (0-based it > 5, even), A, B, C move to F_last + j (F - F_last), j = it^(1/p)
  /// (p from 2, raised by one after 4 rejections in a row), with modes 0 and 2 of
  /// nonnegative_modes clipped at 0; kept when its error is below the last one recorded.
  bool line_search = true;
  /// TensorLy's normalize_factors: after every iteration the columns of A, B and C to unit
  /// norm, their norms into the weights (which B takes back at the next iteration).
  bool normalize = false;
  /// Non-negative modes (0: A, 1: B, 2: C): their inner updates are HALS. B >= 0 does not
  /// make the B_k = P_k B non-negative (as in TensorLy).
  std::vector<int> nonnegative_modes;
  /// row_major: every slice view is the C-order array (I_k, J) seen as column-major
  /// J x I_k (and every mask likewise); col_major: slices are I_k x J.
  Layout layout = Layout::col_major;
  Backend backend = Backend::cpu;
};

/// The model: X_k ~ P_k B diag(weights o a_k) C^T.
template <class T>
struct TENFOLD_API Parafac2Model {
  std::vector<T> weights;  ///< R; ones unless Parafac2Options::normalize
  Matrix<T> a;             ///< K x R
  Matrix<T> b;             ///< R x R
  Matrix<T> c;             ///< J x R
  std::vector<Matrix<T>>
      projections;  ///< P_k, I_k x R (orthonormal columns, or rows where I_k < R)
};

/// Result of parafac2.
template <class T>
struct TENFOLD_API Parafac2Result {
  Parafac2Model<T> model;
  /// TensorLy's error list: ||X - M|| / ||X|| (over the observed entries with a mask)
  /// after every iteration that tries no jump; an iteration that tries one records
  /// nothing and replaces the last entry by the jump's error when it keeps the jump.
  std::vector<double> error_history;
  double relative_error = 0.0;  ///< of the returned model
  int iterations = 0;
  bool converged = false;        ///< stopped by tol
  int line_search_accepted = 0;  ///< jumps kept
  double seconds = 0.0;
};

/// The start of parafac2: A (K x R), B (R x R), C (J x R), or none (empty).
template <class T>
using Parafac2Start = std::type_identity_t<std::span<const Matrix<T>>>;

/// PARAFAC2 of K >= 1 slices with the same column count J (row counts I_k >= 1 free;
/// T float or double; finite entries). Per outer iteration: P_k the polar factor of
/// X_k C diag(a_k) B^T (orthogonal Procrustes, by an SVD per slice), the projected
/// slices Y_k = P_k^T X_k (R x J) stacked into a K x R x J tensor, `inner_iters` ALS sweeps
/// of its CP. The slices are not modified. Throws InvalidArgument (DimensionMismatch
/// for shapes) naming the slice and index.
template <class T>
TENFOLD_API Parafac2Result<T> parafac2(std::span<const TensorView<const T>> slices,
                                       const Parafac2Options& options, Parafac2Start<T> start = {});

/// PARAFAC2 with missing entries by EM: `observed[k]` has slice k's shape, an entry counts
/// where it is non-zero (a missing entry may hold anything, NaN included). Missing
/// entries start at their slice's observed mean (the observed mean of all slices for a
/// slice with none) and take the model's values after every iteration; errors are over
/// the observed entries.
template <class T>
TENFOLD_API Parafac2Result<T> parafac2(std::span<const TensorView<const T>> slices,
                                       std::span<const TensorView<const std::uint8_t>> observed,
                                       const Parafac2Options& options, Parafac2Start<T> start = {});

}  // namespace tenfold
