// Higher-order orthogonal iteration (De Lathauwer, De Moor and Vandewalle, SIAM J.
// Matrix Anal. Appl. 21(4), 2000), started from the model already in the state.
// Each sweep updates U_n for n = s_0, ..., s_{N-1} (the sweep order) in turn: U_n =
// the leading r_n left singular vectors of Y_(n), Y = X x_{m != n} U_m^T. ||G|| never
// decreases, so neither does the fit. The modes after s_0 share Z = X x_{s_0} U_{s_0}^T,
// so a sweep reads X twice, not N times.
#include <cmath>
#include <utility>

#include "core/multilinear.hpp"
#include "tucker/steps.hpp"

namespace tenfold::detail {

template <class T>
HooiOutcome hooi(TuckerState<T>& s, const std::vector<int>& sweep, int max_iters, double tol,
                 std::vector<double>& error_history) {
  Compute<T>& c = s.c;
  const int order = static_cast<int>(s.dims.size());
  const Truncation fixed{s.ranks, 0.0};
  const int first = sweep.front(), last = sweep.back();
  const auto fi = static_cast<std::size_t>(first), li = static_cast<std::size_t>(last);
  // Y = src x_m U_m^T over the modes m other than `first` and n; `shape` (src's)
  // becomes Y's.
  auto contract = [&](const T* src, std::vector<index_t>& shape, int n) {
    std::vector<ModeProduct<T>> products;
    // From the last mode down: on ties the cheapest first product is a single GEMM.
    for (int m = order - 1; m >= 0; --m) {
      const auto mi = static_cast<std::size_t>(m);
      if (m != n && m != first)
        products.push_back({m, Op::trans, s.u[mi].get(), s.dims[mi], s.ranks[mi]});
    }
    return ttm_chain<T>(c, src, shape, products, s.work0, s.work1);
  };
  std::vector<index_t> zdims = s.dims;
  zdims[fi] = s.ranks[fi];
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
    for (std::size_t k = 0; k < sweep.size(); ++k) {
      const int n = sweep[k];
      s.timed(s.timings.ttm, [&] {
        if (k == 0) {
          // Y = X x_{m != s_0} U_m^T
          ydims = s.dims;
          y = contract(s.x.data(), ydims, n);
          return;
        }
        if (k == 1) {
          // Z = X x_{s_0} U_{s_0}^T with the new U_{s_0}
          ttm(c, s.x.data(), s.dims, first, Op::trans, s.u[fi].get(), s.dims[fi], s.ranks[fi],
              z.get());
        }
        // Y = Z x_{m != s_0, n} U_m^T
        ydims = zdims;
        y = contract(z.get(), ydims, n);
      });
      // U_n = leading r_n eigenvectors of Y_(n) Y_(n)^T
      truncate_mode(s, y, ydims, n, fixed, false);
      if (k + 1 < sweep.size() && !s.report(TuckerMethod::hooi, iter, n, std::nan(""))) {
        swap_kept();
        out.stop = TuckerStop::callback;
        return out;
      }
    }
    // G = Y x_{s_{N-1}} U_{s_{N-1}}^T
    s.timed(s.timings.ttm, [&] {
      ttm(c, y, ydims, last, Op::trans, s.u[li].get(), s.dims[li], s.ranks[li], s.core.get());
    });
    const double err = s.relative_error();
    const double decrease = error_history.back() - err;
    error_history.push_back(err);
    out.iterations = iter;
    const bool go_on = s.report(TuckerMethod::hooi, iter, last, err);
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

template HooiOutcome hooi<float>(TuckerState<float>&, const std::vector<int>&, int, double,
                                 std::vector<double>&);
template HooiOutcome hooi<double>(TuckerState<double>&, const std::vector<int>&, int, double,
                                  std::vector<double>&);

}  // namespace tenfold::detail
