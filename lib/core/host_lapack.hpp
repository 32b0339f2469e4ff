// Dense LAPACK drivers on the host in double, outside the backends' primitives: the
// small nonsymmetric problems of the algebraic CP start (lib/cp/gevd.cpp).
#pragma once

#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// The right eigenvectors of a general n x n matrix `a` (column-major; consumed), as
/// LAPACK's dgeev returns them: column j for a real eigenvalue, columns j and j + 1 the
/// real and imaginary parts of a complex pair's first vector. Empty when the QR
/// algorithm did not converge.
std::vector<double> general_eigenvectors(index_t n, std::vector<double> a);

/// B <- A^{-1} B for a general n x n `a` (consumed) and n x nrhs `b` (column-major), by
/// LU with partial pivoting (dgesv). False when A is exactly singular (b then unspecified).
bool solve_general(index_t n, index_t nrhs, std::vector<double> a, double* b);

/// Largest cond(A)^2 for which polar_factor takes A (A^T A)^{-1/2}: the columns are then
/// orthonormal to about 1e4 eps.
inline constexpr double kPolarGramMaxCond2 = 1e4;

/// The thin QR of an m x n matrix (column-major): `a` becomes Q (m x k, orthonormal
/// columns, k = min(m, n)); returns R (k x n, upper triangular). Empty when LAPACK fails.
std::vector<double> thin_qr(index_t m, index_t n, std::vector<double>& a);

/// G^{-1/2} for a symmetric positive definite n x n `g` (column-major, lower triangle read;
/// consumed) whose condition number is at most kPolarGramMaxCond2, by its eigenvalues
/// (dsyev); empty otherwise.
std::vector<double> inverse_sqrt(index_t n, std::vector<double> g);

/// The polar factor U V^T of an m x n matrix `a` = U S V^T (column-major; consumed): m x n
/// with orthonormal columns (rows where m < n), the nearest such matrix to `a` (orthogonal
/// Procrustes). A (A^T A)^{-1/2} by the eigenvalues of the n x n Gram where m >= n and
/// cond(A)^2 <= kPolarGramMaxCond2, else by the thin SVD (dgesdd). Empty when the SVD did
/// not converge.
std::vector<double> polar_factor(index_t m, index_t n, std::vector<double> a);

}  // namespace tenfold::detail
