// tenfold._tenfold.sparse_cp_als, .sparse_cp_apr, .load_sparse and .save_sparse: a sparse
// tensor comes in as (coords (N, nnz) int64, values (nnz,), shape), with axis n = mode n
// (no reversal: coordinates have no memory order). The entries are copied once into a
// SparseTensor, which sums duplicates and checks every index.
#include "tenfold/sparse.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/cp_apr.hpp"
#include "tenfold/error.hpp"
#include "tenfold/gcp.hpp"

namespace tenfold::python {

namespace {

using Coords = nb::ndarray<nb::ro, const std::int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
template <class T>
using Values = nb::ndarray<nb::ro, const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <class T>
SparseTensor<T> sparse_from(const Coords& coords, const Values<T>& values,
                            const std::vector<index_t>& shape) {
  if (coords.shape(0) != shape.size() || coords.shape(1) != values.shape(0)) {
    throw DimensionMismatch("coords has shape (" + std::to_string(coords.shape(0)) + ", " +
                            std::to_string(coords.shape(1)) + "), expected (" +
                            std::to_string(shape.size()) + ", " + std::to_string(values.shape(0)) +
                            "): one row per axis of shape, one "
                            "column per value");
  }
  std::vector<index_t> c(coords.size());
  if (!c.empty()) std::memcpy(c.data(), coords.data(), c.size() * sizeof(index_t));
  std::vector<T> v(values.data(), values.data() + values.shape(0));
  return SparseTensor<T>(shape, std::move(c), std::move(v));
}

template <class T>
nb::dict sparse_cp_als_typed(const Coords& coords, const Values<T>& values,
                             const std::vector<index_t>& shape, index_t rank, int n_iter_max,
                             const std::string& init, double tol, std::uint64_t seed,
                             const std::vector<InArray>& initial_factors, nb::object callback,
                             bool line_search, double ridge, int n_starts,
                             const std::string& compress, const std::string& csf) {
  // x is this call's copy of the arrays: cp_als takes it, releasing it once its trees are
  // built.
  SparseTensor<T> x = sparse_from(coords, values, shape);
  const CsfLayout layout = csf_layout_for(x, {parse_csf_layout(csf)}, /*taken=*/true);
  const index_t nnz = x.nnz();
  CpOptions o;
  o.rank = rank;
  o.max_iters = n_iter_max;
  o.tol = tol;
  o.seed = seed;
  o.init = parse_cp_init(init);
  o.line_search = line_search;
  o.ridge = ridge;
  o.n_starts = n_starts;
  o.compress = parse_cp_compress(compress);
  const std::vector<Matrix<T>> start = given_factors<T>(initial_factors, false);
  Interruptible interrupt;
  o.callback = [&](const CpProgress& p) {
    return interrupt.check([&] {
      return callback.is_none() || !nb::bool_(callback(p.iteration, p.fit, p.delta, p.seconds));
    });
  };
  CpResult<T> r = interrupt.run([&] { return cp_als(std::move(x), o, start, {layout}); });
  nb::dict d = cp_dict(std::move(r), false);
  d["nnz"] = nnz;
  d["csf"] = std::string(to_string(layout));
  return d;
}

template <class T>
nb::dict sparse_cp_apr_typed(const Coords& coords, const Values<T>& values,
                             const std::vector<index_t>& shape, index_t rank, int n_iter_max,
                             int n_inner_iter_max, double tol, double kappa, double kappa_tol,
                             std::uint64_t seed, const std::vector<InArray>& initial_factors,
                             nb::object callback) {
  const SparseTensor<T> x = sparse_from(coords, values, shape);
  const std::vector<Matrix<T>> start = given_factors<T>(initial_factors, false);
  CpAprOptions o;
  o.rank = rank;
  o.max_iters = n_iter_max;
  o.max_inner_iters = n_inner_iter_max;
  o.tol = tol;
  o.kappa = kappa;
  o.kappa_tol = kappa_tol;
  o.seed = seed;
  Interruptible interrupt;
  o.callback = [&](const CpAprProgress& p) {
    return interrupt.check([&] {
      return callback.is_none() ||
             !nb::bool_(callback(p.iteration, p.kkt_violation, p.inner_iterations, p.seconds));
    });
  };
  CpAprResult<T> r = interrupt.run([&] { return cp_apr(x, o, start); });
  nb::dict d;
  put_model(d, std::move(r.model), false);
  d["iterations"] = r.iterations;
  d["inner_iterations"] = r.inner_iterations;
  d["converged"] = r.converged;
  d["stop"] = std::string(to_string(r.stop));
  d["kkt_violation"] = r.kkt_violation;
  d["kkt_history"] = r.kkt_history;
  d["inadmissible_zero_fixes"] = r.inadmissible_zero_fixes;
  d["log_likelihood"] = r.log_likelihood;
  d["seconds"] = r.seconds;
  d["nnz"] = x.nnz();
  return d;
}

template <class T>
nb::dict sparse_gcp_typed(const Coords& coords, const Values<T>& values,
                          const std::vector<index_t>& shape, index_t rank, const std::string& loss,
                          double huber_delta, int n_iter_max, std::uint64_t seed,
                          const std::vector<InArray>& initial_factors, nb::object callback,
                          int epoch_iters, double rate, index_t gradient_samples,
                          index_t function_samples) {
  const SparseTensor<T> x = sparse_from(coords, values, shape);
  const std::vector<Matrix<T>> start = given_factors<T>(initial_factors, false);
  Interruptible interrupt;
  GcpOptions o = gcp_options(rank, loss, huber_delta, n_iter_max, seed, interrupt, callback);
  o.sampling.epoch_iters = epoch_iters;
  o.sampling.rate = rate;
  o.sampling.gradient_nonzeros = o.sampling.gradient_zeros = gradient_samples;
  o.sampling.function_nonzeros = o.sampling.function_zeros = function_samples;
  GcpResult<T> r = interrupt.run([&] { return gcp(x, o, start); });
  nb::dict d = gcp_dict(std::move(r), false);
  d["nnz"] = x.nnz();
  return d;
}

// The mode-major coordinates (N x nnz) as a C-order (N, nnz) int64 array owning them.
nb::object coords_array(std::vector<index_t>&& coords, index_t order, index_t nnz) {
  auto* owner = new std::vector<index_t>(std::move(coords));
  nb::capsule capsule(owner,
                      [](void* p) noexcept { delete static_cast<std::vector<index_t>*>(p); });
  const std::size_t shape[2] = {static_cast<std::size_t>(order), static_cast<std::size_t>(nnz)};
  return nb::cast(nb::ndarray<nb::numpy, std::int64_t>(owner->data(), 2, shape, capsule));
}

}  // namespace

void register_sparse(nb::module_& m) {
  m.def("sparse_cp_als", &sparse_cp_als_typed<double>, nb::arg("coords").noconvert(),
        nb::arg("values").noconvert(), nb::arg("shape"), nb::arg("rank"), nb::arg("n_iter_max"),
        nb::arg("init"), nb::arg("tol"), nb::arg("seed"), nb::arg("initial_factors"),
        nb::arg("callback").none(), nb::arg("line_search"), nb::arg("ridge"), nb::arg("n_starts"),
        nb::arg("compress"), nb::arg("csf"));
  m.def("sparse_cp_als", &sparse_cp_als_typed<float>, nb::arg("coords").noconvert(),
        nb::arg("values").noconvert(), nb::arg("shape"), nb::arg("rank"), nb::arg("n_iter_max"),
        nb::arg("init"), nb::arg("tol"), nb::arg("seed"), nb::arg("initial_factors"),
        nb::arg("callback").none(), nb::arg("line_search"), nb::arg("ridge"), nb::arg("n_starts"),
        nb::arg("compress"), nb::arg("csf"));
  m.def("sparse_cp_apr", &sparse_cp_apr_typed<double>, nb::arg("coords").noconvert(),
        nb::arg("values").noconvert(), nb::arg("shape"), nb::arg("rank"), nb::arg("n_iter_max"),
        nb::arg("n_inner_iter_max"), nb::arg("tol"), nb::arg("kappa"), nb::arg("kappa_tol"),
        nb::arg("seed"), nb::arg("initial_factors"), nb::arg("callback").none());
  m.def("sparse_cp_apr", &sparse_cp_apr_typed<float>, nb::arg("coords").noconvert(),
        nb::arg("values").noconvert(), nb::arg("shape"), nb::arg("rank"), nb::arg("n_iter_max"),
        nb::arg("n_inner_iter_max"), nb::arg("tol"), nb::arg("kappa"), nb::arg("kappa_tol"),
        nb::arg("seed"), nb::arg("initial_factors"), nb::arg("callback").none());
  const auto def_sparse_gcp = [&](auto f) {
    m.def("sparse_gcp", f, nb::arg("coords").noconvert(), nb::arg("values").noconvert(),
          nb::arg("shape"), nb::arg("rank"), nb::arg("loss"), nb::arg("huber_delta"),
          nb::arg("n_iter_max"), nb::arg("seed"), nb::arg("initial_factors"),
          nb::arg("callback").none(), nb::arg("epoch_iters"), nb::arg("rate"),
          nb::arg("gradient_samples"), nb::arg("function_samples"));
  };
  def_sparse_gcp(&sparse_gcp_typed<double>);
  def_sparse_gcp(&sparse_gcp_typed<float>);
  m.def(
      "load_sparse",
      [](const std::string& path, const std::vector<index_t>& shape) {
        SparseTensor<double> x = io::load_sparse_file<double>(path, shape);
        nb::dict d;
        std::vector<index_t> coords = x.coords();
        const std::vector<index_t> dims = x.dims();
        // (N, nnz) C order: the mode-major coordinates as they are.
        d["coords"] = coords_array(std::move(coords), x.order(), x.nnz());
        std::vector<double> values = x.values();
        d["values"] = owned_array(std::move(values), {x.nnz()});
        d["shape"] = dims;
        return d;
      },
      nb::arg("path"), nb::arg("shape"));
  m.def(
      "save_sparse",
      [](const std::string& path, const Coords& coords, const Values<double>& values,
         const std::vector<index_t>& shape) {
        io::save_sparse_file(path, sparse_from(coords, values, shape));
      },
      nb::arg("path"), nb::arg("coords").noconvert(), nb::arg("values").noconvert(),
      nb::arg("shape"));
}

}  // namespace tenfold::python
