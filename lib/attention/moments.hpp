// Input second moments of the data-aware objective: validation, the damped Cholesky
// factor that whitens the Kruskal operand, and the way back to the input space.
#pragma once

#include <string_view>

#include "attention/heads.hpp"

namespace tenfold::attention::detail {

/// True when `s` is c I for some c (off-diagonal entries exactly zero, equal diagonal).
bool is_scaled_identity(const Matrix<double>& s);

/// The lower Cholesky factor L (upper triangle zero) of S + damping tr(S) / D I.
/// Throws NumericalError naming `what` when that matrix is not positive definite.
Matrix<double> damped_cholesky(const Matrix<double>& s, double damping, std::string_view what);

/// A factor F (D x D) with F F^T = S for a positive semi-definite S: V diag(sqrt(max(lambda, 0)))
/// from its eigendecomposition, so a singular S is fine.
Matrix<double> psd_factor(const Matrix<double>& s);

/// F^T W, in double.
Matrix<double> transform(const Matrix<double>& f, const Matrix<double>& w);

/// The layer with W_Q <- L_Q^T W_Q and W_K <- L_K^T W_K (computed in double), no biases.
template <class T>
QueryKeyLayer<T> whitened(const QueryKeyLayer<T>& layer, const Matrix<double>& lq,
                          const Matrix<double>& lk);

/// Maps a collaborative layer fitted in the whitened space back: W~_Q = L_Q^{-T} A,
/// W~_K = L_K^{-T} B by triangular solves, columns renormalised to unit length with
/// their norms moved into the mixing.
template <class T>
void unwhiten(CollaborativeLayer<T>& collab, const Matrix<double>& lq, const Matrix<double>& lk);

}  // namespace tenfold::attention::detail
