// Higher-order orthogonal iteration (De Lathauwer, De Moor and Vandewalle, SIAM J.
// Matrix Anal. Appl. 21(4), 2000), started from the model already in the state.
// Each sweep updates U_0, ..., U_{N-1} in turn: U_n = the leading r_n left singular
// vectors of Y_(n), Y = X x_{m != n} U_m^T. ||G|| never decreases, so neither does
// the fit. Modes 1..N-1 share Z = X x_0 U_0^T, so a sweep reads X twice, not N times.
#include <cmath>
#include <utility>

#include "core/multilinear.hpp"
#include "tucker/steps.hpp"

namespace tenfold::detail {

template <class T>
HooiOutcome hooi(TuckerState<T>& s, int max_iters, double tol, std::vector<double>& error_history) {
  Compute<T>& c = s.c;
  const int order = static_cast<int>(s.dims.size());
  const Truncation fixed{s.ranks, 0.0};
  // Y = src x_m U_m^T over the modes m >= from other than n; `shape` (src's) becomes Y's.
  auto contract = [&](const T* src, std::vector<index_t>& shape, int from, int n) {
    std::vector<ModeProduct<T>> products;
    // From the last mode down: on ties the cheapest first product is a single GEMM.
    for (int m = order - 1; m >= from; --m) {
      const auto mi = static_cast<std::size_t>(m);
      if (m != n) products.push_back({m, Op::trans, s.u[mi].get(), s.dims[mi], s.ranks[mi]});
    }
    return ttm_chain<T>(c, src, shape, products, s.work0, s.work1);
  };
  std::vector<index_t> zdims = s.dims;
  zdims[0] = s.ranks[0];
  Buffer<T> z(c, static_cast<std::size_t>(checked_numel(zdims)));

  // The last complete model (factors and core), kept when a callback may stop a sweep
  // half-way, and swapped back in then.
  std::vector<Buffer<T>> kept_u(static_cast<std::size_t>(order));
  Buffer<T> kept_core;
  const auto swap_kept = [&] {
    for (int n = 0; n < order; ++n)
      std::swap(kept_u[static_cast<std::size_t>(n)], s.u[static_cast<std::size_t>(n)]);
    std::swap(kept_core, s.core);
  };
  const auto keep = [&] {
    for (int n = 0; n < order; ++n) {
      const auto ni = static_cast<std::size_t>(n);
      const auto size = static_cast<std::size_t>(s.dims[ni] * s.ranks[ni]);
      c.copy(ensure(c, kept_u[ni], size), s.u[ni].get(), size);
    }
    const auto size = static_cast<std::size_t>(checked_numel(s.ranks));
    c.copy(ensure(c, kept_core, size), s.core.get(), size);
  };

  HooiOutcome out;
  error_history.push_back(s.relative_error());
  for (int iter = 1; iter <= max_iters; ++iter) {
    if (s.callback) keep();
    const T* y = nullptr;
    std::vector<index_t> ydims;
    for (int n = 0; n < order; ++n) {
      s.timed(s.timings.ttm, [&] {
        if (n == 0) {
          // Y = X x_{m != 0} U_m^T
          ydims = s.dims;
          y = contract(s.x.data(), ydims, 1, 0);
          return;
        }
        if (n == 1) {
          // Z = X x_0 U_0^T with the new U_0
          ttm(c, s.x.data(), s.dims, 0, Op::trans, s.u[0].get(), s.dims[0], s.ranks[0], z.get());
        }
        // Y = Z x_{m != 0, n} U_m^T
        ydims = zdims;
        y = contract(z.get(), ydims, 1, n);
      });
      // U_n = leading r_n eigenvectors of Y_(n) Y_(n)^T
      truncate_mode(s, y, ydims, n, fixed, false);
      if (n + 1 < order && !s.report(TuckerMethod::hooi, iter, n, std::nan(""))) {
        swap_kept();
        out.stop = TuckerStop::callback;
        return out;
      }
    }
    // G = Y x_{N-1} U_{N-1}^T
    s.timed(s.timings.ttm, [&] {
      const auto last = static_cast<std::size_t>(order - 1);
      ttm(c, y, ydims, order - 1, Op::trans, s.u[last].get(), s.dims[last], s.ranks[last],
          s.core.get());
    });
    const double err = s.relative_error();
    const double decrease = error_history.back() - err;
    error_history.push_back(err);
    out.iterations = iter;
    const bool go_on = s.report(TuckerMethod::hooi, iter, order - 1, err);
    if (tol > 0.0 && decrease < tol) {
      out.stop = TuckerStop::converged;
      break;
    }
    if (!go_on) {
      out.stop = TuckerStop::callback;
      break;
    }
  }
  return out;
}

template HooiOutcome hooi<float>(TuckerState<float>&, int, double, std::vector<double>&);
template HooiOutcome hooi<double>(TuckerState<double>&, int, double, std::vector<double>&);

}  // namespace tenfold::detail
