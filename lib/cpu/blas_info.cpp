// tenfold::blas_info: the BLAS of the build (cmake/blas.cmake) asked, through its own
// entry points, what it is and which kernels it chose when it was loaded.
#include <string>

#include "tenfold/backend.hpp"

#if defined(TENFOLD_BLAS_OPENBLAS)
// OpenBLAS's own entry points (cblas.h of every OpenBLAS build; scipy-openblas renames
// them to scipy_openblas_*, cmake/blas.cmake).
extern "C" char* openblas_get_config(void);
extern "C" char* openblas_get_corename(void);
#elif defined(TENFOLD_BLAS_BLIS)
// BLIS's own entry points (blis.h; arch_t is an enum).
extern "C" char* bli_info_get_version_str(void);
extern "C" int bli_arch_query_id(void);
extern "C" char* bli_arch_string(int id);
#endif

namespace tenfold {

BlasInfo blas_info() {
  const auto text = [](const char* s) { return std::string(s == nullptr ? "" : s); };
#if defined(TENFOLD_BLAS_OPENBLAS)
  return {TENFOLD_BLAS_CHOICE, text(openblas_get_config()), text(openblas_get_corename())};
#elif defined(TENFOLD_BLAS_BLIS)
  return {TENFOLD_BLAS_CHOICE, "BLIS " + text(bli_info_get_version_str()),
          text(bli_arch_string(bli_arch_query_id()))};
#endif
}

}  // namespace tenfold
