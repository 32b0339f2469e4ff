// Orthonormal bases and leading eigenvectors by blocked matrix products: CholeskyQR
// (and its shifted form) and a randomised subspace eigensolver, over Compute<T>.
#pragma once

#include <cstdint>

#include "core/compute.hpp"

namespace tenfold::detail {

/// Columns beyond the rank r that leading_eigenvectors_sketched draws (k = r + 10).
inline constexpr index_t kSketchOversampling = 10;

/// U (rows x k, rows >= k, backend memory) = Q of its thin QR U = Q R, by CholeskyQR2;
/// chol: k x k scratch. Where U^T U is not numerically positive definite (U of lower
/// rank, zero or not finite): with `shifted`, shifted CholeskyQR3; else, or where even
/// the shift fails, false (U then unspecified).
template <class T>
bool cholesky_qr(Compute<T>& c, index_t rows, index_t k, T* u, T* chol, bool shifted);

/// The leading r eigenvectors of a symmetric positive semidefinite G (n x n, host,
/// column-major), largest first, into u (n x r): a randomised eigensolver (the sampled
/// CP solver's nvecs start, whose Gram is itself a sample). false, u untouched, when the
/// random subspace loses rank (G of rank below about r + 10).
bool leading_eigenvectors_sketched(index_t n, const double* g, index_t r, std::uint64_t seed,
                                   double* u);

}  // namespace tenfold::detail
