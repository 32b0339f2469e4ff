#include "cpu/tall_gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/thread_pool.hpp"

namespace tenfold::detail {
namespace {

// Columns of op(B) per panel: a tile of C is MR x kPanel, kept in registers.
constexpr index_t kPanel = 8;
// Tiles of rows per task of the pool.
constexpr index_t kTilesPerTask = 8;

// The kernel below is compiled for AVX-512F and only called where the processor has
// it. Everything it calls is an intrinsic or has internal linkage, so no code of a
// header (std::min, ...) is instantiated for AVX-512 and then shared with callers that
// run on other processors.
#define TENFOLD_AVX512 __attribute__((target("avx512f")))

// One 512-bit vector of T: W lanes, one cache line.
template <class T>
struct Lanes;

template <>
struct Lanes<double> {
  using V = __m512d;
  static constexpr int W = 8;
  TENFOLD_AVX512 static V zero() { return _mm512_setzero_pd(); }
  TENFOLD_AVX512 static V load(const double* p) { return _mm512_loadu_pd(p); }
  TENFOLD_AVX512 static V load(unsigned mask, const double* p) {
    return _mm512_maskz_loadu_pd(static_cast<__mmask8>(mask), p);
  }
  TENFOLD_AVX512 static V set1(double x) { return _mm512_set1_pd(x); }
  TENFOLD_AVX512 static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  TENFOLD_AVX512 static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  TENFOLD_AVX512 static void store(unsigned mask, double* p, V v) {
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>(mask), v);
  }
};

template <>
struct Lanes<float> {
  using V = __m512;
  static constexpr int W = 16;
  TENFOLD_AVX512 static V zero() { return _mm512_setzero_ps(); }
  TENFOLD_AVX512 static V load(const float* p) { return _mm512_loadu_ps(p); }
  TENFOLD_AVX512 static V load(unsigned mask, const float* p) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), p);
  }
  TENFOLD_AVX512 static V set1(float x) { return _mm512_set1_ps(x); }
  TENFOLD_AVX512 static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  TENFOLD_AVX512 static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  TENFOLD_AVX512 static void store(unsigned mask, float* p, V v) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>(mask), v);
  }
};

// A tile is MR = 3 W rows (24 doubles or 48 floats): 3 x 8 = 24 accumulators, which
// leaves registers for A's three vectors and a broadcast of B. The accumulators are
// named one by one (the compiler kept an array of them in memory).
constexpr int kVectors = 3;

#define TENFOLD_TILE_ZERO(j) typename L::V c0##j = L::zero(), c1##j = L::zero(), c2##j = L::zero();
#define TENFOLD_TILE_STEP(j)                           \
  {                                                    \
    const typename L::V b = L::set1(bk[j]);            \
    c0##j = L::fma(a0, b, c0##j);                      \
    if constexpr (V > 1) c1##j = L::fma(a1, b, c1##j); \
    if constexpr (V > 2) c2##j = L::fma(a2, b, c2##j); \
  }
#define TENFOLD_TILE_OUT(j)                                               \
  L::store(full, out + (3 * (j)) * L::W, c0##j);                          \
  if constexpr (V > 1) L::store(full, out + (3 * (j) + 1) * L::W, c1##j); \
  if constexpr (V > 2) L::store(full, out + (3 * (j) + 2) * L::W, c2##j);

// out (MR x kPanel, column-major) = Ap Bp for one tile and one panel: Ap is the tile of
// A packed (k x MR, row p = column p of the tile's rows), Bp the panel of op(B) (k x
// kPanel, row-major, zero-padded). out(i, j) = sum_p Ap(p, i) Bp(p, j): per p, the first
// V vectors of row p of Ap times the kPanel broadcasts of row p of Bp (V < 3 for the last
// rows of A, so that a short tile costs no more than its rows). Alongside, when `copy`
// names them, the next tile of A is copied (masked rows) into its packed buffer, and a
// later tile is fetched into L2, so that memory latency overlaps the multiplications.
// Not inlined: inside its caller the compiler ran out of vector registers and spilled A.
struct NextTiles {
  const void* copy_from = nullptr;  // the next tile in place (leading dimension lda)
  void* copy_to = nullptr;          // its packed buffer
  unsigned mask[3] = {0, 0, 0};     // its rows, per vector
  const void* fetch = nullptr;      // the tile after it, in place
};

template <class T, int V>
__attribute__((noinline)) TENFOLD_AVX512 void tile(index_t k, const T* ap, const T* bp, T* out,
                                                   index_t lda, const NextTiles& next) {
  using L = Lanes<T>;
  constexpr unsigned full = (1u << L::W) - 1u;
  const T* copy_from = static_cast<const T*>(next.copy_from);
  T* copy_to = static_cast<T*>(next.copy_to);
  const T* fetch = static_cast<const T*>(next.fetch);
  TENFOLD_TILE_ZERO(0)
  TENFOLD_TILE_ZERO(1)
  TENFOLD_TILE_ZERO(2)
  TENFOLD_TILE_ZERO(3)
  TENFOLD_TILE_ZERO(4)
  TENFOLD_TILE_ZERO(5)
  TENFOLD_TILE_ZERO(6)
  TENFOLD_TILE_ZERO(7)
  for (index_t p = 0; p < k; ++p) {
    const T* a = ap + p * kVectors * L::W;
    const typename L::V a0 = L::load(a);
    const typename L::V a1 = V > 1 ? L::load(a + L::W) : a0;
    const typename L::V a2 = V > 2 ? L::load(a + 2 * L::W) : a0;
    if (copy_from != nullptr) {
      const T* src = copy_from + p * lda;
      T* dst = copy_to + p * kVectors * L::W;
      L::store(full, dst, L::load(next.mask[0], src));
      L::store(full, dst + L::W, L::load(next.mask[1], src + L::W));
      L::store(full, dst + 2 * L::W, L::load(next.mask[2], src + 2 * L::W));
    }
    if (fetch != nullptr) {
      const char* np = reinterpret_cast<const char*>(fetch + p * lda);
      _mm_prefetch(np, _MM_HINT_T1);
      _mm_prefetch(np + 64, _MM_HINT_T1);
      _mm_prefetch(np + 128, _MM_HINT_T1);
    }
    const T* bk = bp + p * kPanel;
    TENFOLD_TILE_STEP(0)
    TENFOLD_TILE_STEP(1)
    TENFOLD_TILE_STEP(2)
    TENFOLD_TILE_STEP(3)
    TENFOLD_TILE_STEP(4)
    TENFOLD_TILE_STEP(5)
    TENFOLD_TILE_STEP(6)
    TENFOLD_TILE_STEP(7)
  }
  TENFOLD_TILE_OUT(0)
  TENFOLD_TILE_OUT(1)
  TENFOLD_TILE_OUT(2)
  TENFOLD_TILE_OUT(3)
  TENFOLD_TILE_OUT(4)
  TENFOLD_TILE_OUT(5)
  TENFOLD_TILE_OUT(6)
  TENFOLD_TILE_OUT(7)
}

#undef TENFOLD_TILE_ZERO
#undef TENFOLD_TILE_STEP
#undef TENFOLD_TILE_OUT

// Lanes [0, n) of a vector set, n in [0, W].
constexpr unsigned lanes_mask(index_t n) { return (1u << n) - 1u; }

// The rows of the tile starting `left` rows before the end, per vector.
template <class T>
void tile_masks(index_t left, unsigned (&mask)[kVectors]) {
  constexpr index_t w = Lanes<T>::W;
  for (int v = 0; v < kVectors; ++v) {
    const index_t n_v = left - v * w;
    mask[v] = lanes_mask(n_v <= 0 ? 0 : n_v >= w ? w : n_v);
  }
}

// Rows [r0, r1) of C = alpha A op(B) + beta C (A and C with m rows), tile by tile. Each
// tile of A (MR rows, all k columns, one page per column when lda is large) is copied
// once into a packed buffer (k x MR, rows past r1 zero), where all panels of op(B) find
// it in the core's cache: the first tile here, the others during the first panel of the
// tile before (two buffers, `ap` and `ap + k MR`). `out` holds one tile of one panel.
template <class T>
TENFOLD_AVX512 void rows(index_t r0, index_t r1, index_t m, index_t n, index_t k, T alpha,
                         const T* a, index_t lda, const T* bp, T beta, T* c, index_t ldc, T* ap,
                         T* out) {
  using L = Lanes<T>;
  constexpr index_t w = L::W, mr = kVectors * w;
  unsigned mask[kVectors];
  tile_masks<T>(r1 - r0, mask);
  for (index_t p = 0; p < k; ++p) {
    for (int v = 0; v < kVectors; ++v)
      L::store(lanes_mask(w), ap + p * mr + v * w, L::load(mask[v], a + r0 + p * lda + v * w));
  }
  const typename L::V va = L::set1(alpha), vb = L::set1(beta);
  int current = 0;
  for (index_t i = r0; i < r1; i += mr) {
    const index_t rows_here = r1 - i < mr ? r1 - i : mr;
    tile_masks<T>(r1 - i, mask);
    T* packed = ap + current * k * mr;
    NextTiles next;
    if (i + mr < r1) {
      next.copy_from = a + i + mr;
      next.copy_to = ap + (1 - current) * k * mr;
      tile_masks<T>(r1 - i - mr, next.mask);
    }
    if (i + 2 * mr < m) next.fetch = a + i + 2 * mr;
    const NextTiles none;
    for (index_t j0 = 0; j0 < n; j0 += kPanel) {
      const NextTiles& along = j0 == 0 ? next : none;
      if (rows_here > 2 * w) {
        tile<T, 3>(k, packed, bp + j0 * k, out, lda, along);
      } else if (rows_here > w) {
        tile<T, 2>(k, packed, bp + j0 * k, out, lda, along);
      } else {
        tile<T, 1>(k, packed, bp + j0 * k, out, lda, along);
      }
      // C(i.., j0..) = alpha out + beta C, the columns and rows that exist.
      const index_t cols = n - j0 < kPanel ? n - j0 : kPanel;
      for (index_t j = 0; j < cols; ++j) {
        T* cj = c + i + (j0 + j) * ldc;
        for (int v = 0; v < kVectors; ++v) {
          if (v * w >= rows_here) break;
          typename L::V x = L::mul(va, L::load(out + j * mr + v * w));
          if (beta != T(0)) x = L::fma(vb, L::load(mask[v], cj + v * w), x);
          L::store(mask[v], cj + v * w, x);
        }
      }
    }
    current = 1 - current;
  }
}

#undef TENFOLD_AVX512

template <class T>
constexpr index_t tile_rows() {
  return kVectors * Lanes<T>::W;
}

}  // namespace

template <class T>
bool tall_gemm_suits(index_t m, index_t n, index_t k) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  const index_t padded = (n + kPanel - 1) / kPanel * kPanel;
  // A tile of A (MR x k, at most 96 KB) and the next one being copied stay in the
  // core's L2 cache while the panels of op(B) pass over the first.
  return avx512 && m >= tile_rows<T>() && n >= 1 && n <= 128 && 5 * padded <= 6 * n && k >= 1 &&
         k * tile_rows<T>() * static_cast<index_t>(sizeof(T)) <= 98304;
}

template <class T>
void tall_gemm(index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda, index_t stride_a,
               Op tb, const T* b, index_t ldb, T beta, T* c, index_t ldc, index_t stride_c,
               index_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  // Bp: op(B) in panels of kPanel columns, each k x kPanel row-major, zero-padded.
  const index_t panels = (n + kPanel - 1) / kPanel;
  std::vector<T> bp(static_cast<std::size_t>(panels * k * kPanel), T(0));
  for (index_t j = 0; j < n; ++j) {
    T* dst = bp.data() + (j / kPanel) * k * kPanel + j % kPanel;
    for (index_t p = 0; p < k; ++p)
      dst[p * kPanel] = tb == Op::none ? b[p + j * ldb] : b[j + p * ldb];
  }
  // Tasks: blocks of kTilesPerTask tiles of rows of each product of the batch.
  const index_t block = kTilesPerTask * tile_rows<T>();
  const index_t per_product = (m + block - 1) / block;
  parallel_for(per_product * batch, [&](index_t t) {
    // This task's two packed tiles of A and tile of C (64-byte aligned for the loads).
    alignas(64) T out[tile_rows<T>() * kPanel];
    thread_local std::vector<T> ap_buffer;
    const auto ap_size = static_cast<std::size_t>(2 * k * tile_rows<T>()) + 64 / sizeof(T);
    if (ap_buffer.size() < ap_size) ap_buffer.resize(ap_size);
    T* ap = ap_buffer.data();
    ap += (64 - reinterpret_cast<std::uintptr_t>(ap) % 64) % 64 / sizeof(T);
    const index_t i = t / per_product, r0 = (t % per_product) * block;
    rows<T>(r0, std::min(m, r0 + block), m, n, k, alpha, a + i * stride_a, lda, bp.data(), beta,
            c + i * stride_c, ldc, ap, out);
  });
}

template bool tall_gemm_suits<float>(index_t, index_t, index_t);
template bool tall_gemm_suits<double>(index_t, index_t, index_t);
template void tall_gemm<float>(index_t, index_t, index_t, float, const float*, index_t, index_t, Op,
                               const float*, index_t, float, float*, index_t, index_t, index_t);
template void tall_gemm<double>(index_t, index_t, index_t, double, const double*, index_t, index_t,
                                Op, const double*, index_t, double, double*, index_t, index_t,
                                index_t);

}  // namespace tenfold::detail
