// Non-negative least-squares update by HALS (hierarchical alternating least squares;
// Cichocki and Phan 2009, Gillis and Glineur 2012): CP-ALS's mode update when
// CpOptions::nonnegative is set, and the factor update of non-negative Tucker.
#pragma once

#include <vector>

#include "core/compute.hpp"

namespace tenfold::detail {

/// Inner HALS passes per mode update at most (5, as TensorLy 0.10: the outer sweep
/// re-linearises anyway); they stop earlier once a pass changes U
/// by less than kHalsInnerTol (squared, relative to the first pass), as TensorLy's
/// hals_nnls.
inline constexpr int kHalsMaxInner = 5;
inline constexpr double kHalsInnerTol = 1e-8;

/// How hals_update measures a pass's change for its early stop.
enum class HalsChange {
  own,  ///< the squared change of U
  /// TensorLy's hals_nnls (its broadcast V - newV): per column r, sum_j ||u_j - u_r^new||^2
  /// over all columns j of U before u_r's update (non-negative Tucker, iterate for iterate)
  tensorly,
};

/// min_{U >= 0} ||X_(n) - U KR^T|| given M = X_(n) KR (rows x R) and V = KR^T KR
/// (R x R), starting from U (rows x R, backend memory), column by column:
///   u_r <- max(0, u_r + (m_r - U v_r) / v_rr)    (columns with v_rr <= 0 are left)
/// Runs on the host (U, M and V are small); `host` is reused scratch.
template <class T>
void hals_update(Compute<T>& c, index_t rows, index_t rank, const T* m, const T* v, T* u,
                 std::vector<T>& host, HalsChange measure = HalsChange::own);

/// U <- |U| (n entries, backend memory): a non-negative start from any start.
template <class T>
void make_nonnegative(Compute<T>& c, std::size_t n, T* u, std::vector<T>& host);

}  // namespace tenfold::detail
