// tenfold._tenfold.tensor_train and .nonnegative_tucker: the array goes in as a view (a
// C-order array is its reversed column-major tensor, swept from NumPy axis 0, its last
// mode), the GIL is released while the library computes, and the model comes back in NumPy
// axis order.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "tenfold/error.hpp"
#include "tenfold/nonnegative_tucker.hpp"
#include "tenfold/tensor_train.hpp"

namespace tenfold::python {

namespace {

template <class T>
nb::dict tensor_train_typed(const InArray& tensor, const std::vector<index_t>& ranks,
                            std::optional<double> eps, const std::string& backend) {
  TensorTrainOptions o;
  const TensorView<const T> x = tensor_view<T>(tensor, "tensor", o.layout);
  const bool reverse = o.layout == Layout::row_major;
  o.eps = eps;
  o.backend = parse_backend(backend);
  // Ranks come in NumPy axis order; the view's bond k is NumPy bond N-k.
  o.ranks = ranks;
  if (reverse) std::reverse(o.ranks.begin(), o.ranks.end());
  TensorTrainResult<T> r;
  {
    nb::gil_scoped_release nogil;
    r = in_numpy_terms(x, o.layout, nullptr, [&] { return tensor_train(x, o); });
  }
  nb::dict d;
  // A view core (r_k, I_k, r_k+1) is, reversed, the C-order NumPy core of axis N-1-k.
  std::vector<nb::object> cores;
  for (Tensor<T>& g : r.model.cores) {
    const std::vector<index_t> dims = g.dims();
    cores.push_back(owned_array(std::move(g.values()), dims, reverse));
  }
  d["factors"] = factor_list(std::move(cores), reverse);
  nb::list singular_values;  // per bond in sweep order: NumPy bonds 1, ..., N-1
  for (std::vector<double>& s : r.singular_values) {
    const auto n = static_cast<index_t>(s.size());
    singular_values.append(owned_array(std::move(s), {n}));
  }
  d["singular_values"] = singular_values;
  d["relative_error"] = r.relative_error;
  d["compression_ratio"] = r.compression_ratio;
  nb::dict t;
  t["gram"] = r.timings.gram;
  t["eig"] = r.timings.eig;
  t["contract"] = r.timings.contract;
  t["total"] = r.timings.total;
  d["timings"] = t;
  return d;
}

template <class T>
nb::dict nonnegative_tucker_typed(const InArray& tensor, const std::vector<index_t>& ranks,
                                  const std::string& method, int n_iter_max, double tol,
                                  int core_iters, const std::string& core_solver,
                                  bool normalize_factors, const std::string& init,
                                  std::uint64_t seed, const std::optional<InArray>& core,
                                  const std::vector<InArray>& factors, const std::string& backend) {
  NonnegativeTuckerOptions o;
  const TensorView<const T> x = tensor_view<T>(tensor, "tensor", o.layout);
  const bool reverse = o.layout == Layout::row_major;
  o.ranks = ranks;
  if (reverse) std::reverse(o.ranks.begin(), o.ranks.end());
  o.method = parse_nonnegative_tucker_method(method);
  o.max_iters = n_iter_max;
  o.tol = tol;
  o.core_iters = core_iters;
  if (core_solver != "fista" && core_solver != "active_set") {
    throw InvalidArgument("algorithm must be 'fista' or 'active_set', got '" + core_solver + "'");
  }
  o.core_solver = core_solver == "fista" ? NonnegativeTuckerCoreSolver::fista
                                         : NonnegativeTuckerCoreSolver::active_set;
  o.normalize_factors = normalize_factors;
  if (init != "svd" && init != "random") {
    throw InvalidArgument("init must be 'svd', 'random' or (core, factors), got '" + init + "'");
  }
  o.init = init == "svd" ? NonnegativeTuckerInit::svd : NonnegativeTuckerInit::random;
  o.seed = seed;
  o.backend = parse_backend(backend);
  // A given start in NumPy axis order, as the view's: the core read in the view's order.
  std::optional<TTensor<T>> start;
  if (core) {
    Layout core_layout = Layout::col_major;
    const TensorView<const T> g = tensor_view<T>(*core, "init core", core_layout);
    start.emplace(core_layout == o.layout
                      ? Tensor<T>(g.dims(), std::vector<T>(g.data(), g.data() + g.numel()))
                      : transpose<T>(g),
                  given_factors<T>(factors, reverse));
  }
  Interruptible interrupt;
  o.callback = [&](const NonnegativeTuckerProgress&) { return interrupt.check(); };
  NonnegativeTuckerResult<T> r = interrupt.run([&] {
    return in_numpy_terms(x, o.layout, nullptr,
                          [&] { return nonnegative_tucker(x, o, start ? &*start : nullptr); });
  });
  nb::dict d;
  put_tucker_model(d, std::move(r.model), reverse);
  const auto n_errors = static_cast<index_t>(r.error_history.size());
  d["error_history"] = owned_array(std::move(r.error_history), {n_errors});
  d["relative_error"] = r.relative_error;
  d["iterations"] = r.iterations;
  d["converged"] = r.converged;
  d["seconds"] = r.seconds;
  return d;
}

// The TT of C-order NumPy cores (r_k, I_k, r_k+1), in NumPy axis order: each core's view is
// (r_k+1, I_k, r_k), and in reverse order they are the TT of the reversed (column-major)
// tensor (the Python layer makes every core C-contiguous).
template <class T>
TensorTrain<T> train_from(const std::vector<InArray>& cores, const char* what) {
  TensorTrain<T> tt;
  for (auto it = cores.rbegin(); it != cores.rend(); ++it) {
    Layout layout = Layout::row_major;
    const TensorView<const T> g = tensor_view<T>(*it, what, layout);
    if (layout != Layout::row_major || g.order() != 3) {
      throw InvalidArgument(std::string(what) + " must be C-contiguous arrays of 3 axes");
    }
    tt.cores.emplace_back(g.dims(), std::vector<T>(g.data(), g.data() + g.numel()));
  }
  return tt;
}

// "norm", "full", "inner" (with `other`, a TT) or "inner_dense" (with `dense`, C-order).
template <class T>
nb::object tt_contract_typed(const std::string& what, const std::vector<InArray>& cores,
                             const std::vector<InArray>& other,
                             const std::optional<InArray>& dense) {
  const TensorTrain<T> tt = train_from<T>(cores, "factors");
  if (what == "norm") return nb::float_(tt.norm());
  if (what == "inner") return nb::float_(tt.inner(train_from<T>(other, "other factors")));
  if (what == "inner_dense" && dense) {
    Layout layout = Layout::row_major;
    return nb::float_(tt.inner(tensor_view<T>(*dense, "tensor", layout)));
  }
  Tensor<T> full = tt.full();
  const std::vector<index_t> dims = full.dims();
  return owned_array(std::move(full.values()), dims, true);
}

}  // namespace

void register_tt_nntucker(nb::module_& m) {
  m.def(
      "tensor_train",
      [](const InArray& tensor, const std::vector<index_t>& ranks, std::optional<double> eps,
         const std::string& backend) {
        return float_kind(tensor, "tensor") == 'f'
                   ? tensor_train_typed<float>(tensor, ranks, eps, backend)
                   : tensor_train_typed<double>(tensor, ranks, eps, backend);
      },
      nb::arg("tensor").noconvert(), nb::arg("ranks"), nb::arg("eps").none(), nb::arg("backend"));
  m.def(
      "tt_contract",
      [](const std::string& what, const std::vector<InArray>& cores,
         const std::vector<InArray>& other, const std::optional<InArray>& dense) {
        if (cores.empty()) throw InvalidArgument("a tensor train needs at least one core");
        return float_kind(cores.front(), "factors") == 'f'
                   ? tt_contract_typed<float>(what, cores, other, dense)
                   : tt_contract_typed<double>(what, cores, other, dense);
      },
      nb::arg("what"), nb::arg("cores"), nb::arg("other"), nb::arg("dense").none());
  m.def(
      "nonnegative_tucker",
      [](const InArray& tensor, const std::vector<index_t>& ranks, const std::string& method,
         int n_iter_max, double tol, int core_iters, const std::string& core_solver,
         bool normalize_factors, const std::string& init, std::uint64_t seed,
         const std::optional<InArray>& core, const std::vector<InArray>& factors,
         const std::string& backend) {
        const auto typed = [&](auto type) {
          using T = typename decltype(type)::type;
          return nonnegative_tucker_typed<T>(tensor, ranks, method, n_iter_max, tol, core_iters,
                                             core_solver, normalize_factors, init, seed, core,
                                             factors, backend);
        };
        return float_kind(tensor, "tensor") == 'f' ? typed(std::type_identity<float>{})
                                                   : typed(std::type_identity<double>{});
      },
      nb::arg("tensor").noconvert(), nb::arg("ranks"), nb::arg("method"), nb::arg("n_iter_max"),
      nb::arg("tol"), nb::arg("core_iters"), nb::arg("core_solver"), nb::arg("normalize_factors"),
      nb::arg("init"), nb::arg("seed"), nb::arg("core").none(), nb::arg("factors"),
      nb::arg("backend"));
}

}  // namespace tenfold::python
