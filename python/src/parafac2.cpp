// tenfold._tenfold.parafac2: C-order slices (and masks) go in as views, the GIL is
// released while the library computes.
#include "tenfold/parafac2.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "tenfold/error.hpp"

namespace tenfold::python {

namespace {

// A C-order 2-D array (I, J) as the column-major J x I view (the Python layer makes every
// slice and mask C-contiguous).
template <class U>
TensorView<const U> c_order_view(const InArray& a, const std::string& what) {
  if (a.ndim() != 2) {
    throw InvalidArgument(what + " must be a 2-D array, got " + std::to_string(a.ndim()) + " axes");
  }
  const auto rows = static_cast<index_t>(a.shape(0)), cols = static_cast<index_t>(a.shape(1));
  if (rows > 1 && cols > 1 && (a.stride(1) != 1 || a.stride(0) != cols)) {
    throw InvalidArgument(what + " must be C-contiguous");
  }
  return TensorView<const U>(static_cast<const U*>(a.data()), {cols, rows});
}

template <class T>
nb::dict parafac2_typed(const std::vector<InArray>& slices,
                        const std::optional<std::vector<InArray>>& masks, index_t rank,
                        int n_iter_max, int n_iter_parafac, double tol, const std::string& init,
                        std::uint64_t seed, const std::vector<InArray>& start, bool linesearch,
                        bool normalize, const std::vector<int>& nn_modes,
                        const std::string& backend) {
  Parafac2Options o;
  o.rank = rank;
  o.max_iters = n_iter_max;
  o.inner_iters = n_iter_parafac;
  o.tol = tol;
  o.seed = seed;
  o.line_search = linesearch;
  o.normalize = normalize;
  o.nonnegative_modes = nn_modes;
  o.layout = Layout::row_major;
  o.backend = parse_backend(backend);
  o.init = init == "random" ? Parafac2Init::random
           : init == "svd"  ? Parafac2Init::svd
                            : Parafac2Init::given;
  std::vector<TensorView<const T>> x;
  for (std::size_t k = 0; k < slices.size(); ++k) {
    const std::string what = "slice " + std::to_string(k);
    if (float_kind(slices[k], what.c_str()) != (sizeof(T) == 4 ? 'f' : 'd')) {
      throw InvalidArgument(what + " has another dtype than slice 0");
    }
    x.push_back(c_order_view<T>(slices[k], what));
  }
  std::vector<TensorView<const std::uint8_t>> observed;
  if (masks) {
    for (std::size_t k = 0; k < masks->size(); ++k)
      observed.push_back(c_order_view<std::uint8_t>((*masks)[k], "mask " + std::to_string(k)));
  }
  std::vector<Matrix<T>> given;
  const char* names[3] = {"init factor A", "init factor B", "init factor C"};
  for (std::size_t n = 0; n < start.size() && n < 3; ++n)
    given.push_back(matrix_from<T>(start[n], names[n]));
  Interruptible interrupt;
  Parafac2Result<T> r = interrupt.run([&] { return parafac2<T>(x, observed, o, given); });
  nb::dict d;
  d["weights"] = owned_array(std::move(r.model.weights), {rank});
  nb::list factors;
  factors.append(owned_matrix(std::move(r.model.a)));
  factors.append(owned_matrix(std::move(r.model.b)));
  factors.append(owned_matrix(std::move(r.model.c)));
  d["factors"] = factors;
  nb::list projections;
  for (Matrix<T>& p : r.model.projections) projections.append(owned_matrix(std::move(p)));
  d["projections"] = projections;
  d["errors"] = r.error_history;
  d["relative_error"] = r.relative_error;
  d["iterations"] = r.iterations;
  d["converged"] = r.converged;
  d["line_search_accepted"] = r.line_search_accepted;
  d["seconds"] = r.seconds;
  return d;
}

}  // namespace

void register_parafac2(nb::module_& m) {
  m.def(
      "parafac2",
      [](const std::vector<InArray>& slices, const std::optional<std::vector<InArray>>& masks,
         index_t rank, int n_iter_max, int n_iter_parafac, double tol, const std::string& init,
         std::uint64_t seed, const std::vector<InArray>& start, bool linesearch, bool normalize,
         const std::vector<int>& nn_modes, const std::string& backend) {
        if (slices.empty()) throw InvalidArgument("parafac2 needs at least one slice, got none");
        const auto run = [&]<class T>(T) {
          return parafac2_typed<T>(slices, masks, rank, n_iter_max, n_iter_parafac, tol, init, seed,
                                   start, linesearch, normalize, nn_modes, backend);
        };
        return float_kind(slices[0], "slice 0") == 'f' ? run(0.0f) : run(0.0);
      },
      nb::arg("slices"), nb::arg("masks").none(), nb::arg("rank"), nb::arg("n_iter_max"),
      nb::arg("n_iter_parafac"), nb::arg("tol"), nb::arg("init"), nb::arg("seed"), nb::arg("start"),
      nb::arg("linesearch"), nb::arg("normalize"), nb::arg("nn_modes"), nb::arg("backend"));
}

}  // namespace tenfold::python
