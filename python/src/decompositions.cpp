// tenfold._tenfold.cp_als and .tucker: the arrays go in as views, the GIL is released
// while the library computes, and a check after every CP-ALS iteration and every Tucker
// mode step lets Ctrl-C stop the run. cp_dict, the one CpResult -> dict conversion, serves
// the sparse binding too.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::python {

namespace {

template <class T>
constexpr bool is_complex_v = nb::detail::is_complex_v<T>;

// Seconds per phase, as a dict.
nb::dict timings_dict(std::initializer_list<std::pair<const char*, double>> phases) {
  nb::dict t;
  for (const auto& [name, seconds] : phases) t[name] = seconds;
  return t;
}

template <class T>
nb::dict cp_als_typed(const InArray& tensor, index_t rank, int n_iter_max, const std::string& init,
                      double tol, std::uint64_t seed, const std::vector<InArray>& initial_factors,
                      nb::object callback, const std::string& backend, bool line_search,
                      double ridge, const std::optional<InArray>& mask, bool nonnegative,
                      int n_starts, const std::string& compress, const std::vector<int>& fixed_axes,
                      bool callback_model, int orthogonalise, const std::string& line_search_rule,
                      index_t sparsity, const std::vector<int>& nonnegative_axes,
                      const std::string& solver, index_t samples, int fit_check_every) {
  CpOptions o;
  const TensorView<const T> x = tensor_view<T>(tensor, "tensor", o.layout);
  const bool reverse = o.layout == Layout::row_major;
  o.rank = rank;
  o.max_iters = n_iter_max;
  o.tol = tol;
  o.seed = seed;
  o.init = parse_cp_init(init);
  o.backend = parse_backend(backend);
  o.line_search = line_search;
  o.ridge = ridge;
  o.nonnegative = nonnegative;
  o.n_starts = n_starts;
  o.compress = parse_cp_compress(compress);
  o.orthogonalise = orthogonalise;
  o.line_search_rule = parse_cp_line_search_rule(line_search_rule);
  o.sparsity = sparsity;
  for (int axis : nonnegative_axes) {
    o.nonnegative_modes.push_back(reverse && axis >= 0 && axis < x.order() ? x.order() - 1 - axis
                                                                           : axis);
  }
  o.solver = parse_cp_solver(solver);
  o.samples = samples;
  o.fit_check_every = fit_check_every;
  // Fixed axes are NumPy axes; the view's mode n is axis N-1-n.
  for (int axis : fixed_axes) {
    o.fixed_modes.push_back(reverse && axis >= 0 && axis < x.order() ? x.order() - 1 - axis : axis);
  }
  const std::optional<TensorView<const std::uint8_t>> observed =
      mask_view(mask, x.dims(), o.layout);
  // Given factors come in NumPy axis order; the library takes them in the view's.
  const std::vector<Matrix<T>> start = given_factors<T>(initial_factors, reverse);
  constexpr bool complex = is_complex_v<T>;
  if (complex && mask) throw InvalidArgument("mask is not available for a complex tensor");
  // After every iteration: pending signals and the user's callback; either stops the run.
  // With callback_model the callback also gets the model, (weights, factors) in NumPy
  // axis order (the sweep's), as float64 (complex128 for a complex tensor).
  Interruptible interrupt;
  o.callback = [&](const CpProgress& p) {
    return interrupt.check([&] {
      if (callback.is_none()) return true;
      if (!callback_model || !(complex ? bool(p.complex_model) : bool(p.model))) {
        return !nb::bool_(callback(p.iteration, p.fit, p.delta, p.seconds));
      }
      auto m = [&p] {
        if constexpr (is_complex_v<T>) {
          return p.complex_model();
        } else {
          return p.model();
        }
      }();
      const index_t r = m.rank();
      std::vector<nb::object> factors;
      for (auto& f : m.factors) factors.push_back(owned_matrix(std::move(f)));
      nb::object weights = owned_array(std::move(m.weights), {r});
      return !nb::bool_(callback(p.iteration, p.fit, p.delta, p.seconds,
                                 nb::make_tuple(weights, factor_list(std::move(factors), false))));
    });
  };
  CpResult<T> r = interrupt.run([&] {
    try {
      if constexpr (is_complex_v<T>) {
        return cp_als(x, o, start);
      } else {
        return observed ? cp_als(x, *observed, o, start) : cp_als(x, o, start);
      }
    } catch (const InvalidArgument&) {
      // The library names a NaN by its own mode order; say it in NumPy axes (with a
      // mask, NaN may stand in missing entries).
      check_finite_numpy(x, o.layout, "tensor", observed ? observed->data() : nullptr);
      throw;
    }
  });
  return cp_dict(std::move(r), reverse);
}

template <class T>
nb::dict tucker_typed(const InArray& tensor, const std::vector<index_t>& ranks,
                      std::optional<double> eps, const std::string& method, int n_iter_max,
                      double tol, const std::vector<int>& mode_order, const std::string& backend) {
  TuckerOptions o;
  const TensorView<const T> x = tensor_view<T>(tensor, "tensor", o.layout);
  const bool reverse = o.layout == Layout::row_major;
  const int order = x.order();
  o.method = parse_tucker_method(method);
  o.eps = eps;
  o.max_iters = n_iter_max;
  o.tol = tol;
  o.backend = parse_backend(backend);
  // Ranks and mode numbers come in NumPy axis order; the view's mode n is axis N-1-n.
  o.ranks.assign(ranks.begin(), ranks.end());
  if (reverse) std::reverse(o.ranks.begin(), o.ranks.end());
  for (auto it = mode_order.begin(); it != mode_order.end(); ++it)
    o.mode_order.push_back(reverse && *it >= 0 && *it < order ? order - 1 - *it : *it);
  // After every mode step: pending signals stop the run.
  Interruptible interrupt;
  o.callback = [&](const TuckerProgress&) { return interrupt.check(); };
  TuckerResult<T> r = interrupt.run(
      [&] { return in_numpy_terms(x, o.layout, nullptr, [&] { return tucker(x, o); }); });
  nb::dict d;
  put_tucker_model(d, std::move(r.model), reverse);
  if (reverse) std::reverse(r.eigenvalues.begin(), r.eigenvalues.end());
  nb::list eigenvalues;
  for (std::vector<double>& e : r.eigenvalues) {
    const auto n = static_cast<index_t>(e.size());
    eigenvalues.append(owned_array(std::move(e), {n}));
  }
  d["eigenvalues"] = eigenvalues;
  std::vector<int> processed;
  for (int n : r.mode_order) processed.push_back(reverse ? order - 1 - n : n);
  d["mode_order"] = processed;
  d["relative_error"] = r.relative_error;
  d["compression_ratio"] = r.compression_ratio;
  d["iterations"] = r.iterations;
  d["converged"] = r.converged;
  const auto n_errors = static_cast<index_t>(r.error_history.size());
  d["error_history"] = owned_array(std::move(r.error_history), {n_errors});
  const TuckerTimings& t = r.timings;
  d["timings"] =
      timings_dict({{"gram", t.gram}, {"eig", t.eig}, {"ttm", t.ttm}, {"total", t.total}});
  return d;
}

}  // namespace

template <class T>
nb::dict cp_dict(CpResult<T>&& r, bool reverse) {
  nb::dict d;
  put_model(d, std::move(r.model), reverse);
  d["fit"] = r.fit;
  d["relative_error"] = r.relative_error;
  d["iterations"] = r.iterations;
  d["converged"] = r.converged;
  d["stop"] = std::string(to_string(r.stop));
  d["init"] = std::string(to_string(r.init));
  const auto n_fits = static_cast<index_t>(r.fit_history.size());
  d["fit_history"] = owned_array(std::move(r.fit_history), {n_fits});
  d["eigen_fallbacks"] = r.eigen_fallbacks;
  d["revived_components"] = r.revived_components;
  d["best_start"] = r.best_start;
  d["start_fits"] = r.start_fits;
  d["line_search_accepted"] = r.line_search_accepted;
  d["compressed"] = r.compressed;
  // The core's sizes in NumPy axis order.
  if (reverse) std::reverse(r.compression_ranks.begin(), r.compression_ranks.end());
  d["compression_ranks"] = r.compression_ranks;
  d["compressed_iterations"] = r.compressed_iterations;
  const CpTimings& t = r.timings;
  d["timings"] = timings_dict({{"init", t.init},
                               {"compress", t.compress},
                               {"mttkrp", t.mttkrp},
                               {"gram", t.gram},
                               {"solve", t.solve},
                               {"other", t.other},
                               {"total", t.total}});
  return d;
}

template nb::dict cp_dict<float>(CpResult<float>&&, bool);
template nb::dict cp_dict<double>(CpResult<double>&&, bool);
template nb::dict cp_dict<std::complex<float>>(CpResult<std::complex<float>>&&, bool);
template nb::dict cp_dict<std::complex<double>>(CpResult<std::complex<double>>&&, bool);

void register_decompositions(nb::module_& m) {
  m.def(
      "cp_als",
      [](const InArray& tensor, index_t rank, int n_iter_max, const std::string& init, double tol,
         std::uint64_t seed, const std::vector<InArray>& initial_factors, nb::object callback,
         const std::string& backend, bool line_search, double ridge,
         const std::optional<InArray>& mask, bool nonnegative, int n_starts,
         const std::string& compress, const std::vector<int>& fixed_axes, bool callback_model,
         int orthogonalise, const std::string& line_search_rule, index_t sparsity,
         const std::vector<int>& nonnegative_axes, const std::string& solver, index_t samples,
         int fit_check_every) {
        const auto typed = [&](auto type) {
          using T = typename decltype(type)::type;
          return cp_als_typed<T>(tensor, rank, n_iter_max, init, tol, seed, initial_factors,
                                 callback, backend, line_search, ridge, mask, nonnegative, n_starts,
                                 compress, fixed_axes, callback_model, orthogonalise,
                                 line_search_rule, sparsity, nonnegative_axes, solver, samples,
                                 fit_check_every);
        };
        if (tensor.dtype() == nb::dtype<float>()) return typed(std::type_identity<float>{});
        if (tensor.dtype() == nb::dtype<double>()) return typed(std::type_identity<double>{});
        if (tensor.dtype() == nb::dtype<std::complex<float>>()) {
          return typed(std::type_identity<std::complex<float>>{});
        }
        if (tensor.dtype() == nb::dtype<std::complex<double>>()) {
          return typed(std::type_identity<std::complex<double>>{});
        }
        throw InvalidArgument("tensor must be float32, float64, complex64 or complex128");
      },
      nb::arg("tensor").noconvert(), nb::arg("rank"), nb::arg("n_iter_max"), nb::arg("init"),
      nb::arg("tol"), nb::arg("seed"), nb::arg("initial_factors"), nb::arg("callback").none(),
      nb::arg("backend"), nb::arg("line_search"), nb::arg("ridge"), nb::arg("mask").none(),
      nb::arg("nonnegative"), nb::arg("n_starts"), nb::arg("compress"), nb::arg("fixed_axes"),
      nb::arg("callback_model"), nb::arg("orthogonalise"), nb::arg("line_search_rule"),
      nb::arg("sparsity"), nb::arg("nonnegative_axes"), nb::arg("solver"), nb::arg("samples"),
      nb::arg("fit_check_every"));
  m.def(
      "tucker",
      [](const InArray& tensor, const std::vector<index_t>& ranks, std::optional<double> eps,
         const std::string& method, int n_iter_max, double tol, const std::vector<int>& mode_order,
         const std::string& backend) {
        return float_kind(tensor, "tensor") == 'f'
                   ? tucker_typed<float>(tensor, ranks, eps, method, n_iter_max, tol, mode_order,
                                         backend)
                   : tucker_typed<double>(tensor, ranks, eps, method, n_iter_max, tol, mode_order,
                                          backend);
      },
      nb::arg("tensor").noconvert(), nb::arg("ranks"), nb::arg("eps").none(), nb::arg("method"),
      nb::arg("n_iter_max"), nb::arg("tol"), nb::arg("mode_order"), nb::arg("backend"));
}

}  // namespace tenfold::python
