#include "core/host_lapack.hpp"

#include <complex>

// LAPACKE's complex types as std::complex (the same layout as C's _Complex).
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include "core/thread_pool.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

int lapack_int(index_t v) {
  if (v < 0 || v > 46340) {  // n^2 must fit the 32-bit interface
    throw InvalidArgument("matrix size " + std::to_string(v) + " too large for the host LAPACK");
  }
  return static_cast<int>(v);
}

}  // namespace

std::vector<double> general_eigenvectors(index_t n, std::vector<double> a) {
  const int in = lapack_int(n);
  std::vector<double> wr(static_cast<std::size_t>(n)), wi(wr.size()), vr(a.size());
  const SerialBlas serial;
  const int info = LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', 'V', in, a.data(), in, wr.data(), wi.data(),
                                 nullptr, 1, vr.data(), in);
  if (info != 0) return {};
  return vr;
}

bool solve_general(index_t n, index_t nrhs, std::vector<double> a, double* b) {
  const int in = lapack_int(n), ir = lapack_int(nrhs);
  std::vector<int> pivots(static_cast<std::size_t>(n));
  const SerialBlas serial;
  return LAPACKE_dgesv(LAPACK_COL_MAJOR, in, ir, a.data(), in, pivots.data(), b, in) == 0;
}

}  // namespace tenfold::detail
