// A C-order tensor decomposed through its axis-order copy and in place, and the same
// values as a Fortran-order tensor, alternated in one run: CP-ALS (10 sweeps, random
// start, no compression), HOOI (3 sweeps) and ST-HOSVD.
//   row_major_input [I] [R] [reps]     (defaults 300 16 2: a 216 MB tensor)
#include <cstdio>
#include <cstdlib>
#include <random>

#include "tenfold/cp.hpp"
#include "tenfold/tucker.hpp"

using namespace tenfold;

int main(int argc, char** argv) {
  const index_t n = argc > 1 ? std::atol(argv[1]) : 300;
  const index_t rank = argc > 2 ? std::atol(argv[2]) : 16;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 2;
  // The memory of a C-order n x n x n array (mode m is NumPy axis 2 - m); read with
  // col_major, the same memory is a Fortran-order array (the axes the other way round).
  Tensor<double> x({n, n, n});
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (double& v : x.values()) v = u(gen);
  std::printf("%ld^3 float64 (%.0f MB); seconds per call\n", static_cast<long>(n),
              static_cast<double>(x.numel()) * 8e-6);
  struct Way {
    const char* name;
    Layout layout;
    RowMajorInput input;
  };
  const Way ways[] = {{"C copy", Layout::row_major, RowMajorInput::copy},
                      {"C in place", Layout::row_major, RowMajorInput::in_place},
                      {"Fortran", Layout::col_major, RowMajorInput::automatic}};
  for (int rep = 0; rep < reps; ++rep) {
    for (const Way& way : ways) {
      CpOptions cp;
      cp.rank = rank;
      cp.max_iters = 10;
      cp.tol = 0.0;
      cp.init = CpInit::random;
      cp.compress = CpCompress::off;
      cp.layout = way.layout;
      cp.row_major_input = way.input;
      const CpResult<double> c = cp_als(x, cp);
      TuckerOptions tk;
      tk.method = TuckerMethod::hooi;
      tk.ranks = {2 * rank, 2 * rank, 2 * rank};
      tk.max_iters = 3;
      tk.tol = 0.0;
      tk.layout = way.layout;
      tk.row_major_input = way.input;
      const TuckerResult<double> t = tucker(x, tk);
      tk.method = TuckerMethod::sthosvd;
      const TuckerResult<double> s = tucker(x, tk);
      std::printf("%-10s cp %.3f (mttkrp %.3f, fit %.12f)  hooi %.3f (error %.12f)  sthosvd %.3f\n",
                  way.name, c.timings.total, c.timings.mttkrp, c.fit, t.timings.total,
                  t.relative_error, s.timings.total);
    }
  }
}
