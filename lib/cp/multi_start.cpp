// Best of several starts: the starts asked for (n_starts), or the automatic ones that
// n_starts = 0 adds on a tensor that is not compressed first.
#include <string>

#include "core/instantiate.hpp"
#include "cp/cp_als.hpp"

namespace tenfold::detail {
namespace {

// A stop by the callback or the time limit ends every start.
template <class T>
bool stopped(const CpResult<T>& r) {
  return r.stop == CpStop::callback || r.stop == CpStop::time_limit;
}

// Random start k (seed + k) from the operand's first state.
template <class T>
CpResult<T> random_start(CpOperand<T>& x, Compute<T>& c, CpOptions o, int k,
                         std::chrono::steady_clock::time_point start) {
  o.init = CpInit::random;
  o.seed += static_cast<std::uint64_t>(k);
  x.reset();
  for (int m = 0; m < x.order(); ++m) x.factor_changed(m);
  // Timed from the call: the time limit, the progress seconds and `init` (which then
  // includes the earlier starts) count from there.
  return run_cp_als(x, c, o, {}, start);
}

// Whether n_starts = 0 adds random starts: the automatic start of one process, nothing
// given or kept, and no budget of the caller's (the compressed core has its own).
bool automatic_starts(const CpOptions& o, std::size_t given, int extra_sweeps) {
  return o.n_starts == 0 && o.init == CpInit::automatic && given == 0 && o.fixed_modes.empty() &&
         extra_sweeps < 0;
}

}  // namespace

template <class T>
CpResult<T> run_cp_starts(CpOperand<T>& x, Compute<T>& c, const CpOptions& options,
                          std::span<const Matrix<T>> initial_factors,
                          std::chrono::steady_clock::time_point start, int extra_sweeps) {
  CpResult<T> best = run_cp_als(x, c, options, initial_factors, start);
  std::vector<double> fits = {best.fit};
  if (automatic_starts(options, initial_factors.size(), extra_sweeps) && !stopped(best)) {
    // Random starts while their sweeps stay within half the first start's, so that the
    // default costs at most about 1.5x one start; one counts only when it converged
    // within its share and beats the first by more than the stopping tolerance can
    // blur (10 max(tol, 1e-6)): on count data the automatic start can settle in a worse
    // local optimum that random starts avoid (docs/algorithms.md, "Initialisation").
    int budget = best.iterations / 2;
    const double margin = 10.0 * std::max(options.tol, 1e-6);
    for (int k = 1; k <= kCpMaxAutomaticStarts && budget >= kCpMinAutomaticSweeps; ++k) {
      CpOptions o = options;
      o.max_iters = std::min(options.max_iters, budget);
      CpResult<T> res = random_start(x, c, o, k, start);
      budget -= res.iterations;
      fits.push_back(res.fit);
      if (stopped(res)) {
        best.stop = res.stop;
        best.converged = false;
        break;
      }
      if (res.converged && res.fit > best.fit + margin) {
        best = std::move(res);
        best.best_start = k;
      }
    }
  }
  int swept = 0;  // by the random starts asked for
  for (int k = 1;
       k < options.n_starts && !stopped(best) && (extra_sweeps < 0 || swept < extra_sweeps); ++k) {
    CpResult<T> res = random_start(x, c, options, k, start);
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
