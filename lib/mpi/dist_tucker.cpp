// Distributed Tucker (ST-HOSVD, HOSVD, HOOI) as TuckerMPI computes it: mode Grams from a
// redistribution within the mode's fibre, a local syrk and a sum over the grid, the eigenvalue
// truncation replicated (every process holds the same Gram, so the same factor), and
// each TTM a local product followed by a reduce-scatter within the mode's fibre, which
// leaves the shrunk tensor block-distributed on the same grid.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/compute.hpp"
#include "core/format.hpp"
#include "core/multilinear.hpp"
#include "mpi/comm.hpp"
#include "mpi/dist_operand.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"
#include "tucker/steps.hpp"

namespace tenfold::mpi {
namespace {

using tenfold::detail::Buffer;
using tenfold::detail::Compute;
using tenfold::detail::Op;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Z = Y x_n U^T for U (I_n x r, replicated): the local product with this block's rows
// of U gives the partial Z_p (mode n of full length r), summed over the fibre of mode n
// with a reduce-scatter that leaves each process its range of the r rows.
template <class T>
DistTensor<T> dist_ttm(Compute<T>& c, const DistTensor<T>& y, int n, const T* u, index_t r) {
  const auto ni = static_cast<std::size_t>(n);
  std::vector<index_t> zdims = y.dims;
  zdims[ni] = r;
  DistTensor<T> z = DistTensor<T>::make(y.grid, zdims);
  z.stats = y.stats;
  const ProcessGrid& grid = *y.grid;
  std::vector<index_t> full = y.local.dims();
  full[ni] = r;
  index_t left = 1, right = 1;
  for (int m = 0; m < n; ++m) left *= full[static_cast<std::size_t>(m)];
  for (int m = n + 1; m < y.order(); ++m) right *= full[static_cast<std::size_t>(m)];
  // Z_p = U(rows of this block, :)^T x_n Y_p
  std::vector<T> partial(static_cast<std::size_t>(left * r * right), T(0));
  if (y.local.numel() > 0) {
    tenfold::detail::ttm(c, y.local.data(), y.local.dims(), n, Op::trans, u + y.offsets[ni],
                         y.dims[ni], r, partial.data());
  }
  const int parts = grid.shape()[ni];
  if (parts == 1) {
    z.local.values() = std::move(partial);
    return z;
  }
  // Packed by destination: block q holds mode-n indices of block_range(r, P_n, q).
  std::vector<T> packed(partial.size());
  std::vector<int> counts(static_cast<std::size_t>(parts));
  T* dst = packed.data();
  for (int q = 0; q < parts; ++q) {
    const Range rq = block_range(r, parts, q);
    counts[static_cast<std::size_t>(q)] =
        detail::checked_count(left * rq.size * right, "tensor-times-matrix");
    for (index_t k = 0; k < right; ++k) {
      const T* src = partial.data() + (k * r + rq.begin) * left;
      dst = std::copy_n(src, static_cast<std::size_t>(left * rq.size), dst);
    }
  }
  detail::count(*y.stats, "ttm", grid.fibre(n), static_cast<index_t>(packed.size()));
  MPI_Reduce_scatter(packed.data(), z.local.data(), counts.data(), detail::datatype<T>(), MPI_SUM,
                     grid.fibre(n));
  return z;
}

// ||Y||^2 over all blocks, the same on every process.
template <class T>
double norm_squared(Compute<T>& c, const DistTensor<T>& y, const char* phase) {
  double s = c.sum_squares(static_cast<std::size_t>(y.local.numel()), y.local.data());
  detail::allreduce_sum(*y.stats, phase, y.grid->comm(), &s, 1);
  return s;
}

template <class T>
struct DistTuckerState {
  Compute<T>& c;
  const DistTensor<T>& x;
  tenfold::detail::Truncation truncation;
  double norm_x2 = 0.0;
  std::vector<index_t> ranks;
  std::vector<Buffer<T>> u;
  std::vector<std::vector<double>> eigenvalues;
  TuckerTimings timings;

  template <class F>
  auto timed(double& acc, F&& step) {
    const auto t0 = Clock::now();
    auto out = step();
    acc += seconds_since(t0);
    return out;
  }

  // U_n from the Gram of mode n of y.
  void truncate(const DistTensor<T>& y, int n, const tenfold::detail::Truncation& t, bool record) {
    const auto ni = static_cast<std::size_t>(n);
    const index_t in = y.dims[ni];
    std::vector<T> g(static_cast<std::size_t>(in * in));
    timed(timings.gram, [&] {
      // Gram = Y_(n) Y_(n)^T
      detail::distributed_mode_gram(c, y, n, g.data());
      return 0;
    });
    timed(timings.eig, [&] {
      std::vector<double> lambda;
      ranks[ni] = tenfold::detail::truncate_gram(c, g.data(), in, n, t, u[ni], lambda);
      if (record) eigenvalues[ni] = std::move(lambda);
      return 0;
    });
  }

  // Y x_m U_m^T over `modes` (each with its rank), cheapest first as ttm_chain does:
  // increasing r_m / I_m (stable).
  DistTensor<T> contract(const DistTensor<T>& y, std::vector<int> modes) {
    std::stable_sort(modes.begin(), modes.end(), [&](int a, int b) {
      const auto ai = static_cast<std::size_t>(a), bi = static_cast<std::size_t>(b);
      return ranks[ai] * y.dims[bi] < ranks[bi] * y.dims[ai];
    });
    return timed(timings.ttm, [&] {
      DistTensor<T> z;
      const DistTensor<T>* src = &y;
      for (int m : modes) {
        z = dist_ttm(c, *src, m, u[static_cast<std::size_t>(m)].get(),
                     ranks[static_cast<std::size_t>(m)]);
        src = &z;
      }
      return z;
    });
  }

  double relative_error(const DistTensor<T>& core) {
    if (norm_x2 <= 0.0) return 0.0;
    const double g2 = norm_squared(c, core, "norm");
    return std::sqrt(std::max(0.0, norm_x2 - g2) / norm_x2);
  }
};

}  // namespace

template <class T>
TuckerResult<T> tucker(const DistTensor<T>& x, const TuckerOptions& options) {
  const auto start = Clock::now();
  // The same arguments everywhere (the replicated truncation must choose the same ranks
  // on every process), then checks whose outcome is the same everywhere.
  const auto list = [](const auto& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i > 0 ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  check_same(x.grid->comm(), "the arguments of tucker",
             {{"element type", sizeof(T) == 4 ? "float32" : "float64"},
              {"tensor shape", tenfold::detail::shape_string(x.dims)},
              {"method", std::string(to_string(options.method))},
              {"ranks", list(options.ranks)},
              {"eps", options.eps ? detail::exact(*options.eps) : "none"},
              {"mode_order", list(options.mode_order)},
              {"max_iters", std::to_string(options.max_iters)},
              {"tol", detail::exact(options.tol)},
              {"layout", std::to_string(static_cast<int>(options.layout))},
              {"backend", std::string(to_string(options.backend))}});
  tenfold::detail::validate_tucker_options(x.dims, options);
  if (options.layout != Layout::col_major) {
    throw InvalidArgument(
        "the distributed Tucker takes its tensor in NumPy axis order: layout must be col_major");
  }
  if (options.backend != Backend::cpu) {
    throw InvalidArgument("the distributed Tucker runs on the cpu backend");
  }
  on_every_process(x.grid->comm(),
                   [&] { detail::check_local_finite(x.local.view(), "Tucker input tensor"); });
  auto compute = tenfold::detail::make_compute<T>(Backend::cpu);
  const int order = x.order();
  DistTuckerState<T> s{*compute, x, {}, 0.0, std::vector<index_t>(x.dims.size(), 0), {}, {}, {}};
  s.u.resize(x.dims.size());
  s.eigenvalues.resize(x.dims.size());
  s.norm_x2 = norm_squared(*compute, x, "norm");
  // With eps: the discarded eigenvalues of each mode sum to at most eps^2 ||X||^2 / N.
  s.truncation = {options.ranks,
                  options.eps ? *options.eps * *options.eps * s.norm_x2 / order : 0.0};
  TuckerResult<T> res;
  DistTensor<T> core;
  std::vector<int> all(static_cast<std::size_t>(order));
  std::iota(all.begin(), all.end(), 0);
  if (options.method == TuckerMethod::hosvd) {
    // U_n from the Gram of the full tensor, for every mode; G = X x_0 U_0^T ...
    for (int n = 0; n < order; ++n) s.truncate(x, n, s.truncation, true);
    core = s.contract(x, all);
  } else {
    // ST-HOSVD: U_n from the Gram of the partly shrunk Y, then Y = Y x_n U_n^T
    res.mode_order = tenfold::detail::choose_mode_order(x.dims, options);
    const DistTensor<T>* y = &x;
    for (int n : res.mode_order) {
      s.truncate(*y, n, s.truncation, true);
      core = s.timed(s.timings.ttm, [&] {
        const auto ni = static_cast<std::size_t>(n);
        return dist_ttm(*compute, *y, n, s.u[ni].get(), s.ranks[ni]);
      });
      y = &core;
    }
  }
  res.converged = true;
  if (options.method == TuckerMethod::hooi) {
    // HOOI sweeps: U_n from the Gram of Y = X x_{m != n} U_m^T (ranks fixed); modes
    // 1..N-1 share Z = X x_0 U_0^T, as in the serial sweep.
    const tenfold::detail::Truncation fixed{s.ranks, 0.0};
    res.error_history.push_back(s.relative_error(core));
    for (int iter = 1; iter <= options.max_iters; ++iter) {
      DistTensor<T> z, y;
      for (int n = 0; n < order; ++n) {
        std::vector<int> others;
        for (int m = order - 1; m >= 1; --m)
          if (m != n) others.push_back(m);
        if (n == 0) {
          y = s.contract(x, others);
        } else {
          if (n == 1) z = s.contract(x, {0});
          y = s.contract(z, others);
        }
        s.truncate(y, n, fixed, false);
      }
      core = s.contract(y, {order - 1});
      const double err = s.relative_error(core);
      const double decrease = res.error_history.back() - err;
      res.error_history.push_back(err);
      res.iterations = iter;
      res.converged = false;
      if (options.tol > 0.0 && decrease < options.tol) {
        res.converged = true;
        break;
      }
    }
    res.stop = res.converged ? TuckerStop::converged : TuckerStop::max_iters;
    res.relative_error = res.error_history.back();
  } else {
    res.relative_error = s.relative_error(core);
  }
  // The model: the core gathered (small), the factors replicated already.
  TTensor<T>& m = res.model;
  m.core = gather(core);
  double stored = static_cast<double>(m.core.numel()), numel = 1.0;
  for (int n = 0; n < order; ++n) {
    const auto ni = static_cast<std::size_t>(n);
    Matrix<T> f(x.dims[ni], s.ranks[ni]);
    std::copy_n(s.u[ni].get(), static_cast<std::size_t>(f.size()), f.data());
    m.factors.push_back(std::move(f));
    stored += static_cast<double>(x.dims[ni] * s.ranks[ni]);
    numel *= static_cast<double>(x.dims[ni]);
  }
  tenfold::detail::fix_signs(m);
  res.eigenvalues = std::move(s.eigenvalues);
  res.compression_ratio = numel / stored;
  res.timings = s.timings;
  res.timings.total = seconds_since(start);
  return res;
}

template TuckerResult<float> tucker<float>(const DistTensor<float>&, const TuckerOptions&);
template TuckerResult<double> tucker<double>(const DistTensor<double>&, const TuckerOptions&);

}  // namespace tenfold::mpi
