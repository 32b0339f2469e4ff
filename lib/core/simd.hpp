// Kernels compiled for AVX-512, AVX2+FMA and baseline x86-64, chosen when the library
// loads (their loops vectorise; the library itself is built for baseline x86-64). The
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

/// 64 bytes of T as one vector value (GCC's and clang's vector extension: one AVX-512
/// register, two AVX2 ones or four SSE ones in the respective clones), for loops that keep
/// partial results in registers where a plain array would go to memory. load and store
/// read and write unaligned memory.
template <class T>
struct Vec64Of;
template <>
struct Vec64Of<float> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct Vec64Of<double> {
  typedef double type __attribute__((vector_size(64)));
};
// (not `using Vec64 = T __attribute__((vector_size(64)))`: GCC drops the attribute of a
// dependent alias)
template <class T>
using Vec64 = typename Vec64Of<T>::type;

// (by reference, not by value: a vector wider than the baseline's registers passed by
// value changes the calling convention, which compilers warn of in every clone)
template <class T>
TENFOLD_INLINE_INTO_CLONE inline void load64(Vec64<T>& v, const T* p) {
  static_assert(sizeof(Vec64<T>) == 64);
  __builtin_memcpy(&v, p, sizeof(v));
}

template <class T>
TENFOLD_INLINE_INTO_CLONE inline void store64(T* p, const Vec64<T>& v) {
  __builtin_memcpy(p, &v, sizeof(v));
}

}  // namespace tenfold::detail
