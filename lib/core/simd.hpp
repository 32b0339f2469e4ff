// Kernels compiled for AVX-512, AVX2+FMA and baseline x86-64, chosen when the library
// loads (their loops vectorise; the library itself is built for baseline x86-64), and the
// tools of kernels written for each set with vectors of its width (Isa). The
// clones name the x86-64 levels v4 and v3, which GCC's loader picks by the processor's
// features; clones named after a processor model ("arch=haswell") are picked by model
// and so never on AMD processors, which then ran the baseline clone.
#pragma once

#include <cstddef>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TENFOLD_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TENFOLD_SIMD_CLONES
#endif
// Inlined into each clone, so that its loops take the clone's instructions (a function or
// lambda compiled on its own gets the baseline's).
#if defined(__GNUC__)
#define TENFOLD_INLINE_INTO_CLONE __attribute__((always_inline))
#else
#define TENFOLD_INLINE_INTO_CLONE
#endif
// Before a loop over a row whose output and inputs are different buffers: vectorised
// by GCC without the run-time overlap checks it adds at every entry (many entries of a
// short loop: one per fibre of a sparse tree). Clang's equivalent, assume_safety, is a
// request that warns where its vectoriser is off (-O1), so clang keeps its checks.
#if defined(__GNUC__) && !defined(__clang__)
#define TENFOLD_DISJOINT_ROWS _Pragma("GCC ivdep")
#else
#define TENFOLD_DISJOINT_ROWS
#endif

namespace tenfold::detail {

/// Requests the cache lines of `bytes` bytes from p (a row read soon at a random place).
TENFOLD_INLINE_INTO_CLONE inline void prefetch_bytes(const void* p, std::ptrdiff_t bytes) {
  const char* from = static_cast<const char*>(p);
  for (std::ptrdiff_t b = 0; b < bytes; b += 64) __builtin_prefetch(from + b);
}

/// The vector instruction sets that hand-written kernels are compiled for, in order: each
/// such kernel has a function per set (TENFOLD_TARGET_AVX2, TENFOLD_TARGET_AVX512) and is
/// called for the best set the processor runs, so that its vectors and register tiles fit
/// the set's registers (SSE2 and AVX2: 16 registers of 16 or 32 bytes; AVX-512: 32 of 64
/// bytes).
enum class Isa { baseline, avx2, avx512 };

/// The best of them this processor runs: AVX-512F, else AVX2 with FMA, else baseline (SSE2).
inline Isa processor_isa() {
  static const Isa best = __builtin_cpu_supports("avx512f") ? Isa::avx512
                          : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                              ? Isa::avx2
                              : Isa::baseline;
  return best;
}

#define TENFOLD_TARGET_AVX512 __attribute__((target("avx512f")))
#define TENFOLD_TARGET_AVX2 __attribute__((target("avx2,fma")))

/// `Bytes` bytes of T as one vector value (GCC's and clang's vector extension), for loops
/// that keep partial results in registers where a plain array would go to memory; a
/// function for one instruction set takes the vectors of its registers' size (wider ones
/// are split by the compiler, through memory). vec_load and vec_store read and write
/// unaligned memory.
template <class T, int Bytes>
struct VecOf {
  typedef T type __attribute__((vector_size(Bytes)));
};
// (not `using Vec = T __attribute__((vector_size(Bytes)))`: GCC drops the attribute of a
// dependent alias)
template <class T, int Bytes>
using Vec = typename VecOf<T, Bytes>::type;

// (by reference, not by value: a vector wider than the baseline's registers passed by
// value changes the calling convention, which compilers warn of)
template <class T, int Bytes>
TENFOLD_INLINE_INTO_CLONE inline void vec_load(Vec<T, Bytes>& v, const T* p) {
  __builtin_memcpy(&v, p, sizeof(v));
}

/// As vec_load, one load the compiler keeps (a volatile read), where it would otherwise read
/// memory again at each use: a vector loaded once for several multiply-adds.
template <class T, int Bytes>
TENFOLD_INLINE_INTO_CLONE inline void vec_load_once(Vec<T, Bytes>& v, const T* p) {
  typedef T Unaligned __attribute__((vector_size(Bytes), aligned(alignof(T))));
  v = *reinterpret_cast<const volatile Unaligned*>(p);
}

template <class T, int Bytes>
TENFOLD_INLINE_INTO_CLONE inline void vec_store(T* p, const Vec<T, Bytes>& v) {
  __builtin_memcpy(p, &v, sizeof(v));
}

}  // namespace tenfold::detail
