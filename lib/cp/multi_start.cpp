// Best of several starts.
#include <string>

#include "core/instantiate.hpp"
#include "cp/cp_als.hpp"

namespace tenfold::detail {

template <class T>
CpResult<T> run_cp_starts(CpOperand<T>& x, Compute<T>& c, const CpOptions& options,
                          std::span<const Matrix<T>> initial_factors,
                          std::chrono::steady_clock::time_point start, int extra_sweeps) {
  CpResult<T> best = run_cp_als(x, c, options, initial_factors, start);
  best.start_fits = {best.fit};
  if (options.n_starts <= 1) return best;  // 0, automatic, is one start here
  CpOptions o = options;
  o.init = CpInit::random;
  std::vector<double> fits = best.start_fits;
  // A stop by the callback or the time limit ends every start.
  const auto stopped = [](const CpResult<T>& r) {
    return r.stop == CpStop::callback || r.stop == CpStop::time_limit;
  };
  int swept = 0;  // by the random starts
  for (int k = 1;
       k < options.n_starts && !stopped(best) && (extra_sweeps < 0 || swept < extra_sweeps); ++k) {
    o.seed = options.seed + static_cast<std::uint64_t>(k);
    x.reset();
    for (int m = 0; m < x.order(); ++m) x.factor_changed(m);
    // Timed from the call: the time limit, the progress seconds and `init` (which then
    // includes the earlier starts) count from there.
    CpResult<T> res = run_cp_als(x, c, o, {}, start);
    swept += res.iterations;
    fits.push_back(res.fit);
    const bool last = stopped(res);
    if (res.fit > best.fit || last) {
      const CpStop stop = res.stop;
      if (res.fit > best.fit) {
        best = std::move(res);
        best.best_start = k;
      }
      best.stop = stop;  // why the starts ended
      best.converged = stop == CpStop::converged;
    }
    if (last) break;
  }
  best.start_fits = std::move(fits);
  best.timings.total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return best;
}

#define TENFOLD_INSTANTIATE_CP_STARTS(T)                                              \
  template CpResult<T> run_cp_starts<T>(CpOperand<T>&, Compute<T>&, const CpOptions&, \
                                        std::span<const Matrix<T>>,                   \
                                        std::chrono::steady_clock::time_point, int);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CP_STARTS)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_CP_STARTS)

}  // namespace tenfold::detail
