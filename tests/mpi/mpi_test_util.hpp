// Helpers of the distributed component's tests (every process runs every test).
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "relative_difference.hpp"
#include "tenfold/cp.hpp"

namespace tenfold::test {

// Deterministic pseudo-random values in [-1, 1).
inline double noise(std::uint64_t i, std::uint64_t seed) {
  std::uint64_t z = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

// A folder shared by the processes of this run (one per process count, since ctest
// runs the process counts side by side).
inline std::filesystem::path shared_dir() {
  const std::filesystem::path d =
      std::filesystem::path(TENFOLD_MPI_TEST_TMP) / ("p" + std::to_string(world_size()));
  if (world_rank() == 0) std::filesystem::create_directories(d);
  MPI_Barrier(MPI_COMM_WORLD);
  return d;
}

inline void expect_same_model(const CpResult<double>& got, const CpResult<double>& want) {
  EXPECT_EQ(got.iterations, want.iterations);
  EXPECT_LT(relative_difference(got.model.weights, want.model.weights), 1e-12);
  for (std::size_t n = 0; n < want.model.factors.size(); ++n) {
    EXPECT_LT(relative_difference(got.model.factors[n].values(), want.model.factors[n].values()),
              1e-12)
        << "factor " << n;
  }
  EXPECT_NEAR(got.fit, want.fit, 1e-12);
}

// CP-ALS for exactly `iterations` sweeps (tol 0), so that both sides stop together.
inline CpOptions sweeps(index_t rank, int iterations, CpInit init = CpInit::random) {
  CpOptions o;
  o.rank = rank;
  o.max_iters = iterations;
  o.tol = 0.0;
  o.init = init;
  return o;
}

}  // namespace tenfold::test
