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

}  // namespace tenfold::detail
