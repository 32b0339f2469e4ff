// Same-run reference rate: GFLOP/s of the backend GEMM on a given shape.
#pragma once

#include "tenfold/tensor.hpp"

namespace tenfold::bench {

/// Best-of-`reps` GFLOP/s of C (m x n) = A (m x k) B (k x n) on the cpu backend.
template <class T>
double gemm_gflops(index_t m, index_t n, index_t k, int reps = 3);

}  // namespace tenfold::bench
