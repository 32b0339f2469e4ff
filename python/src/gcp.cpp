// tenfold._tenfold.gcp: GCP of a dense array (include/tenfold/gcp.hpp). A C-order array
// is its reversed column-major tensor: the run is on that tensor, and the factors come
// back in NumPy axis order.
#include "tenfold/gcp.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace tenfold::python {

namespace {

template <class T>
nb::dict gcp_typed(const InArray& tensor, index_t rank, const std::string& loss, int n_iter_max,
                   double gtol, double ftol, int memory, std::uint64_t seed,
                   const std::vector<InArray>& initial_factors, nb::object callback) {
  Layout layout = Layout::col_major;
  const TensorView<const T> x = tensor_view<T>(tensor, "tensor", layout);
  const bool reverse = layout == Layout::row_major;
  GcpOptions o;
  o.rank = rank;
  o.loss = parse_gcp_loss(loss);
  o.max_iters = n_iter_max;
  o.gtol = gtol;
  o.ftol = ftol;
  o.memory = memory;
  o.seed = seed;
  std::vector<Matrix<T>> start;
  for (std::size_t k = 0; k < initial_factors.size(); ++k) {
    const std::size_t axis = reverse ? initial_factors.size() - 1 - k : k;
    const std::string what = "init factor " + std::to_string(axis);
    start.push_back(matrix_from<T>(initial_factors[axis], what.c_str()));
  }
  Interruptible interrupt;
  o.callback = [&](const GcpProgress& p) {
    return interrupt.check([&] {
      return callback.is_none() ||
             !nb::bool_(callback(p.iteration, p.objective, p.gradient_norm, p.seconds));
    });
  };
  GcpResult<T> r = interrupt.run([&] {
    try {
      return gcp(x, o, start);
    } catch (const InvalidArgument&) {
      check_finite_numpy(x, layout, "tensor");  // a NaN named by its NumPy index
      throw;
    }
  });
  if (reverse) std::reverse(r.model.factors.begin(), r.model.factors.end());
  nb::dict d;
  nb::list factors;
  for (Matrix<T>& f : r.model.factors) factors.append(owned_matrix(std::move(f)));
  const index_t rank_out = r.model.rank();
  d["weights"] = owned_array(std::move(r.model.weights), {rank_out});
  d["factors"] = factors;
  d["iterations"] = r.iterations;
  d["converged"] = r.converged;
  d["stop"] = std::string(to_string(r.stop));
  d["objective"] = r.objective;
  d["objective_history"] = r.objective_history;
  d["seconds"] = r.seconds;
  return d;
}

}  // namespace

void register_gcp(nb::module_& m) {
  m.def(
      "gcp",
      [](const InArray& tensor, index_t rank, const std::string& loss, int n_iter_max, double gtol,
         double ftol, int memory, std::uint64_t seed, const std::vector<InArray>& initial_factors,
         nb::object callback) {
        return float_kind(tensor, "tensor") == 'f'
                   ? gcp_typed<float>(tensor, rank, loss, n_iter_max, gtol, ftol, memory, seed,
                                      initial_factors, callback)
                   : gcp_typed<double>(tensor, rank, loss, n_iter_max, gtol, ftol, memory, seed,
                                       initial_factors, callback);
      },
      nb::arg("tensor").noconvert(), nb::arg("rank"), nb::arg("loss"), nb::arg("n_iter_max"),
      nb::arg("gtol"), nb::arg("ftol"), nb::arg("memory"), nb::arg("seed"),
      nb::arg("initial_factors"), nb::arg("callback").none());
}

}  // namespace tenfold::python
