// tenfold._tenfold.cmtf: the C-order tensor, matrix and masks go in as views, the GIL is
// released while the library computes.
#include "tenfold/cmtf.hpp"

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

// A C-order array as its reversed column-major view (the Python layer makes it so).
template <class U>
TensorView<const U> reversed_view(const InArray& a) {
  std::vector<index_t> dims;
  for (std::size_t n = a.ndim(); n-- > 0;) dims.push_back(static_cast<index_t>(a.shape(n)));
  return TensorView<const U>(static_cast<const U*>(a.data()), dims);
}

template <class T>
nb::dict cmtf_typed(const InArray& tensor, const InArray& matrix,
                    const std::optional<InArray>& tensor_mask,
                    const std::optional<InArray>& matrix_mask, index_t rank, int n_iter_max,
                    double tol, const std::string& init, std::uint64_t seed,
                    const std::vector<InArray>& start, const std::string& backend) {
  CmtfOptions o;
  o.rank = rank;
  o.max_iters = n_iter_max;
  o.tol = tol;
  o.seed = seed;
  o.layout = Layout::row_major;
  o.backend = parse_backend(backend);
  o.init = init == "random" ? CmtfInit::random : init == "svd" ? CmtfInit::svd : CmtfInit::given;
  if (float_kind(matrix, "matrix") != float_kind(tensor, "tensor")) {
    throw InvalidArgument("the matrix has another dtype than the tensor");
  }
  const TensorView<const T> x = reversed_view<T>(tensor), y = reversed_view<T>(matrix);
  std::vector<Matrix<T>> given;
  const char* names[3] = {"init factor A", "init factor B", "init factor C"};
  for (std::size_t n = 0; n < start.size() && n < 3; ++n)
    given.push_back(matrix_from<T>(start[n], names[n]));
  Interruptible interrupt;
  CmtfResult<T> r = interrupt.run([&] {
    if (!tensor_mask) return cmtf<T>(x, y, o, given);
    return cmtf<T>(x, y, reversed_view<std::uint8_t>(*tensor_mask),
                   reversed_view<std::uint8_t>(*matrix_mask), o, given);
  });
  nb::dict d;
  nb::list factors;
  for (Matrix<T>& f : r.tensor_model.factors) factors.append(owned_matrix(std::move(f)));
  d["factors"] = factors;
  d["v"] = owned_matrix(std::move(r.matrix_model.factors[1]));
  d["errors"] = r.error_history;
  d["relative_error"] = r.relative_error;
  d["iterations"] = r.iterations;
  d["converged"] = r.converged;
  d["seconds"] = r.seconds;
  return d;
}

}  // namespace

void register_cmtf(nb::module_& m) {
  m.def(
      "cmtf",
      [](const InArray& tensor, const InArray& matrix, const std::optional<InArray>& tensor_mask,
         const std::optional<InArray>& matrix_mask, index_t rank, int n_iter_max, double tol,
         const std::string& init, std::uint64_t seed, const std::vector<InArray>& start,
         const std::string& backend) {
        const auto run = [&]<class T>(T) {
          return cmtf_typed<T>(tensor, matrix, tensor_mask, matrix_mask, rank, n_iter_max, tol,
                               init, seed, start, backend);
        };
        return float_kind(tensor, "tensor") == 'f' ? run(0.0f) : run(0.0);
      },
      nb::arg("tensor"), nb::arg("matrix"), nb::arg("tensor_mask").none(),
      nb::arg("matrix_mask").none(), nb::arg("rank"), nb::arg("n_iter_max"), nb::arg("tol"),
      nb::arg("init"), nb::arg("seed"), nb::arg("start"), nb::arg("backend"));
}

}  // namespace tenfold::python
