// Selection of the compute backend used by the algorithms.
#pragma once

#include <string>
#include <string_view>

#include "tenfold/export.hpp"

namespace tenfold {

/// Where an algorithm runs. `cuda` needs a build with TENFOLD_WITH_CUDA and a device.
/// `reference` is plain loops in double accumulation, without BLAS: the oracle the
/// other backends are tested against (correct, and slow).
enum class Backend { cpu, cuda, reference };

/// "cpu", "cuda" or "reference".
TENFOLD_API std::string_view to_string(Backend backend);

/// Parses "cpu", "cuda" or "reference"; throws InvalidArgument otherwise.
TENFOLD_API Backend parse_backend(std::string_view name);

/// True when this build contains the CUDA backend (whether or not a device is present).
TENFOLD_API bool cuda_compiled();

/// True when the CUDA backend is compiled and at least one device can be used.
TENFOLD_API bool cuda_available();

/// The BLAS and LAPACK the cpu backend calls, as the library itself reports them.
struct BlasInfo {
  std::string library;  ///< The build's choice (CMake TENFOLD_BLAS): "openblas",
                        ///< "scipy-openblas" or "blis".
  std::string version;  ///< The library's own description of its build
                        ///< (openblas_get_config, bli_info_get_version_str).
  std::string kernel;   ///< The kernels it chose for this processor when it was loaded
                        ///< (openblas_get_corename; BLIS: the configuration it selected).
};

/// The BLAS of this build and the kernels it runs on this processor.
TENFOLD_API BlasInfo blas_info();

}  // namespace tenfold
