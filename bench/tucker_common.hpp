// Shared by bench_tucker and gpu_bench: the noise of their test tensors and the
// flop counts of the Tucker algorithms as implemented, for an I^3 tensor and ranks
// (r, r, r).
#pragma once

#include <cstdint>

namespace tenfold::bench {

// Uniform in [-0.5, 0.5) from an integer hash of l (SplitMix64's finaliser), which
// NumPy reproduces exactly with uint64 arithmetic.
inline double hash_noise(std::uint64_t l) {
  std::uint64_t h = (l + 1) * 0x9E3779B97F4A7C15ull;
  h = (h ^ (h >> 31)) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return static_cast<double>(h >> 11) * 0x1.0p-53 - 0.5;
}

struct TuckerFlops {
  double gram = 0.0;
  double ttm = 0.0;
};

// ST-HOSVD goes 0, 2, 1 (with equal reductions any order costs the same). A Gram of
// mode n costs I_n^2 times the other modes' product (syrk), Y = X x_n U^T costs
// 2 r_n numel(X).
inline TuckerFlops sthosvd_flops(double i, double r) {
  return {i * i * i * i + r * i * i * i + r * r * i * i,
          2 * (r * i * i * i + r * r * i * i + r * r * r * i)};
}

inline TuckerFlops hosvd_flops(double i, double r) {
  return {3 * i * i * i * i, 2 * (r * i * i * i + r * r * i * i + r * r * r * i)};
}

// Each sweep: Y_0 = X x_2 U_2^T x_1 U_1^T; Z = X x_0 U_0^T, Y_1 = Z x_2 U_2^T,
// Y_2 = Z x_1 U_1^T; G = Y_2 x_2 U_2^T; three Grams of I x r^2 unfoldings.
inline TuckerFlops hooi_flops(double i, double r, int sweeps) {
  TuckerFlops f = sthosvd_flops(i, r);
  f.gram += sweeps * 3 * i * i * r * r;
  f.ttm += sweeps * (4 * r * i * i * i + 6 * r * r * i * i + 2 * r * r * r * i);
  return f;
}

}  // namespace tenfold::bench
