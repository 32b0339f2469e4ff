// One ALS update of one mode through the CP-ALS loop, the other modes fixed: the update of
// an algorithm that keeps unnormalised factors (TensorLy's parafac with
// normalize_factors=False, as PARAFAC2 and CMTF run it), whose scales matter to it.
#pragma once

#include <span>

#include "cp/operand.hpp"
#include "tenfold/backend.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::detail {

template <class T>
struct ModeUpdate {
  Matrix<T> factor;             ///< the new U_n, unnormalised
  double relative_error = 0.0;  ///< of the model with it (the loop's measure for `x`)
};

/// Which factors are new to the operand before an update.
enum class FactorsSeen {
  none,      ///< every factor may have changed: x.factor_changed for each first
  reported,  ///< the caller has called x.factor_changed for those that changed since x's
             ///< last update (its cached contractions of the others then serve)
};

/// U_n = M_n (*_{m != n} U_m^T U_m)^{-1}, M_n = X_(n) (Khatri-Rao of the other U_m), from
/// `factors` (one per mode of x, host) by one sweep of run_cp_als with every other mode
/// fixed; with `nonnegative`, the HALS update of U_n >= 0 warm-started at factors[n] (made
/// non-negative first). The loop returns U_n with unit columns and their norms in the
/// weights; they are multiplied back.
template <class T>
ModeUpdate<T> update_one_mode(CpOperand<T>& x, Compute<T>& c, std::span<const Matrix<T>> factors,
                              int n, Backend backend, bool nonnegative = false,
                              FactorsSeen seen = FactorsSeen::none);

}  // namespace tenfold::detail
