// Non-negative Tucker (include/tenfold/nonnegative_tucker.hpp): TensorLy 0.10's
// non_negative_tucker (multiplicative updates, Kim and Choi 2007) and
// non_negative_tucker_hals (HALS on the factors, FISTA on the core), iterate for iterate.
//
// Both need, for the mode n being updated, M_n = X_(n) B and V_n = B^T B with B the
// unfolded model without U_n (B^T = [G x_{m != n} U_m]_(n)); neither forms B:
//   M_n = [X x_{m != n} U_m^T]_(n) G_(n)^T,   V_n = [G x_{m != n} Gamma_m]_(n) G_(n)^T,
// Gamma_m = U_m^T U_m. X x_{m != n} U_m^T is the running prefix P = X x_{swept m} U_m^T
// (one TTM per mode, cheapest on the tensor already shrunk) times the modes not yet swept,
// and the prefix after the sweep is the core's X x_0 U_0^T ... : two products with the
// full tensor per iteration. The error comes from the core too:
//   ||X - X^||^2 = ||X||^2 - 2 <X x_0 U_0^T ..., G> + <G, G x_0 Gamma_0 ...>.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "core/dense_mttkrp.hpp"
#include "core/format.hpp"
#include "core/hals.hpp"
#include "core/host_lapack.hpp"
#include "core/memory.hpp"
#include "core/multilinear.hpp"
#include "core/names.hpp"
#include "core/random.hpp"
#include "tenfold/error.hpp"
#include "tenfold/nonnegative_tucker.hpp"
#include "tucker/steps.hpp"

namespace tenfold {
namespace {

using detail::Buffer;
using detail::Compute;
using detail::ModeProduct;
using detail::Op;
using Clock = std::chrono::steady_clock;

constexpr double kMultiplicativeFloor = 10e-12;  // TensorLy's epsilon of the updates
constexpr double kFistaFloor = 1e-8;             // fista's epsilon: the core stays >= it
constexpr double kFistaTol = 1e-8;               // fista's tol
constexpr double kActiveSetTol = 10e-8;          // active_set_nnls's tol

constexpr detail::Named<NonnegativeTuckerMethod> methods[] = {
    {NonnegativeTuckerMethod::multiplicative, "multiplicative"},
    {NonnegativeTuckerMethod::hals, "hals"}};

template <class T>
struct State {
  State(Compute<T>& compute, TensorView<const T> tensor, std::vector<index_t> r)
      : c(compute), dims(tensor.dims()), ranks(std::move(r)), x(compute, tensor) {
    norm_x2 = x.norm_squared();
    u.resize(dims.size());
    gram.resize(dims.size());
  }

  std::vector<ModeProduct<T>> factor_products(int skip, Op op) const {
    std::vector<ModeProduct<T>> p;
    for (int m = 0; m < static_cast<int>(dims.size()); ++m) {
      const auto mi = static_cast<std::size_t>(m);
      if (m != skip)
        p.push_back({m, op, u[mi].get(), dims[mi], op == Op::trans ? ranks[mi] : dims[mi]});
    }
    return p;
  }
  // G x_{m != skip} Gamma_m (skip = -1: every mode), in cw0 or cw1.
  const T* core_times_grams(const T* g, int skip) {
    std::vector<ModeProduct<T>> p;
    for (int m = 0; m < static_cast<int>(dims.size()); ++m) {
      const auto mi = static_cast<std::size_t>(m);
      if (m != skip) p.push_back({m, Op::none, gram[mi].get(), ranks[mi], ranks[mi]});
    }
    std::vector<index_t> shape = ranks;
    return detail::ttm_chain<T>(c, g, shape, p, cw0, cw1);
  }
  void update_gram(std::size_t n) {
    // Gamma_n = U_n^T U_n
    c.syrk(Op::trans, ranks[n], dims[n], T(1), u[n].get(), dims[n], T(0),
           ensure(c, gram[n], static_cast<std::size_t>(ranks[n] * ranks[n])), ranks[n]);
  }
  std::size_t core_size() const { return static_cast<std::size_t>(checked_numel(ranks)); }

  Compute<T>& c;
  std::vector<index_t> dims, ranks;
  detail::DeviceTensor<T> x;
  double norm_x2 = 0.0;
  std::vector<Buffer<T>> u, gram;
  Buffer<T> core, prefix[2], work0, work1, cw0, cw1, m, v, scratch;
  std::vector<T> host, host2, host3;
};

// a <- a .* max(num, e) ./ max(den, e) on n entries (backend memory): the multiplicative
// update, with TensorLy's floor e on both.
template <class T>
void multiplicative_update(State<T>& s, std::size_t n, T* a, const T* num, const T* den) {
  s.host.resize(3 * n);
  T* ha = s.host.data();
  s.c.download(ha, a, n);
  s.c.download(ha + n, num, n);
  s.c.download(ha + 2 * n, den, n);
  const T e = static_cast<T>(kMultiplicativeFloor);
  for (std::size_t i = 0; i < n; ++i) ha[i] *= std::max(ha[n + i], e) / std::max(ha[2 * n + i], e);
  s.c.upload(a, ha, n);
}

// FISTA on the core (TensorLy's fista with UtM = E = X x_0 U_0^T ..., UtU = the Grams, lr =
// prod 1 / lambda_max(Gamma_n)): y_{k+1} = max(x_k - lr (y x Gamma - E), floor), momentum
// t_{k+1} = (1 + sqrt(1 + 4 t_k^2)) / 2, y = x_{k+1} + (t_k - 1) / t_{k+1} (x_{k+1} - x_k);
// stops when |sum(x_k - x_{k+1})| < tol of the first pass's.
template <class T>
void fista_core(State<T>& s, const T* e, int passes) {
  Compute<T>& c = s.c;
  const std::size_t size = s.core_size();
  double lr = 1.0;
  for (std::size_t n = 0; n < s.dims.size(); ++n) {
    const index_t r = s.ranks[n];
    // lambda_max(Gamma_n), from a copy (syevd overwrites it)
    std::vector<T> w(static_cast<std::size_t>(r));
    T* g = ensure(c, s.scratch, static_cast<std::size_t>(r * r));
    c.copy(g, s.gram[n].get(), static_cast<std::size_t>(r * r));
    c.syevd(r, g, r, w.data());
    lr /= static_cast<double>(w.back());
  }
  std::vector<T>& x = s.host;   // x_k
  std::vector<T>& y = s.host2;  // the extrapolated point
  std::vector<T>& he = s.host3;
  x.resize(size);
  he.resize(size);
  c.download(x.data(), s.core.get(), size);
  c.download(he.data(), e, size);
  y = x;
  T* dy = ensure(c, s.scratch, size);
  double momentum_old = 1.0, norm0 = 0.0;
  const T floor = static_cast<T>(kFistaFloor);
  std::vector<T> grad(size);
  for (int pass = 0; pass < passes; ++pass) {
    // gradient y x_0 Gamma_0 ... - E
    c.upload(dy, y.data(), size);
    c.download(grad.data(), s.core_times_grams(dy, -1), size);
    const double momentum = (1.0 + std::sqrt(1.0 + 4.0 * momentum_old * momentum_old)) / 2.0;
    const T beta = static_cast<T>((momentum_old - 1.0) / momentum);
    double change = 0.0;
    for (std::size_t i = 0; i < size; ++i) {
      T next = y[i] - static_cast<T>(lr) * (grad[i] - he[i]);
      if (next < floor) next = floor;
      y[i] = next + beta * (next - x[i]);
      change += static_cast<double>(x[i] - next);
      x[i] = next;
    }
    momentum_old = momentum;
    const double norm = std::abs(change);
    if (pass == 0) norm0 = norm;
    if (norm < kFistaTol * norm0) break;
  }
  c.upload(s.core.get(), x.data(), size);
}

// TensorLy's active_set_nnls (Bro and de Jong 1997) on the core's normal equations
// K vec(G) = vec(E), K = Gamma_{N-1} (x) ... (x) Gamma_0 (the column-major vec), in double on
// the host, step for step: per pass the coordinate of largest gradient b - K x joins the
// passive set P; s = K_PP^{-1} b_P; while some s_P <= 0, x moves to the boundary, x += alpha
// (s - x), and P becomes {x > 0}; then x = clip(s, 0, max s), until no active gradient
// exceeds tol. A singular first solve restarts from x = 0 (TensorLy's except branch).
template <class T>
void active_set_core(State<T>& s, const T* e, int passes) {
  const std::size_t p = s.core_size();
  detail::require_memory(
      s.c, static_cast<double>(p) * static_cast<double>(p) * sizeof(double) / sizeof(T),
      "the active-set core solver's Kronecker product of the Grams");
  std::vector<double> k(p * p, 1.0), b(p), x(p), sv(p, 0.0), grad(p);
  {
    // K(i, j) = prod_n Gamma_n(i_n, j_n) over the multi-indices of i and j
    std::vector<T> g;
    std::size_t stride = 1;
    for (std::size_t n = 0; n < s.dims.size(); ++n) {
      const auto r = static_cast<std::size_t>(s.ranks[n]);
      g.resize(r * r);
      s.c.download(g.data(), s.gram[n].get(), g.size());
      for (std::size_t j = 0; j < p; ++j)
        for (std::size_t i = 0; i < p; ++i)
          k[i + j * p] *= static_cast<double>(g[(i / stride) % r + ((j / stride) % r) * r]);
      stride *= r;
    }
    s.host.resize(p);
    s.c.download(s.host.data(), e, p);
    std::copy(s.host.begin(), s.host.end(), b.begin());
    s.c.download(s.host.data(), s.core.get(), p);
    std::copy(s.host.begin(), s.host.end(), x.begin());
  }
  const auto gradient = [&] {
    // b - K x
    for (std::size_t i = 0; i < p; ++i) {
      double v = b[i];
      for (std::size_t j = 0; j < p; ++j) v -= k[i + j * p] * x[j];
      grad[i] = v;
    }
  };
  std::vector<bool> passive(p);
  // s = K_PP^{-1} b_P (0 off P); false where K_PP is exactly singular or s not finite
  const auto solve = [&] {
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < p; ++i)
      if (passive[i]) idx.push_back(i);
    const std::size_t q = idx.size();
    std::vector<double> a(q * q), rhs(q);
    for (std::size_t jj = 0; jj < q; ++jj) {
      rhs[jj] = b[idx[jj]];
      for (std::size_t ii = 0; ii < q; ++ii) a[ii + jj * q] = k[idx[ii] + idx[jj] * p];
    }
    if (q > 0 && !detail::solve_general(static_cast<index_t>(q), 1, std::move(a), rhs.data())) {
      return false;
    }
    std::fill(sv.begin(), sv.end(), 0.0);
    for (std::size_t jj = 0; jj < q; ++jj) sv[idx[jj]] = rhs[jj];
    return std::all_of(rhs.begin(), rhs.end(), [](double v) { return std::isfinite(v); });
  };
  const auto min_passive = [&] {
    double m = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < p; ++i)
      if (passive[i]) m = std::min(m, sv[i]);
    return m;
  };
  const auto argmax = [](const std::vector<double>& v) {
    return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  gradient();
  for (std::size_t i = 0; i < p; ++i) passive[i] = x[i] > 0.0;
  for (int pass = 0; pass < passes; ++pass) {
    if (pass > 0 || std::all_of(x.begin(), x.end(), [](double v) { return v == 0.0; })) {
      passive[argmax(grad)] = true;
    }
    if (!solve()) {
      // TensorLy's except branch: from x = 0 with the largest gradient's coordinate
      std::fill(x.begin(), x.end(), 0.0);
      std::fill(passive.begin(), passive.end(), false);
      passive[argmax(grad)] = true;
      if (!solve()) {
        throw NumericalError(
            "non-negative Tucker: the active-set core solver met a singular system");
      }
    }
    if (min_passive() <= 0.0) {
      for (std::size_t step = 0; step < p; ++step) {
        // alpha = min over {i in P, s_i <= 0} of x_i / (x_i - s_i) (NaN propagates)
        double alpha = std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < p; ++i) {
          if (!passive[i] || sv[i] > 0.0) continue;
          const double ratio = x[i] / (x[i] - sv[i]);
          alpha = std::isnan(ratio) || std::isnan(alpha) ? std::nan("") : std::min(alpha, ratio);
        }
        for (std::size_t i = 0; i < p; ++i) {
          x[i] += alpha * (sv[i] - x[i]);
          passive[i] = x[i] > 0.0;
        }
        if (!solve()) {
          throw NumericalError(
              "non-negative Tucker: the active-set core solver met a singular system");
        }
        if (std::none_of(passive.begin(), passive.end(), [](bool v) { return v; }) ||
            min_passive() > 0.0) {
          break;
        }
      }
    }
    // x = clip(s, 0, max s)
    const double top = *std::max_element(sv.begin(), sv.end());
    for (std::size_t i = 0; i < p; ++i) x[i] = std::min(std::max(sv[i], 0.0), top);
    gradient();
    double worst = -std::numeric_limits<double>::infinity();
    bool any_active = false;
    for (std::size_t i = 0; i < p; ++i) {
      if (passive[i]) continue;
      any_active = true;
      worst = std::max(worst, grad[i]);
    }
    if (!any_active || worst <= kActiveSetTol) break;
  }
  for (std::size_t i = 0; i < p; ++i) s.host[i] = static_cast<T>(x[i]);
  s.c.upload(s.core.get(), s.host.data(), p);
}

// ||X - X^|| / ||X|| from E = X x_0 U_0^T ... (see the top); below 16 sqrt(eps), where that
// cancels, from the formed residual for tensors of at most kFormedResidualMaxBytes.
template <class T>
double model_error(State<T>& s, const T* e) {
  if (s.norm_x2 <= 0.0) return 0.0;
  Compute<T>& c = s.c;
  const std::size_t size = s.core_size();
  const double inner = c.dot(size, e, s.core.get());
  const double model2 = c.dot(size, s.core.get(), s.core_times_grams(s.core.get(), -1));
  const double formula = std::sqrt(std::max(0.0, s.norm_x2 - 2.0 * inner + model2) / s.norm_x2);
  const auto numel = static_cast<std::size_t>(checked_numel(s.dims));
  const double bytes = static_cast<double>(numel) * sizeof(T);
  if (formula >= detail::kDirectErrorBelow * std::sqrt(std::numeric_limits<T>::epsilon()) ||
      bytes > static_cast<double>(detail::kFormedResidualMaxBytes) ||
      2.0 * bytes > static_cast<double>(c.available_bytes())) {
    return formula;
  }
  // X^ = G x_0 U_0 ..., X^ - X in place, and its norm
  std::vector<index_t> shape = s.ranks;
  const T* xh = detail::ttm_chain<T>(c, s.core.get(), shape, s.factor_products(-1, Op::none),
                                     s.work0, s.work1);
  T* residual = xh == s.work0.get() ? s.work0.get() : s.work1.get();
  c.axpy(numel, T(-1), s.x.data(), residual);
  return std::sqrt(c.sum_squares(numel, residual) / s.norm_x2);
}

// One iteration: the modes in `order`, then the core; returns the relative error.
template <class T>
double iterate(State<T>& s, const NonnegativeTuckerOptions& o, const std::vector<int>& order) {
  Compute<T>& c = s.c;
  const T* prefix = s.x.data();
  std::vector<index_t> pdims = s.dims;
  std::vector<bool> swept(s.dims.size(), false);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const int n = order[k];
    const auto ni = static_cast<std::size_t>(n);
    const index_t in = s.dims[ni], rn = s.ranks[ni];
    // Y = P x_{m not swept, m != n} U_m^T
    std::vector<ModeProduct<T>> rest;
    for (const ModeProduct<T>& p : s.factor_products(n, Op::trans))
      if (!swept[static_cast<std::size_t>(p.mode)]) rest.push_back(p);
    std::vector<index_t> ydims = pdims;
    const T* y = detail::ttm_chain<T>(c, prefix, ydims, rest, s.work0, s.work1);
    // M = Y_(n) G_(n)^T (I_n x r_n), V = [G x_{m != n} Gamma_m]_(n) G_(n)^T (r_n x r_n)
    T* m = ensure(c, s.m, static_cast<std::size_t>(in * rn));
    detail::mode_cross(c, y, ydims, n, s.core.get(), rn, m);
    T* v = ensure(c, s.v, static_cast<std::size_t>(rn * rn));
    detail::mode_gram(c, s.core_times_grams(s.core.get(), n), s.ranks, n, v, s.core.get());
    if (o.method == NonnegativeTuckerMethod::multiplicative) {
      // U_n <- U_n .* M ./ (U_n V)
      T* d = ensure(c, s.scratch, static_cast<std::size_t>(in * rn));
      c.gemm(Op::none, Op::none, in, rn, rn, T(1), s.u[ni].get(), in, v, rn, T(0), d, in);
      multiplicative_update(s, static_cast<std::size_t>(in * rn), s.u[ni].get(), m, d);
    } else {
      // HALS passes over U_n's columns (TensorLy's hals_nnls: 5 passes, its measure of change)
      detail::hals_update(c, in, rn, m, v, s.u[ni].get(), s.host, detail::HalsChange::tensorly);
    }
    s.update_gram(ni);
    // P <- P x_n U_n^T
    std::vector<index_t> next = pdims;
    next[ni] = rn;
    T* p = ensure(c, s.prefix[k % 2], static_cast<std::size_t>(checked_numel(next)));
    detail::ttm(c, prefix, pdims, n, Op::trans, s.u[ni].get(), in, rn, p);
    prefix = p;
    pdims = std::move(next);
    swept[ni] = true;
  }
  // The core from E = X x_0 U_0^T ... (the prefix)
  if (o.method == NonnegativeTuckerMethod::multiplicative) {
    // G <- G .* E ./ (G x_0 Gamma_0 ...)
    multiplicative_update(s, s.core_size(), s.core.get(), prefix,
                          s.core_times_grams(s.core.get(), -1));
  } else {
    const int passes = o.core_iters > 0 ? o.core_iters : o.max_iters;
    if (o.core_solver == NonnegativeTuckerCoreSolver::fista) {
      fista_core(s, prefix, passes);
    } else {
      active_set_core(s, prefix, passes);
    }
  }
  return model_error(s, prefix);
}

// Factor columns to unit 2-norm, the norms into the core's matching slices (TensorLy's
// tucker_normalize; zero columns stay, zeroing their slice).
template <class T>
void normalize(State<T>& s) {
  Compute<T>& c = s.c;
  for (std::size_t n = 0; n < s.dims.size(); ++n) {
    const index_t r = s.ranks[n];
    T* lambda = ensure(c, s.scratch, static_cast<std::size_t>(r));
    c.normalize_columns(detail::ColumnNorm::two, s.dims[n], r, s.u[n].get(), s.dims[n], lambda);
    // G <- G x_n diag(lambda)
    std::vector<T> d(static_cast<std::size_t>(r * r), T(0)), l(static_cast<std::size_t>(r));
    c.download(l.data(), lambda, l.size());
    for (index_t j = 0; j < r; ++j)
      d[static_cast<std::size_t>(j * (r + 1))] = l[static_cast<std::size_t>(j)];
    T* diag = ensure(c, s.m, d.size());
    c.upload(diag, d.data(), d.size());
    T* g = ensure(c, s.cw0, s.core_size());
    detail::ttm(c, s.core.get(), s.ranks, static_cast<int>(n), Op::none, diag, r, r, g);
    c.copy(s.core.get(), g, s.core_size());
    s.update_gram(n);
  }
}

void validate_options(const std::vector<index_t>& dims, const NonnegativeTuckerOptions& o) {
  detail::validate_dense_shape(dims, "Non-negative Tucker");
  const std::size_t order = dims.size();
  if (o.ranks.size() != order) {
    throw DimensionMismatch("ranks has " + std::to_string(o.ranks.size()) +
                            " entries, but the tensor of shape " + detail::shape_string(dims) +
                            " has order " + std::to_string(order));
  }
  for (std::size_t n = 0; n < order; ++n) {
    if (o.ranks[n] < 1) {
      throw InvalidArgument("rank of mode " + std::to_string(n) + " must be at least 1, got " +
                            std::to_string(o.ranks[n]));
    }
    if (o.ranks[n] > dims[n]) {
      throw InvalidArgument("rank " + std::to_string(o.ranks[n]) + " of mode " + std::to_string(n) +
                            " exceeds the mode size " + std::to_string(dims[n]));
    }
  }
  if (o.max_iters < 0) {
    throw InvalidOption("max_iters", "must be at least 0, got " + std::to_string(o.max_iters));
  }
  if (o.core_iters < 0) {
    throw InvalidOption("core_iters", "must be at least 0, got " + std::to_string(o.core_iters));
  }
  if (!(o.tol >= 0.0) || !std::isfinite(o.tol)) {
    throw InvalidOption("tol", "must be finite and >= 0, got " + detail::number_string(o.tol));
  }
}

template <class T>
void validate_start(const TTensor<T>& start, const std::vector<index_t>& dims,
                    const std::vector<index_t>& ranks) {
  start.validate();
  if (start.dims() != dims || start.ranks() != ranks) {
    throw DimensionMismatch("the start has shape " + detail::shape_string(start.dims()) +
                            " and ranks " + detail::shape_string(start.ranks()) +
                            ", expected shape " + detail::shape_string(dims) + " and ranks " +
                            detail::shape_string(ranks));
  }
  const auto negative = [](const std::vector<T>& v, const std::string& what) {
    const auto it = std::find_if(v.begin(), v.end(), [](T a) { return a < T(0); });
    if (it != v.end()) {
      throw InvalidArgument(what + " has a negative entry (" +
                            detail::number_string(static_cast<double>(*it)) + " at position " +
                            std::to_string(it - v.begin()) +
                            "): a non-negative Tucker start must be >= 0");
    }
  };
  negative(start.core.values(), "the start's core");
  for (std::size_t n = 0; n < start.factors.size(); ++n) {
    negative(start.factors[n].values(), "start factor " + std::to_string(n));
  }
}

// Memory: the device copy, two prefixes and two TTM intermediates, each at most the tensor
// shrunk in one mode (by the largest r_n / I_n), and the model.
template <class T>
void require_memory(Compute<T>& c, const std::vector<index_t>& dims,
                    const std::vector<index_t>& ranks) {
  double numel = 1.0, core = 1.0, factors = 0.0, shrink = 0.0;
  for (std::size_t n = 0; n < dims.size(); ++n) {
    numel *= static_cast<double>(dims[n]);
    core *= static_cast<double>(ranks[n]);
    factors += static_cast<double>(dims[n] * ranks[n]);
    shrink = std::max(shrink, static_cast<double>(ranks[n]) / static_cast<double>(dims[n]));
  }
  const double copy = c.host_memory() ? 0.0 : numel;
  detail::require_memory(c, copy + 4.0 * numel * shrink + 2.0 * factors + 4.0 * core,
                         "Non-negative Tucker");
}

// The start in s: given, |ST-HOSVD| with the core |X x_0 |U_0|^T ...|, or random.
template <class T>
void make_start(State<T>& s, TensorView<const T> x, const NonnegativeTuckerOptions& o,
                const TTensor<T>* start) {
  Compute<T>& c = s.c;
  TTensor<T> model;
  if (start != nullptr) {
    model = *start;
  } else if (o.init == NonnegativeTuckerInit::random) {
    detail::Rng rng(o.seed);
    model.core = Tensor<T>(s.ranks);
    for (T& a : model.core.values()) a = static_cast<T>(rng.uniform() + 0.01);
    for (std::size_t n = 0; n < s.dims.size(); ++n) {
      Matrix<T> f(s.dims[n], s.ranks[n]);
      for (T& a : f.values()) a = static_cast<T>(rng.uniform());
      model.factors.push_back(std::move(f));
    }
  } else {
    TuckerOptions t;
    t.ranks = s.ranks;
    t.method = TuckerMethod::hosvd;
    t.layout = o.layout;
    t.backend = o.backend;
    model = tucker(x, t).model;
    for (Matrix<T>& f : model.factors)
      for (T& a : f.values()) a = std::abs(a);
  }
  for (std::size_t n = 0; n < s.dims.size(); ++n) {
    const auto size = static_cast<std::size_t>(s.dims[n] * s.ranks[n]);
    c.upload(ensure(c, s.u[n], size), model.factors[n].data(), size);
    s.update_gram(n);
  }
  T* g = ensure(c, s.core, s.core_size());
  if (start != nullptr || o.init == NonnegativeTuckerInit::random) {
    c.upload(g, model.core.data(), s.core_size());
    return;
  }
  // G = |X x_0 |U_0|^T ...|
  std::vector<index_t> shape = s.dims;
  const T* e = detail::ttm_chain<T>(c, s.x.data(), shape, s.factor_products(-1, Op::trans), s.work0,
                                    s.work1);
  s.host.resize(s.core_size());
  c.download(s.host.data(), e, s.core_size());
  for (T& a : s.host) a = std::abs(a);
  c.upload(g, s.host.data(), s.core_size());
}

}  // namespace

std::string_view to_string(NonnegativeTuckerMethod method) {
  return detail::name_of<NonnegativeTuckerMethod>(methods, method);
}

NonnegativeTuckerMethod parse_nonnegative_tucker_method(std::string_view name) {
  return detail::parse_named<NonnegativeTuckerMethod>(methods, name, "non-negative Tucker method");
}

template <class T>
NonnegativeTuckerResult<T> nonnegative_tucker(TensorView<const T> x,
                                              const NonnegativeTuckerOptions& options,
                                              const TTensor<T>* start) {
  const auto t0 = Clock::now();
  validate_options(x.dims(), options);
  if (start != nullptr) validate_start(*start, x.dims(), options.ranks);
  // The updates' floors are absolute (as TensorLy's), so the input is not rescaled.
  check_finite(x, "Non-negative Tucker input tensor");
  const auto compute = detail::make_compute<T>(options.backend);
  Compute<T>& c = *compute;
  require_memory(c, x.dims(), options.ranks);
  State<T> s(c, x, options.ranks);
  make_start(s, x, options, start);
  // The modes in NumPy axis order: the view's reversed for a C-order array.
  std::vector<int> order(s.dims.size());
  std::iota(order.begin(), order.end(), 0);
  if (options.layout == Layout::row_major) std::reverse(order.begin(), order.end());
  NonnegativeTuckerResult<T> res;
  for (int it = 0; it < options.max_iters; ++it) {
    const double error = iterate(s, options, order);
    res.error_history.push_back(error);
    res.iterations = it + 1;
    // TensorLy's rule: from the third iteration on, |e_{k-1} - e_k| < tol
    if (it > 1 && options.tol > 0.0 &&
        std::abs(res.error_history[res.error_history.size() - 2] - error) < options.tol) {
      res.converged = true;
      break;
    }
    if (options.normalize_factors) normalize(s);
    if (options.callback &&
        !options.callback(
            {it + 1, error, std::chrono::duration<double>(Clock::now() - t0).count()})) {
      break;
    }
  }
  if (res.error_history.empty()) {
    // No iteration: the start's error, from E = X x_0 U_0^T ...
    std::vector<index_t> shape = s.dims;
    const T* e = detail::ttm_chain<T>(c, s.x.data(), shape, s.factor_products(-1, Op::trans),
                                      s.work0, s.work1);
    T* held = ensure(c, s.prefix[0], s.core_size());
    c.copy(held, e, s.core_size());
    res.relative_error = model_error(s, held);
  } else {
    res.relative_error = res.error_history.back();
  }
  TTensor<T>& m = res.model;
  m.core = Tensor<T>(s.ranks);
  c.download(m.core.data(), s.core.get(), s.core_size());
  for (std::size_t n = 0; n < s.dims.size(); ++n) {
    Matrix<T> f(s.dims[n], s.ranks[n]);
    c.download(f.data(), s.u[n].get(), static_cast<std::size_t>(f.size()));
    m.factors.push_back(std::move(f));
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

template NonnegativeTuckerResult<float> nonnegative_tucker<float>(TensorView<const float>,
                                                                  const NonnegativeTuckerOptions&,
                                                                  const TTensor<float>*);
template NonnegativeTuckerResult<double> nonnegative_tucker<double>(TensorView<const double>,
                                                                    const NonnegativeTuckerOptions&,
                                                                    const TTensor<double>*);

}  // namespace tenfold
