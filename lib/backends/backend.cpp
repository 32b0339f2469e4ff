#include "tenfold/backend.hpp"

#include <string>

#include "core/compute.hpp"
#include "core/instantiate.hpp"
#include "core/names.hpp"
#include "cpu/cpu_compute.hpp"
#include "reference/reference_compute.hpp"
#include "tenfold/error.hpp"

#ifdef TENFOLD_WITH_CUDA
#include "cuda_compute.hpp"
#endif

namespace tenfold {

namespace {

constexpr detail::Named<Backend> backends[] = {
    {Backend::cpu, "cpu"}, {Backend::cuda, "cuda"}, {Backend::reference, "reference"}};

}  // namespace

std::string_view to_string(Backend backend) { return detail::name_of<Backend>(backends, backend); }

Backend parse_backend(std::string_view name) {
  return detail::parse_named<Backend>(backends, name, "backend");
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
  if constexpr (is_complex_v<T>) {
    throw InvalidArgument("complex tensors run on the cpu backend only, not on " +
                          std::string(to_string(backend)));
  } else {
    if (backend == Backend::reference) return std::make_unique<ReferenceCompute<T>>();
#ifdef TENFOLD_WITH_CUDA
    return make_cuda_compute<T>();
#else
    throw NotCompiled(
        "the cuda backend is not compiled into this build of Tenfold "
        "(rebuild with -DTENFOLD_WITH_CUDA=ON and the CUDA toolkit)");
#endif
  }
}

#define TENFOLD_INSTANTIATE_MAKE_COMPUTE(T) \
  template std::unique_ptr<Compute<T>> make_compute<T>(Backend);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_MAKE_COMPUTE)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_MAKE_COMPUTE)

}  // namespace detail
}  // namespace tenfold
