// Kernels compiled for AVX-512, AVX2+FMA and baseline x86-64, chosen when the library
// loads (their loops vectorise; the library itself is built for baseline x86-64). The
// clones name the x86-64 levels v4 and v3, which GCC's loader picks by the processor's
// features; clones named after a processor model ("arch=haswell") are picked by model
// and so never on AMD processors, which then ran the baseline clone.
#pragma once

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
