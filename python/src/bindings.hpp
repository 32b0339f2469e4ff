// Shared pieces of the extension tenfold._tenfold: NumPy arrays in and out, and the
// registration functions of each area. Only the public API of include/tenfold/ is used.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/gcp.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/tensor.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::python {

namespace nb = nanobind;

/// Any CPU array, not copied on the way in (the Python layer applies the copy rule).
using InArray = nb::ndarray<nb::ro, nb::device::cpu>;

/// Element type of an input array: 'f' for float32, 'd' for float64; throws
/// InvalidArgument naming `what` for anything else.
char float_kind(const InArray& a, const char* what);

/// The view of a C- or Fortran-contiguous array: a C-order array of shape
/// (a, b, c) is the column-major tensor (c, b, a), with `layout` row_major; a
/// Fortran-order one keeps its shape, col_major. Throws InvalidArgument (naming
/// `what`) for other strides or a dtype other than T.
template <class T>
TensorView<const T> tensor_view(const InArray& a, const char* what, Layout& layout);

/// Throws InvalidArgument naming `what` and the NumPy index of the first NaN or Inf
/// entry of a view made by tensor_view with `layout`, if any. With `observed` (a mask
/// of x's dims and layout, nonzero where observed), only observed entries count.
template <class T>
void check_finite_numpy(TensorView<const T> x, Layout layout, const char* what,
                        const std::uint8_t* observed = nullptr);

/// A column-major rows x cols matrix copied from a C- or F-order 2-D array whose
/// NumPy shape is (rows, cols); throws InvalidArgument naming `what` otherwise.
template <class T>
Matrix<T> matrix_from(const InArray& a, const char* what);

/// NumPy array that owns `values` (moved to the heap, freed with the array): the
/// column-major tensor `dims`, shown with the NumPy shape `dims` in Fortran order,
/// or, with `reverse`, the reversed shape in C order (the same memory).
template <class T>
nb::object owned_array(std::vector<T>&& values, const std::vector<index_t>& dims,
                       bool reverse = false);

/// A factor matrix as an (rows, cols) NumPy array owning its memory.
template <class T>
nb::object owned_matrix(Matrix<T>&& m);

/// The list of factor arrays in NumPy axis order: `factors` in the view's modes,
/// reversed when the view is (a C-order tensor).
nb::list factor_list(std::vector<nb::object> factors, bool reverse);

/// The start's factors, given in NumPy axis order, in the view's modes (reversed with
/// `reverse`); errors name "init factor <axis>".
template <class T>
std::vector<Matrix<T>> given_factors(const std::vector<InArray>& given, bool reverse);

/// d["weights"] and d["factors"] (NumPy axis order) of a model, its memory moved out.
template <class T>
void put_model(nb::dict& d, KTensor<T>&& model, bool reverse);

/// d["core"] and d["factors"] (NumPy axis order) of a Tucker model, its memory moved out.
template <class T>
void put_tucker_model(nb::dict& d, TTensor<T>&& model, bool reverse);

/// f(): an InvalidArgument from the library, which names a non-finite entry in its own
/// mode order, is said again by NumPy index when `x` (viewed with `layout`) holds one
/// outside the missing entries (`observed`, when given: nonzero where observed).
template <class T, class F>
auto in_numpy_terms(TensorView<const T> x, Layout layout, const std::uint8_t* observed, F&& f) {
  try {
    return f();
  } catch (const InvalidArgument&) {
    check_finite_numpy(x, layout, "tensor", observed);
    throw;
  }
}

/// The view of a mask (uint8, the tensor's shape and memory order: the Python layer
/// makes it so) of a tensor viewed with `dims` and `layout`; nullopt without one.
std::optional<TensorView<const std::uint8_t>> mask_view(const std::optional<InArray>& mask,
                                                        const std::vector<index_t>& dims,
                                                        Layout layout);

/// Ctrl-C for a library call that runs without the GIL. check() serves the library's
/// progress callbacks: with the GIL for a moment, it runs pending signal handlers
/// (Ctrl-C raises KeyboardInterrupt there) and then `more` (the user's callback); a
/// raised Python error is kept and the answer is false, which stops the run. run(f)
/// calls f without the GIL and then raises the kept error, also when the library
/// stopped by throwing Cancelled.
class Interruptible {
 public:
  template <class F>
  bool check(F&& more) {
    nb::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      return more();
    } catch (nb::python_error& e) {
      raised_.emplace(std::move(e));
      return false;
    }
  }
  bool check() {
    return check([] { return true; });
  }

  template <class F>
  auto run(F&& f) {
    std::optional<decltype(f())> out;
    {
      nb::gil_scoped_release nogil;
      try {
        out.emplace(f());
      } catch (const Cancelled&) {
        if (!raised_) throw;
      }
    }
    if (raised_) throw std::move(*raised_);
    return std::move(*out);
  }

 private:
  std::optional<nb::python_error> raised_;
};

/// A CP-ALS result as the Python layer reads it (CPResult's attributes), the model and the
/// core's sizes in NumPy axis order: the view's modes, reversed with `reverse`. Written
/// once for the dense and the sparse binding (python/src/decompositions.cpp).
template <class T>
nb::dict cp_dict(CpResult<T>&& r, bool reverse);

/// The GCP options the dense and the sparse binding share (python/src/gcp.cpp). The
/// callback (iteration, objective, gradient norm, seconds) stops the run when it returns
/// a true value; Ctrl-C through `interrupt`. Both must outlive the run.
GcpOptions gcp_options(index_t rank, const std::string& loss, double huber_delta, int n_iter_max,
                       std::uint64_t seed, Interruptible& interrupt, const nb::object& callback);

/// A GCP result as the Python layer reads it, the model in NumPy axis order.
template <class T>
nb::dict gcp_dict(GcpResult<T>&& r, bool reverse);

void register_decompositions(nb::module_& m);
void register_attention(nb::module_& m);
void register_sparse(nb::module_& m);
void register_gcp(nb::module_& m);
void register_parafac2(nb::module_& m);         // python/src/parafac2.cpp
void register_cmtf(nb::module_& m);             // python/src/cmtf.cpp
void register_tt_nntucker(nb::module_& m);      // python/src/tt_nntucker.cpp
void register_cache_attention(nb::module_& m);  // python/src/cache_attention.cpp

}  // namespace tenfold::python
