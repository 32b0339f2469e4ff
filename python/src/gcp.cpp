// tenfold._tenfold.gcp: GCP of a dense array (include/tenfold/gcp.hpp), with an optional
// mask of observed entries. A C-order array is its reversed column-major tensor: the run
// is on that tensor, and the factors come back in NumPy axis order.
#include "tenfold/gcp.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace tenfold::python {

namespace {

template <class T>
nb::dict gcp_typed(const InArray& tensor, index_t rank, const std::string& loss, double huber_delta,
                   const std::optional<InArray>& mask, int n_iter_max, double gtol, double ftol,
                   int memory, std::uint64_t seed, const std::vector<InArray>& initial_factors,
                   nb::object callback) {
  Layout layout = Layout::col_major;
  const TensorView<const T> x = tensor_view<T>(tensor, "tensor", layout);
  const bool reverse = layout == Layout::row_major;
  const std::optional<TensorView<const std::uint8_t>> observed = mask_view(mask, x.dims(), layout);
  Interruptible interrupt;
  GcpOptions o = gcp_options(rank, loss, huber_delta, n_iter_max, seed, interrupt, callback);
  o.gtol = gtol;
  o.ftol = ftol;
  o.memory = memory;
  const std::vector<Matrix<T>> start = given_factors<T>(initial_factors, reverse);
  GcpResult<T> r = interrupt.run([&] {
    try {
      return observed ? gcp(x, *observed, o, start) : gcp(x, o, start);
    } catch (const InvalidArgument&) {
      // A NaN named by its NumPy index (with a mask, NaN may stand in missing entries).
      check_finite_numpy(x, layout, "tensor", observed ? observed->data() : nullptr);
      throw;
    }
  });
  return gcp_dict(std::move(r), reverse);
}

}  // namespace

GcpOptions gcp_options(index_t rank, const std::string& loss, double huber_delta, int n_iter_max,
                       std::uint64_t seed, Interruptible& interrupt, const nb::object& callback) {
  GcpOptions o;
  o.rank = rank;
  o.loss = parse_gcp_loss(loss);
  o.huber_delta = huber_delta;
  o.max_iters = n_iter_max;
  o.seed = seed;
  o.callback = [&interrupt, &callback](const GcpProgress& p) {
    return interrupt.check([&] {
      return callback.is_none() ||
             !nb::bool_(callback(p.iteration, p.objective, p.gradient_norm, p.seconds));
    });
  };
  return o;
}

template <class T>
nb::dict gcp_dict(GcpResult<T>&& r, bool reverse) {
  nb::dict d;
  put_model(d, std::move(r.model), reverse);
  d["iterations"] = r.iterations;
  d["converged"] = r.converged;
  d["stop"] = std::string(to_string(r.stop));
  d["objective"] = r.objective;
  d["objective_history"] = r.objective_history;
  d["seconds"] = r.seconds;
  return d;
}

template nb::dict gcp_dict<float>(GcpResult<float>&&, bool);
template nb::dict gcp_dict<double>(GcpResult<double>&&, bool);

void register_gcp(nb::module_& m) {
  m.def(
      "gcp",
      [](const InArray& tensor, index_t rank, const std::string& loss, double huber_delta,
         const std::optional<InArray>& mask, int n_iter_max, double gtol, double ftol, int memory,
         std::uint64_t seed, const std::vector<InArray>& initial_factors, nb::object callback) {
        return float_kind(tensor, "tensor") == 'f'
                   ? gcp_typed<float>(tensor, rank, loss, huber_delta, mask, n_iter_max, gtol, ftol,
                                      memory, seed, initial_factors, callback)
                   : gcp_typed<double>(tensor, rank, loss, huber_delta, mask, n_iter_max, gtol,
                                       ftol, memory, seed, initial_factors, callback);
      },
      nb::arg("tensor").noconvert(), nb::arg("rank"), nb::arg("loss"), nb::arg("huber_delta"),
      nb::arg("mask").none(), nb::arg("n_iter_max"), nb::arg("gtol"), nb::arg("ftol"),
      nb::arg("memory"), nb::arg("seed"), nb::arg("initial_factors"), nb::arg("callback").none());
}

}  // namespace tenfold::python
