// Coupled matrix-tensor factorisation (CMTF) by ALS, as TensorLy 0.10's
// coupled_matrix_tensor_3d_factorization: a 3-way tensor X (I x J x K) and a matrix
// Y (I x M) sharing their first mode,
//   X ~ [[A, B, C]],   Y ~ A V^T,
// fitted together (Acar, Kolda and Dunlavy 2011), with missing entries in either by EM.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "tenfold/backend.hpp"
#include "tenfold/export.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold {

/// How A, B, C start (V is solved from A first).
enum class CmtfInit {
  /// B and C the leading R eigenvectors of X_(1) X_(1)^T and X_(2) X_(2)^T, A those of
  /// Z Z^T for Z = [X_(0), Y] times the square roots of their eigenvalues (TensorLy's "svd":
  /// the left singular vectors, the first mode's scaled by the singular values); random
  /// columns in [0, 1) past a mode's size
  svd,
  random,  ///< entries uniform in [0, 1) from `seed`
  given,   ///< the start passed to cmtf (CmtfStart)
};

/// Options of cmtf; the defaults are TensorLy 0.10's.
struct TENFOLD_API CmtfOptions {
  index_t rank = 1;     ///< components R, 1 <= R <= max_cp_rank of the tensor
  int max_iters = 100;  ///< iterations, >= 1
  /// Stop when the squared error e changes by at most tol e_previous, or e < tol (>= 0).
  double tol = 1e-6;
  CmtfInit init = CmtfInit::svd;  ///< given when a start is passed
  std::uint64_t seed = 0;         ///< seed of the random start
  /// row_major: the tensor view is the C-order array (I, J, K) as column-major K x J x I,
  /// the matrix view the C-order (I, M) as M x I, the masks likewise.
  Layout layout = Layout::col_major;
  Backend backend = Backend::cpu;
};

/// Result of cmtf.
template <class T>
struct TENFOLD_API CmtfResult {
  KTensor<T> tensor_model;  ///< [[A, B, C]], weights ones
  KTensor<T> matrix_model;  ///< [[A, V]], weights ones
  /// TensorLy's list: ||X - [[A, B, C]]||^2 + ||Y - A V^T||^2 (over the observed entries)
  /// after every iteration but the one that stops on tol.
  std::vector<double> error_history;
  /// sqrt of the last iteration's squared error over ||(X, Y)|| (observed entries).
  double relative_error = 0.0;
  int iterations = 0;
  bool converged = false;  ///< stopped by tol
  double seconds = 0.0;
};

/// The start of cmtf: A (I x R), B (J x R), C (K x R), or none (empty).
template <class T>
using CmtfStart = std::type_identity_t<std::span<const Matrix<T>>>;

/// CMTF of a 3-way tensor and a matrix with the same first mode (T float or double, finite
/// entries). Each iteration, as TensorLy's: V = Y^T A (A^T A)^{-1}; C, B, then A by least
/// squares, A from [X_(0), Y] ~ A [C (.) B; V]^T; every update is one pass of the CP-ALS loop
/// with the other factors fixed. The inputs are copied once (one I x (JK + M) matrix) and not
/// modified. Throws InvalidArgument (DimensionMismatch for shapes).
template <class T>
TENFOLD_API CmtfResult<T> cmtf(TensorView<const T> x, TensorView<const T> y,
                               const CmtfOptions& options, CmtfStart<T> start = {});

/// CMTF with missing entries: `observed_x` and `observed_y` have the shapes of x and y, an
/// entry counts where non-zero (a missing one may hold anything, NaN included). EM: missing
/// entries start at the mean of all observed ones and take the model's values after every
/// iteration; errors are over the observed entries.
template <class T>
TENFOLD_API CmtfResult<T> cmtf(TensorView<const T> x, TensorView<const T> y,
                               TensorView<const std::uint8_t> observed_x,
                               TensorView<const std::uint8_t> observed_y,
                               const CmtfOptions& options, CmtfStart<T> start = {});

}  // namespace tenfold
