#include "tenfold/backend.hpp"

#include <string>

#include "core/compute.hpp"
#include "cpu/cpu_compute.hpp"
#include "tenfold/error.hpp"

#ifdef TENFOLD_WITH_CUDA
#include "cuda_compute.hpp"
#endif

namespace tenfold {

std::string_view to_string(Backend backend) { return backend == Backend::cpu ? "cpu" : "cuda"; }

Backend parse_backend(std::string_view name) {
  if (name == "cpu") return Backend::cpu;
  if (name == "cuda") return Backend::cuda;
  throw InvalidArgument("unknown backend '" + std::string(name) + "' (expected cpu or cuda)");
}

bool cuda_compiled() {
#ifdef TENFOLD_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_available() {
#ifdef TENFOLD_WITH_CUDA
  return detail::cuda_device_count() > 0;
#else
  return false;
#endif
}

namespace detail {

template <class T>
std::unique_ptr<Compute<T>> make_compute(Backend backend) {
  if (backend == Backend::cpu) return std::make_unique<CpuCompute<T>>();
#ifdef TENFOLD_WITH_CUDA
  return make_cuda_compute<T>();
#else
  throw NotCompiled(
      "the cuda backend is not compiled into this build of Tenfold "
      "(rebuild with -DTENFOLD_WITH_CUDA=ON and the CUDA toolkit)");
#endif
}

template std::unique_ptr<Compute<float>> make_compute<float>(Backend);
template std::unique_ptr<Compute<double>> make_compute<double>(Backend);

}  // namespace detail
}  // namespace tenfold
