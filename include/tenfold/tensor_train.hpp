// Tensor train (TT, also matrix product state) by TT-SVD (Oseledets, "Tensor-train
// decomposition", SIAM J. Sci. Comput. 33(5), 2011), with given ranks or a relative
// error bound, and the TT model's full tensor, norm and inner products from its cores.
// See docs/decompositions.md, "Tensor train".
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "tenfold/backend.hpp"
#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold {

/// Tensor train X(i_0, ..., i_{N-1}) = G_0(:, i_0, :) G_1(:, i_1, :) ... G_{N-1}(:, i_{N-1}, :):
/// core k is a column-major tensor of shape (r_k, I_k, r_{k+1}) with r_0 = r_N = 1.
/// The cores of a C-order NumPy array's TT, in NumPy axis order and as C-order arrays of
/// shape (r_k, I_k, r_{k+1}), are the same memory as this TT of the reversed
/// (column-major) tensor, its cores in reverse order.
template <class T>
struct TENFOLD_API TensorTrain {
  std::vector<Tensor<T>> cores;

  TensorTrain() = default;
  explicit TensorTrain(std::vector<Tensor<T>> c) : cores(std::move(c)) {}

  int order() const { return static_cast<int>(cores.size()); }
  /// Mode sizes I_n (the cores' middle sizes).
  std::vector<index_t> dims() const;
  /// TT ranks r_0 = 1, r_1, ..., r_N = 1 (N + 1 entries).
  std::vector<index_t> ranks() const;

  /// Throws InvalidArgument / DimensionMismatch unless the model is well formed: at
  /// least one core, every core of order 3 with sizes >= 1, r_0 = r_N = 1, consecutive
  /// cores chained (core k's last size is core k+1's first), finite entries.
  void validate() const;

  /// Dense tensor (size prod I_n; mind the memory).
  Tensor<T> full() const;

  /// Frobenius norm from the cores, in double: ||X||^2 = <X, X> (see inner).
  double norm() const;

  /// <X, this> for a dense tensor of the model's shape, without forming the model: the
  /// tensor contracted with the cores from the first mode on, in double at the end.
  double inner(TensorView<const T> x) const;

  /// <other, this> of two TTs of the same shape, from the cores only: M_0 = 1,
  /// M_{k+1} = sum_i G_k(:, i, :)^T M_k H_k(:, i, :), <X, Y> = M_N (O(N I r^3) work).
  double inner(const TensorTrain<T>& other) const;
};

/// Options of tensor_train(). Give exactly one of `ranks` and `eps`.
struct TENFOLD_API TensorTrainOptions {
  /// Largest TT ranks r_0, ..., r_N (N + 1 entries, r_0 = r_N = 1, every r_k >= 1), in the
  /// view's mode order. As TensorLy's: bond k keeps min(r_k, r_{k-1} I_{k-1}, prod_{m >= k}
  /// I_m) singular vectors (the unfolding allows no more), so a larger value is allowed
  /// and clipped.
  std::vector<index_t> ranks;
  /// Relative error bound in (0, 1): each of the N - 1 bonds keeps the fewest singular
  /// vectors whose discarded squared singular values sum to at most eps^2 ||X||^2 / (N - 1),
  /// which guarantees ||X - X^|| <= eps ||X||.
  std::optional<double> eps;
  /// The sweep's direction. col_major: from mode 0 to mode N-1 (the bond k unfolding has
  /// rows (r_k, I_k), columns the modes after). row_major (a C-order array seen as its
  /// reversed column-major tensor, as io::load_npy returns it): from NumPy axis 0, the
  /// view's last mode, to its first, which is TensorLy's tensor_train of the array. The
  /// tensor is read in place either way; ranks and the result stay in the view's order.
  Layout layout = Layout::col_major;
  Backend backend = Backend::cpu;
};

/// Wall-clock seconds spent in each phase.
struct TENFOLD_API TensorTrainTimings {
  double gram = 0.0;      ///< Grams of the unfoldings (syrk)
  double eig = 0.0;       ///< symmetric eigensolver, truncation, orthonormalisation
  double contract = 0.0;  ///< the remainders U^T W (gemm)
  double total = 0.0;     ///< whole call, including validation and data transfers
};

/// Result of tensor_train().
template <class T>
struct TENFOLD_API TensorTrainResult {
  /// The cores; all but the last one swept (core N-1 for col_major, core 0 for row_major)
  /// have orthonormal unfoldings, and every singular-vector column has its
  /// largest-magnitude entry positive (first on ties, as TensorLy's svd_flip).
  TensorTrain<T> model;
  /// Per bond in sweep order, all singular values of the unfolding that bond was cut from
  /// (descending; from the eigenvalues of its Gram, so accurate to about
  /// sqrt(machine epsilon) of the largest).
  std::vector<std::vector<double>> singular_values;
  /// ||X - X^|| / ||X|| = sqrt(max(0, ||X||^2 - ||X^||^2)) / ||X|| (the sweep is a
  /// sequence of orthogonal projections), accurate to about sqrt(machine epsilon); 0 for a
  /// zero tensor.
  double relative_error = 0.0;
  /// numel(X) / (numbers stored in the cores).
  double compression_ratio = 0.0;
  TensorTrainTimings timings;
};

/// TT-SVD of a dense tensor (order >= 2, all sizes >= 1, finite entries). Throws
/// InvalidArgument / DimensionMismatch on bad input or options, MemoryError, before
/// allocating, when the estimated memory cannot fit.
template <class T>
TENFOLD_API TensorTrainResult<T> tensor_train(TensorView<const T> x,
                                              const TensorTrainOptions& options);

template <class T>
TensorTrainResult<T> tensor_train(const Tensor<T>& x, const TensorTrainOptions& options) {
  return tensor_train(x.view(), options);
}

}  // namespace tenfold
