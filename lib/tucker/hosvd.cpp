// Truncated HOSVD and sequentially truncated HOSVD (Vannieuwenhoven, Vandebril and
// Meerbergen, SIAM J. Sci. Comput. 34(2), 2012).
#include <cmath>

#include "core/multilinear.hpp"
#include "tucker/steps.hpp"

namespace tenfold::detail {

template <class T>
bool sthosvd(TuckerState<T>& s, const Truncation& t, const std::vector<int>& order) {
  Compute<T>& c = s.c;
  Buffer<T>* work[2] = {&s.work0, &s.work1};
  const T* y = s.x.data();
  std::vector<index_t> ydims = s.dims;
  const int steps = static_cast<int>(order.size());
  bool go_on = true;
  for (int k = 0; k < steps; ++k) {
    const int n = order[k];
    const auto ni = static_cast<std::size_t>(n);
    // U_n from the Gram of the partly shrunk tensor Y
    truncate_mode(s, y, ydims, n, t, true);
    // Y = Y x_n U_n^T: shrink mode n to r_n right away
    s.timed(s.timings.ttm, [&] {
      std::vector<index_t> next = ydims;
      next[ni] = s.ranks[ni];
      T* z = ensure(c, *work[k % 2], static_cast<std::size_t>(checked_numel(next)));
      ttm(c, y, ydims, n, Op::trans, s.u[ni].get(), s.dims[ni], s.ranks[ni], z);
      ydims = std::move(next);
      y = z;
    });
    if (k + 1 == steps) {
      // G = Y
      const auto size = static_cast<std::size_t>(checked_numel(ydims));
      c.copy(ensure(c, s.core, size), y, size);
    }
    // The model so far: X^ = Y x_n U_n over the modes processed (the result at the last)
    const double error = !s.callback     ? 0.0
                         : k + 1 < steps ? s.relative_error(y, checked_numel(ydims))
                                         : s.relative_error();
    go_on = s.report(TuckerMethod::sthosvd, 0, n, error);
    if (!go_on && k + 1 < steps) s.cancelled(TuckerMethod::sthosvd, k + 1, steps);
  }
  return go_on;
}

template <class T>
void hosvd(TuckerState<T>& s, const Truncation& t) {
  // U_n from the Gram of the full tensor, for every mode
  const int order = static_cast<int>(s.dims.size());
  for (int n = 0; n < order; ++n) {
    truncate_mode(s, s.x.data(), s.dims, n, t, true);
    if (n + 1 < order && !s.report(TuckerMethod::hosvd, 0, n, std::nan(""))) {
      s.cancelled(TuckerMethod::hosvd, n + 1, order);
    }
  }
  s.timed(s.timings.ttm, [&] {
    std::vector<ModeProduct<T>> products;
    for (int m = 0; m < static_cast<int>(s.dims.size()); ++m) {
      const auto mi = static_cast<std::size_t>(m);
      products.push_back({m, Op::trans, s.u[mi].get(), s.dims[mi], s.ranks[mi]});
    }
    // G = X x_0 U_0^T ... x_{N-1} U_{N-1}^T
    std::vector<index_t> shape = s.dims;
    const T* g = ttm_chain<T>(s.c, s.x.data(), shape, products, s.work0, s.work1);
    const auto size = static_cast<std::size_t>(checked_numel(shape));
    s.c.copy(ensure(s.c, s.core, size), g, size);
  });
  // The model is complete: the answer cannot stop anything any more.
  s.report(TuckerMethod::hosvd, 0, order - 1, s.relative_error());
}

template bool sthosvd<float>(TuckerState<float>&, const Truncation&, const std::vector<int>&);
template bool sthosvd<double>(TuckerState<double>&, const Truncation&, const std::vector<int>&);
template void hosvd<float>(TuckerState<float>&, const Truncation&);
template void hosvd<double>(TuckerState<double>&, const Truncation&);

}  // namespace tenfold::detail
