#include "cpu/tall_gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/thread_pool.hpp"

namespace tenfold::detail {
namespace {

// Tiles per task of the pool: each task starts with a copy of its first tile that
// nothing overlaps, so tasks are long where there are enough tiles to keep every thread busy.
constexpr index_t kMinTilesPerTask = 8;
constexpr index_t kMaxTilesPerTask = 64;
// How many tiles ahead a tile is fetched into L2 (then copied during the tile before
// it). Its lines are requested evenly over all panels of the tile now in the kernel:
// requested all at once, during the first panel, many were dropped (too many misses in
// flight), and the copy waited on memory; spread out, 2 ahead is enough
// (docs/performance.md).
constexpr index_t kFetchAhead = 2;

// What a call of `tile` does besides the product, when the fields are set: it copies the
// next tile of A (masked rows; a tile of A^T is copied by a pass of its own) into its
// packed buffer, and it fetches columns [fetch_first, fetch_first + fetch_count) of a
// later tile into L2 (the lines of each column's MR elements), one column every
// k / fetch_count steps, so that memory latency overlaps the multiplications.
struct NextTiles {
  const void* copy_from = nullptr;  // the next tile in place
  void* copy_to = nullptr;          // its packed buffer
  unsigned mask[3] = {0, 0, 0};     // its rows, per vector
  const void* fetch = nullptr;      // the later tile, in place
  index_t fetch_first = 0, fetch_count = 0;
};

// Where element (row i, column p) of a tile of op(A) lies: at i lane + p step from the
// tile's start; A: (1, lda), A^T: (lda, 1).
struct TileSteps {
  index_t lane = 1, step = 0;
};

// Lanes [0, n) of a vector set, n in [0, W].
constexpr unsigned lanes_mask(index_t n) { return (1u << n) - 1u; }

// The kernels below are compiled for AVX-512F and for AVX2 with FMA, each only called
// where the processor has its set (processor_isa). A tile is MR = 3 W rows (W lanes per
// vector): 3 x kPanel accumulators, which leaves registers for A's three vectors and a
// broadcast of B (32 vector registers with AVX-512, 16 with AVX2).
constexpr int kVectors = 3;

namespace avx512 {

#define TENFOLD_TARGET TENFOLD_TARGET_AVX512

// One 512-bit vector of T: W lanes, one cache line.
template <class T>
struct Lanes;

template <>
struct Lanes<double> {
  using V = __m512d;
  static constexpr int W = 8;
  TENFOLD_TARGET static V zero() { return _mm512_setzero_pd(); }
  TENFOLD_TARGET static V load(const double* p) { return _mm512_loadu_pd(p); }
  TENFOLD_TARGET static V load(unsigned mask, const double* p) {
    return _mm512_maskz_loadu_pd(static_cast<__mmask8>(mask), p);
  }
  TENFOLD_TARGET static V set1(double x) { return _mm512_set1_pd(x); }
  // Lane l of the result: lane idx[l] of a (idx[l] < 8) or of b (idx[l] - 8).
  using Index = std::int64_t;
  TENFOLD_TARGET static V permute2(V a, __m512i idx, V b) {
    return _mm512_permutex2var_pd(a, idx, b);
  }
  TENFOLD_TARGET static void transpose(V (&r)[W]);
  TENFOLD_TARGET static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  TENFOLD_TARGET static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  TENFOLD_TARGET static void store(unsigned mask, double* p, V v) {
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>(mask), v);
  }
  TENFOLD_TARGET static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
};

template <>
struct Lanes<float> {
  using V = __m512;
  static constexpr int W = 16;
  TENFOLD_TARGET static V zero() { return _mm512_setzero_ps(); }
  TENFOLD_TARGET static V load(const float* p) { return _mm512_loadu_ps(p); }
  TENFOLD_TARGET static V load(unsigned mask, const float* p) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), p);
  }
  TENFOLD_TARGET static V set1(float x) { return _mm512_set1_ps(x); }
  using Index = std::int32_t;
  TENFOLD_TARGET static V permute2(V a, __m512i idx, V b) {
    return _mm512_permutex2var_ps(a, idx, b);
  }
  TENFOLD_TARGET static void transpose(V (&r)[W]);
  TENFOLD_TARGET static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  TENFOLD_TARGET static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  TENFOLD_TARGET static void store(unsigned mask, float* p, V v) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>(mask), v);
  }
  TENFOLD_TARGET static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};

// The index vectors of a W x W transposition by blocks: at stage b (block size W / 2,
// ..., 2, 1), rows i and i + b (i & b = 0) swap their off-diagonal b x b blocks. Row i
// keeps its lanes l with l & b = 0 and takes lane l - b of row i + b at the others
// (`first`); row i + b takes lane l + b of row i at l & b = 0 and keeps the others
// (`second`). As Lanes<T>::permute2 reads them: l for lane l of a, W + l of b.
template <class T>
struct TransposeIndex {
  static constexpr int W = Lanes<T>::W;
  typename Lanes<T>::Index first[W][W], second[W][W];  // [b][l]
  constexpr TransposeIndex() : first{}, second{} {
    for (int b = 1; b < W; b *= 2) {
      for (int l = 0; l < W; ++l) {
        first[b][l] = (l & b) == 0 ? l : W + l - b;
        second[b][l] = (l & b) == 0 ? l + b : W + l;
      }
    }
  }
};
template <class T>
constexpr TransposeIndex<T> kTransposeIndex{};

// r = r^T for the W x W matrix of the rows r[0..W): log2 W stages of permutations.
template <class T>
TENFOLD_TARGET inline void transpose_by_blocks(typename Lanes<T>::V (&r)[Lanes<T>::W]) {
  using L = Lanes<T>;
  constexpr int w = L::W;
#pragma GCC unroll 4
  for (int b = w / 2; b >= 1; b /= 2) {
    const __m512i first = _mm512_loadu_si512(kTransposeIndex<T>.first[b]);
    const __m512i second = _mm512_loadu_si512(kTransposeIndex<T>.second[b]);
#pragma GCC unroll 16
    for (int i = 0; i < w; ++i) {
      if ((i & b) != 0) continue;
      const typename L::V top = r[i];
      r[i] = L::permute2(top, first, r[i + b]);
      r[i + b] = L::permute2(top, second, r[i + b]);
    }
  }
}
TENFOLD_TARGET inline void Lanes<double>::transpose(V (&r)[W]) { transpose_by_blocks<double>(r); }
TENFOLD_TARGET inline void Lanes<float>::transpose(V (&r)[W]) { transpose_by_blocks<float>(r); }

// Columns of op(B) per panel: 24 accumulators.
constexpr index_t kPanel = 8;
// Steps of the multiply loop per test for the copies and fetches that run alongside (1:
// as the loop was measured on AVX-512 processors; see the AVX2 value).
constexpr index_t kUnroll = 1;

#include "cpu/tall_gemm_tiles.inc"

#undef TENFOLD_TARGET

}  // namespace avx512

namespace avx2 {

#define TENFOLD_TARGET TENFOLD_TARGET_AVX2

// One 256-bit vector of T: W lanes, half a cache line. A mask of lanes (bit l for lane l)
// becomes a vector of all-ones lanes for the masked loads and stores, which only run where
// a mask leaves lanes out.
template <class T>
struct Lanes;

template <>
struct Lanes<double> {
  using V = __m256d;
  static constexpr int W = 4;
  TENFOLD_TARGET static __m256i lanes(unsigned mask) {
    const __m256i bits = _mm256_setr_epi64x(1, 2, 4, 8);
    return _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(mask), bits), bits);
  }
  TENFOLD_TARGET static V zero() { return _mm256_setzero_pd(); }
  TENFOLD_TARGET static V load(const double* p) { return _mm256_loadu_pd(p); }
  TENFOLD_TARGET static V load(unsigned mask, const double* p) {
    return mask == 0xFu ? _mm256_loadu_pd(p) : _mm256_maskload_pd(p, lanes(mask));
  }
  TENFOLD_TARGET static V set1(double x) { return _mm256_set1_pd(x); }
  TENFOLD_TARGET static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  TENFOLD_TARGET static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  TENFOLD_TARGET static void store(unsigned mask, double* p, V v) {
    if (mask == 0xFu) {
      _mm256_storeu_pd(p, v);
    } else {
      _mm256_maskstore_pd(p, lanes(mask), v);
    }
  }
  TENFOLD_TARGET static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  // 4 x 4: pairs of rows interleaved, then the 128-bit halves exchanged.
  TENFOLD_TARGET static void transpose(V (&r)[W]) {
    const V t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    const V t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
  }
};

template <>
struct Lanes<float> {
  using V = __m256;
  static constexpr int W = 8;
  TENFOLD_TARGET static __m256i lanes(unsigned mask) {
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(mask)), bits),
                              bits);
  }
  TENFOLD_TARGET static V zero() { return _mm256_setzero_ps(); }
  TENFOLD_TARGET static V load(const float* p) { return _mm256_loadu_ps(p); }
  TENFOLD_TARGET static V load(unsigned mask, const float* p) {
    return mask == 0xFFu ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes(mask));
  }
  TENFOLD_TARGET static V set1(float x) { return _mm256_set1_ps(x); }
  TENFOLD_TARGET static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  TENFOLD_TARGET static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  TENFOLD_TARGET static void store(unsigned mask, float* p, V v) {
    if (mask == 0xFFu) {
      _mm256_storeu_ps(p, v);
    } else {
      _mm256_maskstore_ps(p, lanes(mask), v);
    }
  }
  TENFOLD_TARGET static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  // 8 x 8: pairs of rows interleaved, then pairs of pairs, then the 128-bit halves
  // exchanged.
  TENFOLD_TARGET static void transpose(V (&r)[W]) {
    V t[W], u[W];
    for (int i = 0; i < W; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < W; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
      r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
      r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
  }
};

// Columns of op(B) per panel: 12 accumulators.
constexpr index_t kPanel = 4;
// Steps of the multiply loop per test for the copies and fetches that run alongside: a
// step is 12 multiply-adds, and with a test per step the loop ran at 60-80 % of
// OpenBLAS's rate, with one per 4 steps at 85-120 % (docs/performance.md).
constexpr index_t kUnroll = 4;

#include "cpu/tall_gemm_tiles.inc"

#undef TENFOLD_TARGET

}  // namespace avx2

// The tile's rows and the panel's columns of the kernel for `isa`.
template <class T>
std::pair<index_t, index_t> tile_shape(Isa isa) {
  if (isa == Isa::avx512) return {avx512::tile_rows<T>(), avx512::kPanel};
  return {avx2::tile_rows<T>(), avx2::kPanel};
}

// tall_gemm (w null) or tall_gemm_dots with the kernel for `isa`.
template <class T>
void tall_products(Isa isa, index_t m, index_t n, index_t k, T alpha, Op ta, const T* a,
                   index_t lda, index_t stride_a, Op tb, const T* b, index_t ldb, T beta, T* c,
                   index_t ldc, index_t stride_c, const T* w, index_t ldw, T* dots, index_t ldd,
                   index_t batch) {
  const auto run = isa == Isa::avx512 ? &avx512::tall_products<T> : &avx2::tall_products<T>;
  run(m, n, k, alpha, ta, a, lda, stride_a, tb, b, ldb, beta, c, ldc, stride_c, w, ldw, dots, ldd,
      batch);
}

}  // namespace

template <class T>
bool tall_gemm_fits(index_t m, index_t n, index_t k, Isa isa, bool any_padding) {
  if (isa == Isa::baseline || isa > processor_isa()) return false;
  const auto [rows, panel] = tile_shape<T>(isa);
  const index_t padded = (n + panel - 1) / panel * panel;
  // A tile of op(A) (MR x k, at most 96 KB) and the next one being copied stay in the
  // core's L2 cache while the panels of op(B) pass over the first.
  return m >= rows && n >= 1 && n <= 128 && (any_padding || 5 * padded <= 6 * n) && k >= 1 &&
         k * rows * static_cast<index_t>(sizeof(T)) <= 98304;
}

template <class T>
bool tall_gemm_suits(index_t m, index_t n, index_t k) {
  return tall_gemm_fits<T>(m, n, k, processor_isa());
}

template <class T>
void tall_gemm(index_t m, index_t n, index_t k, T alpha, Op ta, const T* a, index_t lda,
               index_t stride_a, Op tb, const T* b, index_t ldb, T beta, T* c, index_t ldc,
               index_t stride_c, index_t batch, Isa isa) {
  if (m == 0 || n == 0 || batch == 0) return;
  tall_products(isa, m, n, k, alpha, ta, a, lda, stride_a, tb, b, ldb, beta, c, ldc, stride_c,
                static_cast<const T*>(nullptr), 0, static_cast<T*>(nullptr), 0, batch);
}

template <class T>
void tall_gemm_dots(index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
                    index_t stride_a, Op tb, const T* b, index_t ldb, const T* w, index_t ldw,
                    T* dots, index_t ldd, index_t batch, T* c, index_t ldc, index_t stride_c,
                    Isa isa) {
  if (n == 0 || batch == 0) return;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < batch; ++i) dots[i + j * ldd] = T(0);
  if (m == 0) return;
  tall_products(isa, m, n, k, alpha, Op::none, a, lda, stride_a, tb, b, ldb, T(0), c, ldc, stride_c,
                w, ldw, dots, ldd, batch);
}

template bool tall_gemm_fits<float>(index_t, index_t, index_t, Isa, bool);
template bool tall_gemm_fits<double>(index_t, index_t, index_t, Isa, bool);
template bool tall_gemm_suits<float>(index_t, index_t, index_t);
template bool tall_gemm_suits<double>(index_t, index_t, index_t);
template void tall_gemm<float>(index_t, index_t, index_t, float, Op, const float*, index_t, index_t,
                               Op, const float*, index_t, float, float*, index_t, index_t, index_t,
                               Isa);
template void tall_gemm<double>(index_t, index_t, index_t, double, Op, const double*, index_t,
                                index_t, Op, const double*, index_t, double, double*, index_t,
                                index_t, index_t, Isa);
template void tall_gemm_dots<float>(index_t, index_t, index_t, float, const float*, index_t,
                                    index_t, Op, const float*, index_t, const float*, index_t,
                                    float*, index_t, index_t, float*, index_t, index_t, Isa);
template void tall_gemm_dots<double>(index_t, index_t, index_t, double, const double*, index_t,
                                     index_t, Op, const double*, index_t, const double*, index_t,
                                     double*, index_t, index_t, double*, index_t, index_t, Isa);

}  // namespace tenfold::detail
