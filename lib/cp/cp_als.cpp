// The one CP-ALS loop (run_cp_als) over any operand (operand.hpp): the start, the sweeps
// (MTTKRP, normal equations or HALS, line search, the fit), the stopping rules, and the
// model arranged at the end. The public entry points are cp_api.cpp.
#include "cp/cp_als.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>

#include "core/format.hpp"
#include "core/hals.hpp"
#include "core/instantiate.hpp"
#include "core/memory.hpp"
#include "core/random.hpp"
#include "core/subspace.hpp"
#include "cp/line_search.hpp"
#include "cp/masked_operand.hpp"
#include "cp/revive.hpp"
#include "cp/stop.hpp"
#include "tenfold/error.hpp"

namespace tenfold {
namespace detail {

namespace {

// All backend memory the iteration needs, allocated once.
template <class T>
struct AlsState {
  AlsState(Compute<T>& c, const std::vector<index_t>& dims, index_t rank)
      : r(rank), rr(static_cast<std::size_t>(rank * rank)) {
    index_t imax = 0;
    for (index_t d : dims) {
      u.emplace_back(c, static_cast<std::size_t>(d * rank));
      gram.emplace_back(c, rr);
      imax = std::max(imax, d);
    }
    v = Buffer<T>(c, rr);
    chol = Buffer<T>(c, rr);
    pinv = Buffer<T>(c, rr);
    m = Buffer<T>(c, static_cast<std::size_t>(imax * rank));
    lambda = Buffer<T>(c, static_cast<std::size_t>(rank));
    scratch = Buffer<T>(c, static_cast<std::size_t>(rank));
    for (auto& b : u) {
      ptrs.push_back(b.get());
      cptrs.push_back(b.get());
    }
  }
  index_t r;
  std::size_t rr;
  std::vector<Buffer<T>> u, gram;
  std::vector<T*> ptrs;
  std::vector<const T*> cptrs;
  Buffer<T> v, chol, pinv, m, lambda, scratch;
};

// V = *_{m != n} G_m  (all G_m when n < 0)
template <class T>
void hadamard_of_grams(Compute<T>& c, AlsState<T>& s, int n) {
  bool first = true;
  for (int m = 0; m < static_cast<int>(s.gram.size()); ++m) {
    if (m == n) continue;
    if (first) {
      c.copy(s.v.get(), s.gram[static_cast<std::size_t>(m)].get(), s.rr);
      first = false;
    } else {
      c.hadamard(s.rr, s.gram[static_cast<std::size_t>(m)].get(), s.v.get());
    }
  }
}

// U = M V^{-1} for SPD (complex: Hermitian positive definite) V by Cholesky; if V is not
// numerically positive definite, U = M V^+ with the eigenvalue-based pseudo-inverse.
// Returns true on fallback.
template <class T>
bool solve_normal_equations(Compute<T>& c, AlsState<T>& s, index_t rows, T* u) {
  const index_t r = s.r;
  c.copy(s.chol.get(), s.v.get(), s.rr);
  if (c.potrf(r, s.chol.get(), r)) {
    c.copy(u, s.m.get(), static_cast<std::size_t>(rows * r));
    c.potrs_right(r, s.chol.get(), r, rows, u, rows);
    return false;
  }
  // V = Q diag(w) Q^H; V^+ = Q diag(1/w_j for w_j > tol) Q^H (Q^H = conj(Q)^T).
  using R = real_t<T>;
  std::vector<R> w(static_cast<std::size_t>(r));
  c.copy(s.chol.get(), s.v.get(), s.rr);
  c.syevd(r, s.chol.get(), r, w.data());
  double wmax = 0.0;
  for (R x : w) wmax = std::max(wmax, std::abs(static_cast<double>(x)));
  const double tol = wmax * static_cast<double>(r) * std::numeric_limits<R>::epsilon();
  std::vector<T> inv(w.size());
  for (std::size_t j = 0; j < w.size(); ++j)
    inv[j] = static_cast<double>(w[j]) > tol ? T(R(1) / w[j]) : T(0);
  c.upload(s.scratch.get(), inv.data(), inv.size());
  c.copy(s.pinv.get(), s.chol.get(), s.rr);
  c.scale_columns(r, r, s.pinv.get(), r, s.scratch.get());
  c.conjugate(s.rr, s.chol.get());
  c.gemm(Op::none, Op::trans, r, r, r, T(1), s.pinv.get(), r, s.chol.get(), r, T(0), s.v.get(), r);
  c.gemm(Op::none, Op::none, rows, r, r, T(1), s.m.get(), rows, s.v.get(), r, T(0), u, rows);
  return true;
}

// U = Q of the thin QR of a factor (cholesky_qr, shifted); a zero or non-finite factor
// has none.
template <class T>
void orthonormalize(Compute<T>& c, AlsState<T>& s, index_t rows, T* u, int mode) {
  if (!cholesky_qr(c, rows, s.r, u, s.chol.get(), true)) {
    throw NumericalError("orthogonalise: the factor of mode " + std::to_string(mode) +
                         " has no QR in this precision (it is zero or not finite)");
  }
}

// automatic: nvecs while every Gram it forms (modes n >= 1) is at most
// kCpNvecsMaxSize^2 entries, random otherwise.
CpInit resolve_init(CpInit init, const std::vector<index_t>& dims) {
  if (init != CpInit::automatic) return init;
  const bool affordable =
      std::all_of(dims.begin() + 1, dims.end(), [](index_t d) { return d <= kCpNvecsMaxSize; });
  return affordable ? CpInit::nvecs : CpInit::random;
}

template <class T>
void initialise(CpOperand<T>& x, Compute<T>& c, const CpOptions& o,
                std::span<const Matrix<T>> initial_factors, CpInit init, AlsState<T>& s) {
  const auto& dims = x.dims();
  const index_t r = s.r;
  if (init == CpInit::gevd) {
    // (run_compressed_cp resolves it on the core; no other path can)
    throw InvalidArgument(
        "init = gevd starts on the compressed core of a dense real 3-way tensor: it needs "
        "compression first (compress = on, or auto where it pays) and no sampled solver, "
        "missing values, sparsity or distribution");
  }
  Rng rng(o.seed);
  for (int n = 0; n < x.order(); ++n) {
    const auto ni = static_cast<std::size_t>(n);
    const index_t in = dims[ni];
    const auto size = static_cast<std::size_t>(in * r);
    if (init == CpInit::given) {
      c.upload(s.u[ni].get(), initial_factors[ni].data(), size);
      continue;
    }
    // Random entries in [0, 1); nvecs overwrites the leading min(R, I_n) columns.
    std::vector<T> host(size);
    for (T& v : host) v = static_cast<T>(rng.uniform());
    c.upload(s.u[ni].get(), host.data(), size);
    if (init == CpInit::nvecs && n > 0) {
      // Leading eigenvectors of X_(n) X_(n)^T (complex: X_(n) X_(n)^H), largest first
      // (mode 0 is solved first and needs no start).
      Buffer<T> g(c, static_cast<std::size_t>(in * in));
      std::vector<real_t<T>> w(static_cast<std::size_t>(in));
      x.mode_gram(n, g.get());
      if (!std::isfinite(c.sum_squares(static_cast<std::size_t>(in * in), g.get()))) {
        throw NumericalError(
            "the nvecs start overflows: the Gram of mode " + std::to_string(n) +
            " is not finite in this precision; scale the tensor down, or start at random");
      }
      if (x.gram_eigenvectors(n, g.get(), std::min(r, in), s.u[ni].get())) continue;
      c.syevd(in, g.get(), in, w.data());
      for (index_t j = 0; j < std::min(r, in); ++j) {
        c.copy(s.u[ni].get() + j * in, g.get() + (in - 1 - j) * in, static_cast<std::size_t>(in));
      }
    }
  }
}

}  // namespace

template <class T>
CpResult<T> run_cp_als(CpOperand<T>& x, Compute<T>& c, const CpOptions& o,
                       std::span<const Matrix<T>> initial_factors, Clock::time_point start) {
  const auto& dims = x.dims();
  const int order = x.order();
  const index_t r = o.rank;
  CpResult<T> res;
  CpTimings& t = res.timings;

  // Memory: factors, Grams, V and its two solve copies, the MTTKRP result, lambda and
  // a scratch vector (nvecs: a mode Gram and the eigensolver's 2 I^2 workspace), and
  // the operand's own buffers.
  const bool nvecs = o.init == CpInit::nvecs;
  double elements = static_cast<double>(order + 3) * static_cast<double>(r) * r + 2.0 * r;
  double imax = 0.0;
  for (index_t d : dims) {
    elements += static_cast<double>(d) * r;
    imax = std::max(imax, static_cast<double>(d));
  }
  elements += imax * r + (nvecs ? 3.0 * imax * imax : 0.0) + x.workspace_elements(r, nvecs);
  // The nvecs start's Gram of the longest mode (I x I) is often the cause: said so.
  const std::string gram = std::to_string(static_cast<index_t>(imax));
  require_memory(c, elements,
                 "CP-ALS at rank " + std::to_string(r) +
                     (nvecs && 3.0 * imax * imax > elements / 2
                          ? " with the nvecs start (its eigenvectors need the " + gram + " x " +
                                gram + " Gram of the longest mode; a random start needs none)"
                          : std::string()));

  // The norm first: a tensor it overflows fails every start the same way.
  const double norm_x2 = x.norm_squared();
  if (!std::isfinite(norm_x2)) {
    throw NumericalError("the squared norm of the tensor overflows double; scale it down");
  }
  if (norm_x2 == 0.0) {
    throw InvalidArgument(
        "the tensor is zero (every entry it holds is 0): its only CP model is zero, and the "
        "fit 1 - ||X - M|| / ||X|| is undefined");
  }
  AlsState<T> s(c, dims, r);
  res.init = initial_factors.empty() ? resolve_init(o.init, dims) : CpInit::given;
  initialise(x, c, o, initial_factors, res.init, s);
  std::vector<T> host;
  c.fill(s.lambda.get(), static_cast<std::size_t>(r), T(1));
  // Modes under the non-negativity constraint (HALS updates), their start made non-negative.
  std::vector<bool> constrained(static_cast<std::size_t>(order), o.nonnegative);
  if (!o.nonnegative_modes.empty()) {
    constrained.assign(static_cast<std::size_t>(order), false);
    for (int n : o.nonnegative_modes) constrained[static_cast<std::size_t>(n)] = true;
  }
  if constexpr (!is_complex_v<T>) {  // complex: nonnegative is refused (validate_cp_options)
    for (int n = 0; n < order; ++n) {
      if (!constrained[static_cast<std::size_t>(n)]) continue;
      make_nonnegative(c, static_cast<std::size_t>(dims[static_cast<std::size_t>(n)] * r),
                       s.ptrs[static_cast<std::size_t>(n)], host);
    }
  }
  std::vector<T*> gram_ptrs;
  for (auto& g : s.gram) gram_ptrs.push_back(g.get());
  std::optional<LineSearch<T>> line_search;
  if (o.line_search) line_search.emplace(c, dims, r, o.line_search_rule, o.fixed_modes);
  for (int n = 0; n < order; ++n) {
    // G_n = U_n^T U_n (complex: U_n^T conj(U_n), see docs/algorithms.md)
    c.syrk(Op::trans, r, dims[static_cast<std::size_t>(n)], T(1),
           s.ptrs[static_cast<std::size_t>(n)], dims[static_cast<std::size_t>(n)], T(0),
           s.gram[static_cast<std::size_t>(n)].get(), r);
  }
  const double norm_x = std::sqrt(norm_x2);
  c.synchronize();
  t.init = seconds_since(start);

  auto timed = [&c](double& acc, auto&& step) {
    const auto t0 = Clock::now();
    step();
    c.synchronize();
    acc += seconds_since(t0);
  };

  // Fixed modes keep their start; <X, model> is taken at the last mode updated.
  std::vector<bool> fixed(static_cast<std::size_t>(order), false);
  for (int n : o.fixed_modes) fixed[static_cast<std::size_t>(n)] = true;
  int last_free = order - 1;
  while (fixed[static_cast<std::size_t>(last_free)]) --last_free;
  // The current model for a callback that asks for it (CpProgress::model, or
  // complex_model for a complex tensor).
  using Wide = std::conditional_t<is_complex_v<T>, std::complex<double>, double>;
  auto snapshot = [&] {
    KTensor<Wide> m;
    std::vector<T> h(static_cast<std::size_t>(r));
    c.download(h.data(), s.lambda.get(), h.size());
    m.weights.assign(h.begin(), h.end());
    for (int n = 0; n < order; ++n) {
      const index_t in = dims[static_cast<std::size_t>(n)];
      h.resize(static_cast<std::size_t>(in * r));
      c.download(h.data(), s.ptrs[static_cast<std::size_t>(n)], h.size());
      Matrix<Wide> f(in, r);
      std::copy(h.begin(), h.end(), f.data());
      m.factors.push_back(std::move(f));
    }
    return m;
  };

  // ||X - model||^2 = ||X||^2 + lambda^T (*_n G_n) lambda - 2 <X, model>, unless the
  // operand reports it (missing values: over the observed entries)
  auto model_resid2 = [&](double inner) {
    const double own = x.end_sweep(s.cptrs, s.lambda.get(), r);
    if (own >= 0.0) return own;
    hadamard_of_grams(c, s, -1);
    c.gemm(Op::none, Op::none, r, 1, r, T(1), s.v.get(), r, s.lambda.get(), r, T(0),
           s.scratch.get(), r);
    const double norm_m2 = c.dot(static_cast<std::size_t>(r), s.lambda.get(), s.scratch.get());
    return norm_x2 + norm_m2 - 2.0 * inner;
  };
  double fit = 0.0;
  if (o.max_iters == 0) {
    // No sweep: the start (weights ones) and its fit, <X, start> = <MTTKRP_last, U_last>.
    timed(t.other, [&] {
      const int last = order - 1;
      x.mttkrp(last, s.cptrs, r, s.m.get());
      const double inner = c.dot(static_cast<std::size_t>(dims[static_cast<std::size_t>(last)] * r),
                                 s.m.get(), s.ptrs[static_cast<std::size_t>(last)]);
      fit = 1.0 - std::sqrt(std::max(0.0, model_resid2(inner))) / norm_x;
    });
  }
  // Components that fell to zero are revived where an update could not zero them on
  // purpose (non-negative HALS can) and the loop updates the factors itself.
  const bool revivable =
      !x.updates_factors() && std::none_of(constrained.begin(), constrained.end(), std::identity());
  std::vector<int> revivals(static_cast<std::size_t>(r), 0);
  Rng revive_rng(o.seed ^ 0x9e3779b97f4a7c15ULL);
  double previous_resid2 = std::numeric_limits<double>::infinity();
  for (int iter = 1; iter <= o.max_iters; ++iter) {
    if (iter <= o.orthogonalise) {
      // U_n <- Q_n (U_n = Q_n R_n) where I_n >= R, lambda <- 1; G_n = U_n^T U_n
      timed(t.other, [&] {
        for (int n = 0; n < order; ++n) {
          const auto ni = static_cast<std::size_t>(n);
          const index_t in = dims[ni];
          if (in < r) continue;
          orthonormalize(c, s, in, s.ptrs[ni], n);
          if (line_search) line_search->factor_updated(n, nullptr);
          c.syrk(Op::trans, r, in, T(1), s.ptrs[ni], in, T(0), s.gram[ni].get(), r);
          x.factor_changed(n);
        }
        c.fill(s.lambda.get(), static_cast<std::size_t>(r), T(1));
      });
    }
    const bool jump = line_search && LineSearch<T>::tries(iter);
    if (jump) timed(t.other, [&] { line_search->remember(s.ptrs, s.lambda.get(), order - 1); });
    double inner = 0.0;  // <X, model> after the sweep
    for (int n = 0; n < order; ++n) {
      const auto ni = static_cast<std::size_t>(n);
      const index_t in = dims[ni];
      if (fixed[ni]) continue;
      // M = X_(n) (U_{N-1} (.) ... (.) U_0 without U_n)
      // (an operand that updates factors itself needs neither M nor V)
      const bool own = x.updates_factors();
      timed(t.mttkrp, [&] {
        if (!own) x.mttkrp(n, s.cptrs, r, s.m.get());
      });
      // V = *_{m != n} U_m^T U_m (+ ridge I)
      timed(t.gram, [&] {
        if (own) return;
        hadamard_of_grams(c, s, n);
        if (o.ridge > 0.0) c.add_diagonal(r, s.v.get(), r, static_cast<T>(o.ridge));
      });
      // U_n = M V^{-1}, with nonnegative the HALS update of U_n >= 0, or the operand's own
      timed(t.solve, [&] {
        if (own) {
          x.update_factor(n, s.cptrs, r, o.ridge, s.ptrs[ni]);
        } else if (constrained[ni]) {
          if constexpr (!is_complex_v<T>) {
            // Warm start at the current model: U_n diag(lambda) (lambda from mode n-1).
            c.scale_columns(in, r, s.ptrs[ni], in, s.lambda.get());
            hals_update(c, in, r, s.m.get(), s.v.get(), s.ptrs[ni], host);
          }
        } else if (solve_normal_equations(c, s, in, s.ptrs[ni])) {
          ++res.eigen_fallbacks;
        }
      });
      // lambda = column norms (2-norm first, then max(max|.|, 1)); G_n = U_n^T U_n
      timed(t.other, [&] {
        if (n == last_free && !own) {
          // <X, model> = <M, U_n diag(lambda)> for the last mode updated (U_{N-1} unless
          // fixed modes follow it): taken before normalising, so that
          // no product of two tensor-sized scales is ever formed in T.
          inner = c.dot(static_cast<std::size_t>(in * r), s.m.get(), s.ptrs[ni]);
        }
        c.normalize_columns(iter == 1 ? ColumnNorm::two : ColumnNorm::max_or_one, in, r, s.ptrs[ni],
                            in, s.lambda.get());
        if (line_search) line_search->factor_updated(n, s.lambda.get());
        x.factor_changed(n);
      });
      timed(t.gram,
            [&] { c.syrk(Op::trans, r, in, T(1), s.ptrs[ni], in, T(0), s.gram[ni].get(), r); });
    }
    double resid2 = 0.0;
    timed(t.other, [&] { resid2 = model_resid2(inner); });
    if (jump) {
      timed(t.other, [&] {
        resid2 = line_search->jump(x, iter, resid2, previous_resid2, norm_x2, s.ptrs, gram_ptrs,
                                   s.lambda.get(), order - 1);
      });
    }
    previous_resid2 = resid2;
    if (!std::isfinite(resid2)) {
      throw NumericalError(
          "CP-ALS produced a non-finite fit at iteration " + std::to_string(iter) +
          " (overflow: scale the tensor down, or try ridge > 0 or a smaller rank)");
    }
    // Cancellation can leave a tiny negative residual when the model is (nearly) exact.
    const double new_fit = 1.0 - std::sqrt(std::max(0.0, resid2)) / norm_x;
    const double delta = iter == 1 ? new_fit : std::abs(new_fit - fit);
    fit = new_fit;
    res.fit_history.push_back(fit);
    res.iterations = iter;
    const double elapsed = seconds_since(start);
    CpProgress progress{iter, fit, delta, elapsed, {}, {}};
    if constexpr (is_complex_v<T>) {
      progress.complex_model = snapshot;
    } else {
      progress.model = snapshot;
    }
    const bool go_on = !o.callback || o.callback(progress);
    auto stop = stop_after_iteration(iter > 1 && delta < o.tol, go_on, o.time_limit, elapsed);
    // Components at zero (see cp/revive.hpp) start again from random columns, unless the
    // model is already exact to the fit's resolution (sqrt(eps) of ||X||).
    const bool exact = 1.0 - fit <= std::sqrt(std::numeric_limits<real_t<T>>::epsilon());
    if (revivable && !exact && iter < o.max_iters && (!stop || *stop == CpStop::converged)) {
      timed(t.other, [&] {
        std::vector<index_t> dead = zero_components<T>(c, gram_ptrs, r, fixed);
        std::erase_if(dead, [&](index_t j) {
          return revivals[static_cast<std::size_t>(j)] >= kCpMaxRevivals;
        });
        if (dead.empty()) return;
        redraw_columns<T>(c, dims, s.ptrs, fixed, dead, r, s.lambda.get(), revive_rng);
        for (const index_t j : dead) ++revivals[static_cast<std::size_t>(j)];
        res.revived_components += static_cast<int>(dead.size());
        for (int n = 0; n < order; ++n) {
          const auto ni = static_cast<std::size_t>(n);
          if (fixed[ni]) continue;
          if (line_search) line_search->factor_updated(n, nullptr);
          c.syrk(Op::trans, r, dims[ni], T(1), s.ptrs[ni], dims[ni], T(0), s.gram[ni].get(), r);
          x.factor_changed(n);
        }
        stop.reset();
      });
    }
    res.stop = stop.value_or(CpStop::max_iters);
    if (stop) break;
  }

  const auto t0 = Clock::now();
  // The iteration's buffers make room for the model: the line search's copies and M go
  // first, each factor once it is copied out, so that the model is never held twice.
  if (line_search) res.line_search_accepted = line_search->accepted();
  line_search.reset();
  s.m.reset();
  res.model.weights.resize(static_cast<std::size_t>(r));
  c.download(res.model.weights.data(), s.lambda.get(), static_cast<std::size_t>(r));
  for (int n = 0; n < order; ++n) {
    const auto ni = static_cast<std::size_t>(n);
    Matrix<T> f(dims[ni], r);
    c.download(f.data(), s.ptrs[ni], static_cast<std::size_t>(f.size()));
    s.u[ni].reset();
    res.model.factors.push_back(std::move(f));
  }
  if (o.fixed_modes.empty()) {
    arrange(res.model, constrained);
  } else {
    // Free factors to unit 2-norm columns (scale into the weights); fixed ones as given.
    for (int n = 0; n < order; ++n) {
      if (fixed[static_cast<std::size_t>(n)]) continue;
      Matrix<T>& f = res.model.factors[static_cast<std::size_t>(n)];
      for (index_t j = 0; j < r; ++j) {
        double ss = 0.0;
        for (index_t i = 0; i < f.rows(); ++i) ss += abs2(f(i, j));
        const double norm = std::sqrt(ss);
        if (norm == 0.0) continue;
        for (index_t i = 0; i < f.rows(); ++i) f(i, j) = divided(f(i, j), norm);
        res.model.weights[static_cast<std::size_t>(j)] *= static_cast<real_t<T>>(norm);
      }
    }
  }
  res.converged = res.stop == CpStop::converged;
  res.fit = fit;
  res.relative_error = 1.0 - fit;
  t.other += seconds_since(t0);
  t.total = seconds_since(start);
  return res;
}

template <class T>
void arrange(KTensor<T>& model, const std::vector<bool>& nonnegative) {
  const index_t r = model.rank();
  // Unit 2-norm columns, scale into the weights.
  for (Matrix<T>& f : model.factors) {
    for (index_t j = 0; j < r; ++j) {
      double s = 0.0;
      for (index_t i = 0; i < f.rows(); ++i) s += abs2(f(i, j));
      s = std::sqrt(s);
      if (s > 0.0) {
        for (index_t i = 0; i < f.rows(); ++i) f(i, j) = divided(f(i, j), s);
      }
      model.weights[static_cast<std::size_t>(j)] *= static_cast<real_t<T>>(s);
    }
  }
  // Descending weights (stable, so ties keep their order).
  std::vector<index_t> perm(static_cast<std::size_t>(r));
  std::iota(perm.begin(), perm.end(), index_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](index_t a, index_t b) {
    return real_part(model.weights[static_cast<std::size_t>(a)]) >
           real_part(model.weights[static_cast<std::size_t>(b)]);
  });
  std::vector<T> w(static_cast<std::size_t>(r));
  for (index_t j = 0; j < r; ++j)
    w[static_cast<std::size_t>(j)] =
        model.weights[static_cast<std::size_t>(perm[static_cast<std::size_t>(j)])];
  model.weights = w;
  // Column j of each factor takes column perm[j], in place: each cycle j -> perm[j] -> ...
  // of the permutation through one column's buffer.
  std::vector<bool> placed(static_cast<std::size_t>(r), false);
  for (Matrix<T>& f : model.factors) {
    std::fill(placed.begin(), placed.end(), false);
    std::vector<T> first(static_cast<std::size_t>(f.rows()));
    for (index_t j0 = 0; j0 < r; ++j0) {
      if (placed[static_cast<std::size_t>(j0)]) continue;
      std::copy_n(f.col(j0), f.rows(), first.data());
      index_t j = j0;
      for (index_t k = perm[static_cast<std::size_t>(j)]; k != j0;
           j = k, k = perm[static_cast<std::size_t>(k)]) {
        std::copy_n(f.col(k), f.rows(), f.col(j));
        placed[static_cast<std::size_t>(j)] = true;
      }
      std::copy_n(first.data(), f.rows(), f.col(j));
      placed[static_cast<std::size_t>(j)] = true;
    }
  }
  // Signs: the largest-magnitude entry of each column positive, the phases p_n of those
  // entries divided out of every mode and their product P put back into one, so that
  // the model is unchanged. For real T that flips columns in pairs: with an odd count of
  // negative ones (P = -1), one column stays negative. The mode that takes P is the one
  // whose largest entry is smallest over all modes (first mode on ties), so that the
  // phases depend on the model only, not on those the iteration happened to reach.
  const int order = model.order();
  for (index_t j = 0; j < r; ++j) {
    std::vector<T> p(static_cast<std::size_t>(order));
    std::vector<double> peak(static_cast<std::size_t>(order));
    T product(1);
    for (int n = 0; n < order; ++n) {
      const Matrix<T>& f = model.factors[static_cast<std::size_t>(n)];
      index_t imax = 0;
      for (index_t i = 1; i < f.rows(); ++i)
        if (std::abs(f(i, j)) > std::abs(f(imax, j))) imax = i;
      peak[static_cast<std::size_t>(n)] = static_cast<double>(std::abs(f(imax, j)));
      p[static_cast<std::size_t>(n)] = phase(f(imax, j));
      product *= p[static_cast<std::size_t>(n)];
    }
    // (a non-negative mode's peak counts as infinite: its columns keep their signs)
    for (std::size_t n = 0; n < nonnegative.size(); ++n) {
      if (nonnegative[n]) peak[n] = std::numeric_limits<double>::infinity();
    }
    const auto keep = std::min_element(peak.begin(), peak.end()) - peak.begin();
    p[static_cast<std::size_t>(keep)] /= product;  // U_keep / (p_keep / P)
    for (int n = 0; n < order; ++n) {
      const T pn = p[static_cast<std::size_t>(n)];
      if (pn == T(1)) continue;
      Matrix<T>& f = model.factors[static_cast<std::size_t>(n)];
      for (index_t i = 0; i < f.rows(); ++i) f(i, j) /= pn;
    }
  }
}

#define TENFOLD_INSTANTIATE_CP_ALS_STEPS(T)                                          \
  template CpResult<T> run_cp_als<T>(CpOperand<T>&, Compute<T>&, const CpOptions&,   \
                                     std::span<const Matrix<T>>, Clock::time_point); \
  template void arrange<T>(KTensor<T>&, const std::vector<bool>&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CP_ALS_STEPS)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_CP_ALS_STEPS)

}  // namespace detail

}  // namespace tenfold
