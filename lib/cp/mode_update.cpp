#include "cp/mode_update.hpp"

#include "core/instantiate.hpp"
#include "cp/cp_als.hpp"

namespace tenfold::detail {

template <class T>
ModeUpdate<T> update_one_mode(CpOperand<T>& x, Compute<T>& c, std::span<const Matrix<T>> factors,
                              int n, Backend backend, bool nonnegative, FactorsSeen seen) {
  CpOptions o;
  o.rank = factors[0].cols();
  o.max_iters = 1;
  o.tol = 0.0;
  o.init = CpInit::given;
  o.n_starts = 1;
  o.compress = CpCompress::off;
  o.backend = backend;
  for (int m = 0; m < x.order(); ++m) {
    if (m != n) o.fixed_modes.push_back(m);
    if (seen == FactorsSeen::none) x.factor_changed(m);
  }
  if (nonnegative) {
    o.nonnegative = true;
    o.nonnegative_modes = {n};
  }
  CpResult<T> res = run_cp_als(x, c, o, factors, Clock::now());
  ModeUpdate<T> out{std::move(res.model.factors[static_cast<std::size_t>(n)]), res.relative_error};
  // U_n = (unit columns) diag(weights)
  for (index_t q = 0; q < out.factor.cols(); ++q)
    for (index_t i = 0; i < out.factor.rows(); ++i)
      out.factor(i, q) *= res.model.weights[static_cast<std::size_t>(q)];
  return out;
}

#define TENFOLD_INSTANTIATE_MODE_UPDATE(T)   \
  template ModeUpdate<T> update_one_mode<T>( \
      CpOperand<T>&, Compute<T>&, std::span<const Matrix<T>>, int, Backend, bool, FactorsSeen);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_MODE_UPDATE)

}  // namespace tenfold::detail
