// KTensor: a tensor in CP (Kruskal) form, sum_r lambda_r a_r^(0) o a_r^(1) o ...
#pragma once

#include <cstdint>
#include <vector>

#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold {

/// CP model: weights lambda (length R) and one I_n x R factor matrix per mode. For
/// T = std::complex<float/double> (results of complex CP-ALS) the library compiles
/// dims, validate and full only.
template <class T>
struct TENFOLD_API KTensor {
  std::vector<T> weights;
  std::vector<Matrix<T>> factors;

  KTensor() = default;
  KTensor(std::vector<T> w, std::vector<Matrix<T>> f)
      : weights(std::move(w)), factors(std::move(f)) {}

  int order() const { return static_cast<int>(factors.size()); }
  index_t rank() const { return static_cast<index_t>(weights.size()); }
  std::vector<index_t> dims() const;

  /// Throws InvalidArgument / DimensionMismatch unless the model is well formed:
  /// order >= 1, rank >= 1, every factor with R columns and at least one row.
  void validate() const;

  /// Dense tensor sum_r lambda_r a_r^(0) o ... (size prod I_n; mind the memory).
  Tensor<T> full() const;

  /// Frobenius norm from the factors' Gram matrices (no dense tensor), in double.
  double norm() const;

  /// <X, this>, without forming the model, accumulated in double.
  double inner(TensorView<const T> x) const;
};

/// Options of factor_match_score.
struct TENFOLD_API FmsOptions {
  /// Multiply each component's congruence by the weight penalty
  /// 1 - |l_a - l_b| / max(l_a, l_b) (as the Tensor Toolbox `score` does), where l is
  /// a component's weight after normalisation, |lambda_r| prod_n ||a_r^(n)||.
  bool weight_penalty = false;
};

/// Factor match score of two CP models of the same shape (ranks may differ:
/// the smaller is matched into the larger). Components are normalised, the
/// congruence of a pair is the product over modes of |cosine| of their
/// columns, the optimal one-to-one matching is found exactly (Hungarian
/// algorithm), and the score is the mean congruence over matched pairs, in [0, 1].
/// A component with a zero column has congruence 0. Throws InvalidArgument for a
/// malformed model (KTensor::validate), DimensionMismatch for different shapes.
template <class T>
TENFOLD_API double factor_match_score(const KTensor<T>& a, const KTensor<T>& b,
                                      const FmsOptions& options = {});

/// Two components of a CP model and their signed congruence: the product over modes
/// of the cosines between their columns, times the signs of their weights, in
/// [-1, 1]. Near -1 the two components nearly cancel each other: a two-factor
/// degeneracy (Kruskal, Harshman and Lundy 1989), typical of a rank with no best
/// approximation, where the weights grow without the fit improving.
struct TENFOLD_API ComponentPair {
  index_t first = 0;
  index_t second = 0;
  double congruence = 1.0;
};

/// The pair of distinct components with the most negative congruence ({0, 0, 1} for
/// a rank-one model). A component with a zero column has congruence 0 with every
/// other. The result does not depend on the order of the modes, to the last bit. Throws
/// InvalidArgument for a malformed model (KTensor::validate).
template <class T>
TENFOLD_API ComponentPair most_negative_congruence(const KTensor<T>& model);

/// Options of random_cp_tensor.
struct TENFOLD_API RandomCpOptions {
  std::vector<index_t> dims;  ///< mode sizes (order >= 2)
  index_t rank = 1;           ///< number of components
  double collinearity = 0.0;  ///< cosine between any two columns of a factor, in [0, 1)
  double noise = 0.0;         ///< ||N|| / ||X_true||, >= 0
  std::uint64_t seed = 0;
};

/// A planted CP problem: the true model and the tensor it generates plus noise.
template <class T>
struct TENFOLD_API RandomCpProblem {
  KTensor<T> truth;         ///< unit-norm columns, weights uniform in [1, 2)
  Tensor<T> tensor;         ///< full(truth) + noise scaled to `noise` relative norm
  double noise_norm = 0.0;  ///< ||tensor - full(truth)||
};

/// Random CP tensor with factors of prescribed column collinearity (Tomasi and
/// Bro's construction: columns with pairwise cosine `collinearity` exactly) and
/// Gaussian noise of prescribed relative norm. Deterministic for a given seed; the
/// truth does not depend on `noise`. Needs rank <= I_n in every mode; throws
/// InvalidArgument (naming the option or mode) otherwise or for values out of range.
template <class T>
TENFOLD_API RandomCpProblem<T> random_cp_tensor(const RandomCpOptions& options);

}  // namespace tenfold
