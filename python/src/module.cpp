// tenfold._tenfold: the compiled part of the Python package. The public functions are
// the pure-Python ones of python/tenfold/, which apply the copy rule and shape results.
#include <map>
#include <string>

#include "bindings.hpp"
#include "tenfold/backend.hpp"
#include "tenfold/error.hpp"
#include "tenfold/threads.hpp"

namespace nb = nanobind;

NB_MODULE(_tenfold, m) {
  // Library errors as Python ones, the library's message unchanged.
  // Created once and kept for the life of the process (the translator refers to them).
  static PyObject* device_error =
      PyErr_NewExceptionWithDoc("tenfold.DeviceError",
                                "A GPU call failed, no usable device is present, or the CUDA "
                                "backend is not compiled into this build.",
                                PyExc_RuntimeError, nullptr);
  static PyObject* numerical_error = PyErr_NewExceptionWithDoc(
      "tenfold.NumericalError", "A numerical step failed (for example a non-finite result).",
      PyExc_ArithmeticError, nullptr);
  m.attr("DeviceError") = nb::borrow(device_error);
  m.attr("NumericalError") = nb::borrow(numerical_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tenfold::InvalidOption& e) {
      // The library's option field by the argument name the Python API gives it (TensorLy's).
      static const std::map<std::string, std::string> names = {
          {"max_iters", "n_iter_max"},
          {"max_inner_iters", "n_inner_iter_max"},
          {"seed", "random_state"},
          {"gradient_nonzeros", "gradient_samples"},
          {"gradient_zeros", "gradient_samples"},
          {"function_nonzeros", "function_samples"},
          {"function_zeros", "function_samples"}};
      const auto name = names.find(e.option());
      const std::string text = name == names.end() ? e.what() : name->second + " " + e.problem();
      PyErr_SetString(PyExc_ValueError, text.c_str());
    } catch (const tenfold::InvalidArgument& e) {  // DimensionMismatch included
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const tenfold::IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const tenfold::MemoryError& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const tenfold::DeviceError& e) {
      PyErr_SetString(device_error, e.what());
    } catch (const tenfold::NotCompiled& e) {
      PyErr_SetString(device_error, e.what());
    } catch (const tenfold::NumericalError& e) {
      PyErr_SetString(numerical_error, e.what());
    } catch (const tenfold::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.def("cuda_compiled", &tenfold::cuda_compiled);
  m.def("cuda_available", &tenfold::cuda_available);
  m.def("num_threads", &tenfold::num_threads);
  m.def("set_num_threads", &tenfold::set_num_threads, nb::arg("threads"));
  m.def("blas_info", [] {
    const tenfold::BlasInfo info = tenfold::blas_info();
    const auto str = [](const std::string& s) { return nb::str(s.data(), s.size()); };
    return nb::make_tuple(str(info.library), str(info.version), str(info.kernel));
  });
  tenfold::python::register_decompositions(m);
  tenfold::python::register_attention(m);
  tenfold::python::register_sparse(m);
  tenfold::python::register_gcp(m);
  tenfold::python::register_parafac2(m);
  tenfold::python::register_cmtf(m);
  tenfold::python::register_tt_nntucker(m);
  tenfold::python::register_cache_attention(m);
}
