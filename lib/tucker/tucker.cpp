// tenfold::tucker: validation, choice of the mode order, and the result.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "core/format.hpp"
#include "core/layout.hpp"
#include "core/memory.hpp"
#include "core/names.hpp"
#include "core/scaling.hpp"
#include "tenfold/error.hpp"
#include "tucker/steps.hpp"

namespace tenfold {
namespace {

std::string list_string(const std::vector<int>& v) {
  std::vector<index_t> w(v.begin(), v.end());
  return detail::shape_string(w);
}

}  // namespace

namespace detail {

void validate_tucker_options(const std::vector<index_t>& dims, const TuckerOptions& o) {
  const int order = static_cast<int>(dims.size());
  validate_dense_shape(dims, "Tucker");
  for (const index_t d : dims) {
    const index_t gram[2] = {d, d};
    checked_numel(gram);
  }
  if (o.eps.has_value() == !o.ranks.empty()) {
    throw InvalidArgument(o.eps.has_value()
                              ? "give either ranks or eps, not both"
                              : "Tucker needs either ranks (one per mode) or a tolerance eps");
  }
  if (o.eps.has_value() && !(*o.eps > 0.0 && *o.eps < 1.0)) {
    throw InvalidOption("eps", "must be in (0, 1), got " + number_string(*o.eps));
  }
  const index_t numel = checked_numel(dims);
  if (!o.ranks.empty()) {
    if (static_cast<int>(o.ranks.size()) != order) {
      throw DimensionMismatch("ranks has " + std::to_string(o.ranks.size()) +
                              " entries, but the tensor of shape " + shape_string(dims) +
                              " has order " + std::to_string(order));
    }
    for (int n = 0; n < order; ++n) {
      const index_t r = o.ranks[static_cast<std::size_t>(n)];
      if (r < 1) {
        throw InvalidArgument("rank of mode " + std::to_string(n) + " must be at least 1, got " +
                              std::to_string(r));
      }
      if (r > dims[static_cast<std::size_t>(n)]) {
        throw InvalidArgument("rank " + std::to_string(r) + " of mode " + std::to_string(n) +
                              " exceeds the mode size " +
                              std::to_string(dims[static_cast<std::size_t>(n)]));
      }
      // The mode-n unfolding has prod_{m != n} I_m columns, which bound its rank too.
      if (const index_t others = numel / dims[static_cast<std::size_t>(n)]; r > others) {
        throw InvalidArgument("rank " + std::to_string(r) + " of mode " + std::to_string(n) +
                              " exceeds " + std::to_string(others) +
                              ", the product of the other sizes of shape " + shape_string(dims) +
                              ": no tensor of that shape has a larger mode rank");
      }
    }
  }
  if (!o.mode_order.empty()) {
    std::vector<int> sorted = o.mode_order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> identity(static_cast<std::size_t>(order));
    std::iota(identity.begin(), identity.end(), 0);
    if (sorted != identity) {
      throw InvalidArgument("mode_order must be a permutation of 0.." + std::to_string(order - 1) +
                            ", got " + list_string(o.mode_order));
    }
  }
  if (o.max_iters < 1) {
    throw InvalidOption("max_iters", "must be at least 1, got " + std::to_string(o.max_iters));
  }
  if (!(o.tol >= 0.0) || !std::isfinite(o.tol)) {
    throw InvalidOption("tol", "must be finite and >= 0, got " + number_string(o.tol));
  }
}

// Given order, or automatic: with ranks, decreasing reduction I_n / r_n; with eps,
// decreasing I_n (the ranks are not known before the mode is processed). Ties go to
// the outer modes first (0, N-1, 1, N-2, ...): a middle mode's Gram and product
// loop over the slices behind it, which are then already shrunk.
std::vector<int> choose_mode_order(const std::vector<index_t>& dims, const TuckerOptions& o) {
  if (!o.mode_order.empty()) return o.mode_order;
  const int last = static_cast<int>(dims.size()) - 1;
  auto outer_rank = [last](int m) { return 2 * std::min(m, last - m) + (m > last - m ? 1 : 0); };
  std::vector<int> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const auto ai = static_cast<std::size_t>(a), bi = static_cast<std::size_t>(b);
    // Reductions compared by cross-multiplication (eps: ranks taken as 1).
    const index_t ra = o.ranks.empty() ? 1 : o.ranks[ai], rb = o.ranks.empty() ? 1 : o.ranks[bi];
    if (dims[ai] * rb != dims[bi] * ra) return dims[ai] * rb > dims[bi] * ra;
    return outer_rank(a) < outer_rank(b);
  });
  return order;
}

}  // namespace detail

namespace {

// Memory: the tensor's device copy, the largest Gram with the eigensolver's 2 I^2
// workspace, the factors, the core, and two intermediates of a TTM chain (HOOI: three,
// with its X x_0 U_0^T), each at most the tensor shrunk in one mode (by the largest
// r_n / I_n; with eps, up to the tensor).
template <class T>
void require_tucker_memory(detail::Compute<T>& c, const std::vector<index_t>& dims,
                           const TuckerOptions& o) {
  const std::vector<index_t>& ranks = o.ranks;
  const double intermediates = o.method == TuckerMethod::hooi ? 3.0 : 2.0;
  double numel = 1.0, core = 1.0, factors = 0.0, gram = 0.0, shrink = ranks.empty() ? 1.0 : 0.0;
  for (std::size_t n = 0; n < dims.size(); ++n) {
    const double in = static_cast<double>(dims[n]);
    const double rn = ranks.empty() ? in : static_cast<double>(ranks[n]);
    numel *= in;
    core *= rn;
    factors += in * rn;
    gram = std::max(gram, 3.0 * in * in);
    shrink = std::max(shrink, rn / in);
  }
  const double copy = c.host_memory() ? 0.0 : numel;
  // HOOI with a callback keeps a copy of the last complete model.
  const double models = o.method == TuckerMethod::hooi && o.callback ? 2.0 : 1.0;
  detail::require_memory(
      c, copy + gram + models * (factors + core) + intermediates * numel * shrink, "Tucker");
}

}  // namespace

namespace {

constexpr detail::Named<TuckerMethod> tucker_methods[] = {{TuckerMethod::sthosvd, "sthosvd"},
                                                          {TuckerMethod::hosvd, "hosvd"},
                                                          {TuckerMethod::hooi, "hooi"}};
constexpr detail::Named<TuckerStop> tucker_stops[] = {{TuckerStop::converged, "converged"},
                                                      {TuckerStop::max_iters, "max_iters"},
                                                      {TuckerStop::callback, "callback"}};

}  // namespace

std::string_view to_string(TuckerStop stop) {
  return detail::name_of<TuckerStop>(tucker_stops, stop);
}

std::string_view to_string(TuckerMethod method) {
  return detail::name_of<TuckerMethod>(tucker_methods, method);
}

TuckerMethod parse_tucker_method(std::string_view name) {
  return detail::parse_named<TuckerMethod>(tucker_methods, name, "Tucker method");
}

namespace {

// Mode m of an order-N view in NumPy axis order is mode N-1-m of the row-major view,
// and conversely.
std::vector<int> reverse_mode_numbers(std::vector<int> modes, int order) {
  for (int& m : modes) m = order - 1 - m;
  return modes;
}

// Options for a row-major view, given in its mode order, as they read in NumPy axis
// order (layout col_major).
TuckerOptions in_axis_order(TuckerOptions o, int order) {
  o.layout = Layout::col_major;
  o.ranks = detail::reversed(std::move(o.ranks));
  o.mode_order = reverse_mode_numbers(std::move(o.mode_order), order);
  return o;
}

// Runs the method on x; with `reversed` (a C-order array read in place) everything
// whose order matters follows NumPy axis order, the reverse of x's modes.
template <class T>
TuckerResult<T> run_tucker(detail::Compute<T>& c, TensorView<const T> x,
                           const TuckerOptions& options, bool reversed,
                           std::chrono::steady_clock::time_point start) {
  using Clock = std::chrono::steady_clock;
  require_tucker_memory(c, x.dims(), options);
  detail::TuckerState<T> s(c, x);
  s.callback = options.callback;
  s.start = start;
  const int order = x.order();
  // With eps: the discarded eigenvalues of each mode sum to at most eps^2 ||X||^2 / N.
  const detail::Truncation truncation{
      options.ranks, options.eps ? *options.eps * *options.eps * s.norm_x2 / order : 0.0};

  TuckerResult<T> res;
  bool go_on = true;
  if (options.method == TuckerMethod::hosvd) {
    detail::hosvd(s, truncation);
  } else {
    res.mode_order =
        reversed ? reverse_mode_numbers(detail::choose_mode_order(detail::reversed(s.dims),
                                                                  in_axis_order(options, order)),
                                        order)
                 : detail::choose_mode_order(s.dims, options);
    go_on = detail::sthosvd(s, truncation, res.mode_order);
  }
  if (options.method == TuckerMethod::hooi && !go_on) {
    // Stopped at the last step of the start: the start is the result.
    res.error_history.push_back(s.relative_error());
    res.stop = TuckerStop::callback;
    res.relative_error = res.error_history.back();
  } else if (options.method == TuckerMethod::hooi) {
    // Sweeps over the modes in axis order.
    std::vector<int> sweep(static_cast<std::size_t>(order));
    std::iota(sweep.begin(), sweep.end(), 0);
    if (reversed) sweep = detail::reversed(std::move(sweep));
    const auto h = detail::hooi(s, sweep, options.max_iters, options.tol, res.error_history);
    res.iterations = h.iterations;
    res.stop = h.stop;
    res.relative_error = res.error_history.back();
  } else {
    res.relative_error = s.relative_error();
  }

  // Download the model.
  TTensor<T>& m = res.model;
  m.core = Tensor<T>(s.ranks);
  c.download(m.core.data(), s.core.get(), static_cast<std::size_t>(m.core.numel()));
  double stored = static_cast<double>(m.core.numel());
  for (int n = 0; n < order; ++n) {
    const auto ni = static_cast<std::size_t>(n);
    Matrix<T> f(s.dims[ni], s.ranks[ni]);
    c.download(f.data(), s.u[ni].get(), static_cast<std::size_t>(f.size()));
    m.factors.push_back(std::move(f));
    stored += static_cast<double>(s.dims[ni] * s.ranks[ni]);
  }
  detail::fix_signs(m);
  res.converged = res.stop == TuckerStop::converged;
  res.eigenvalues = std::move(s.eigenvalues);
  res.compression_ratio = static_cast<double>(x.numel()) / stored;
  res.timings = s.timings;
  res.timings.total = std::chrono::duration<double>(Clock::now() - start).count();
  return res;
}

// tucker() of a validated tensor, as its layout says.
template <class T>
TuckerResult<T> tucker_in_layout(TensorView<const T> x, const TuckerOptions& options,
                                 std::chrono::steady_clock::time_point start) {
  auto c = detail::make_compute<T>(options.backend);
  if (!detail::copies_to_axis_order(options.layout, options.row_major_input, x.numel(),
                                    sizeof(T))) {
    return run_tucker(*c, x, options, options.layout == Layout::row_major, start);
  }
  // Row-major, copied: run on the array's column-major copy in NumPy axis order (one
  // more copy of the tensor in memory), the arithmetic of its Fortran-order copy, and
  // give the model back in the caller's mode order.
  const int order = x.order();
  TuckerOptions o = in_axis_order(options, order);
  if (options.callback) {
    // Progress in the caller's mode order.
    o.callback = [&options, order](TuckerProgress p) {
      p.mode = order - 1 - p.mode;
      return options.callback(p);
    };
  }
  TuckerResult<T> res;
  {
    // Released before the total is taken: freeing the copy is part of the call.
    const detail::ReversedTensor<T> axis_order(x);
    res = run_tucker(*c, axis_order.view(), o, false, start);
  }
  res.model.core = detail::reverse_modes<T>(std::as_const(res.model.core).view());
  res.model.factors = detail::reversed(std::move(res.model.factors));
  res.eigenvalues = detail::reversed(std::move(res.eigenvalues));
  res.mode_order = reverse_mode_numbers(std::move(res.mode_order), order);
  return res;
}

}  // namespace

template <class T>
TuckerResult<T> tucker(TensorView<const T> x, const TuckerOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  detail::validate_tucker_options(x.dims(), options);
  // Finite entries, and magnitudes far from 1: the problem scaled by a power of two
  // (core/scaling.hpp; one pass over x for both); the factors and the relative error do
  // not change, the core scales back by 2^-e and the eigenvalues (squares) by 2^-2e.
  const detail::Balancing b = detail::checked_balancing(x, "Tucker input tensor");
  TuckerResult<T> res;
  if (b.exponent == 0) {
    res = tucker_in_layout(x, options, start);
  } else {
    res = tucker_in_layout<T>(detail::scaled(x, b.exponent).view(), options, start);
    detail::scale_back(
        std::span<T>(res.model.core.data(), static_cast<std::size_t>(res.model.core.numel())),
        b.exponent, b, "the entries of the Tucker core");
    for (std::vector<double>& e : res.eigenvalues) {
      detail::scale_back(std::span<double>(e), 2 * b.exponent, b, "the Gram eigenvalues");
    }
  }
  res.timings.total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return res;
}

template TuckerResult<float> tucker<float>(TensorView<const float>, const TuckerOptions&);
template TuckerResult<double> tucker<double>(TensorView<const double>, const TuckerOptions&);

}  // namespace tenfold
