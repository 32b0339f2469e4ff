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
  // Lane l of the result: lane idx[l] of a (idx[l] < 8) or of b (idx[l] - 8).
  using Index = std::int64_t;
  TENFOLD_AVX512 static V permute2(V a, __m512i idx, V b) {
    return _mm512_permutex2var_pd(a, idx, b);
  }
  TENFOLD_AVX512 static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  TENFOLD_AVX512 static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  TENFOLD_AVX512 static void store(unsigned mask, double* p, V v) {
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>(mask), v);
  }
  TENFOLD_AVX512 static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
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
  using Index = std::int32_t;
  TENFOLD_AVX512 static V permute2(V a, __m512i idx, V b) {
    return _mm512_permutex2var_ps(a, idx, b);
  }
  TENFOLD_AVX512 static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  TENFOLD_AVX512 static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  TENFOLD_AVX512 static void store(unsigned mask, float* p, V v) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>(mask), v);
  }
  TENFOLD_AVX512 static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
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

// Rows [p0, p0 + W) of vector v of a packed tile of A^T (columns p0 .. of the tile's W
// rows of A^T that `mask` names, the others zero; columns from k on are not stored):
// W rows of A^T loaded, transposed in registers by log2 W stages of permutations.
template <class T>
TENFOLD_AVX512 inline void copy_transposed(const T* tile, index_t lda, index_t p0, index_t k, int v,
                                           unsigned mask, T* packed) {
  using L = Lanes<T>;
  constexpr int w = L::W;
  const index_t cols = k - p0 < w ? k - p0 : w;
  const unsigned col_mask = lanes_mask(cols);
  // Unrolled, so that r stays in registers.
  typename L::V r[w];
#pragma GCC unroll 16
  for (int i = 0; i < w; ++i) {
    r[i] = ((mask >> i) & 1u) != 0 ? L::load(col_mask, tile + (v * w + i) * lda + p0) : L::zero();
  }
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
#pragma GCC unroll 16
  for (index_t q = 0; q < cols; ++q) L::store(packed + (p0 + q) * kVectors * w + v * w, r[q]);
}

// Row p of a tile of A (column p of its rows, leading dimension lda) into the packed
// tile: one load per vector, the lanes `mask` names (the others zero).
template <class T>
TENFOLD_AVX512 inline void copy_row(const T* tile, index_t lda, index_t p,
                                    const unsigned (&mask)[kVectors], T* packed) {
  using L = Lanes<T>;
  for (int v = 0; v < kVectors; ++v)
    L::store(packed + p * kVectors * L::W + v * L::W, L::load(mask[v], tile + p * lda + v * L::W));
}

// A whole tile of op(A) into its packed buffer: of A row by row; of A^T in blocks of W
// rows (for A^T, a pass of its own ran faster than spreading the blocks over the first
// panel, as the rows of A are: docs/performance.md).
template <class T>
TENFOLD_AVX512 void copy_tile(const T* tile, index_t k, TileSteps s,
                              const unsigned (&mask)[kVectors], T* packed) {
  if (s.lane == 1) {
    for (index_t p = 0; p < k; ++p) copy_row(tile, s.step, p, mask, packed);
  } else {
    for (index_t p0 = 0; p0 < k; p0 += Lanes<T>::W)
      for (int v = 0; v < kVectors; ++v) copy_transposed(tile, s.lane, p0, k, v, mask[v], packed);
  }
}

// Where a tile of one panel lands, for the `cols` columns and the rows (per vector
// `mask`) that exist: C(i.., j0..) = alpha out + beta C (with beta = 0, C is not read);
// or, when `w` is set, only the column dots: dots(j) += sum_i alpha out(i, j) W(i, j) (W
// at the tile's rows and panel's columns).
template <class T>
struct TileOut {
  T* c;
  index_t ldc;
  index_t cols;
  unsigned mask[3];
  T alpha, beta;
  const T* w = nullptr;
  index_t ldw = 0;
  T* dots = nullptr;
  index_t ldd = 0;
};

// Column j of a tile's result, vectors 0 .. V-1, to where `o` says.
template <class T, int V>
TENFOLD_AVX512 inline void put(const TileOut<T>& o, index_t j, typename Lanes<T>::V x0,
                               typename Lanes<T>::V x1, typename Lanes<T>::V x2) {
  using L = Lanes<T>;
  const typename L::V va = L::set1(o.alpha);
  const typename L::V x[3] = {L::mul(va, x0), L::mul(va, x1), L::mul(va, x2)};
  if (o.w != nullptr) {
    const T* wj = o.w + j * o.ldw;
    typename L::V s = L::mul(x[0], L::load(o.mask[0], wj));
    if constexpr (V > 1) s = L::fma(x[1], L::load(o.mask[1], wj + L::W), s);
    if constexpr (V > 2) s = L::fma(x[2], L::load(o.mask[2], wj + 2 * L::W), s);
    // The lanes summed in order (GCC 12's _mm512_reduce_add warns of undefined lanes).
    T lanes[L::W];
    L::store(lanes, s);
    T sum = lanes[0];
    for (int i = 1; i < L::W; ++i) sum += lanes[i];
    o.dots[j * o.ldd] += sum;
    return;
  }
  for (int v = 0; v < V; ++v) {
    T* p = o.c + j * o.ldc + v * L::W;
    typename L::V y = x[v];
    if (o.beta != T(0)) y = L::fma(L::set1(o.beta), L::load(o.mask[v], p), y);
    L::store(o.mask[v], p, y);
  }
}

// The tile of C (MR x kPanel) = Ap Bp for one tile and one panel, written to C through
// `o`: Ap is the tile of A packed (k x MR, row p = column p of the tile's rows), Bp the
// panel of op(B) (k x kPanel, row-major, zero-padded). out(i, j) = sum_p Ap(p, i) Bp(p, j):
// per p, the first V vectors of row p of Ap times the kPanel broadcasts of row p of Bp (V
// < 3 for the last rows of A, so that a short tile costs no more than its rows).
// Alongside, the copy and the fetches of `next`. Not inlined: inside its caller the
// compiler ran out of vector registers and spilled A.
#define TENFOLD_TILE_OUT(j) \
  if ((j) < o.cols) put<T, V>(o, j, c0##j, c1##j, c2##j);

template <class T, int V>
__attribute__((noinline)) TENFOLD_AVX512 void tile(index_t k, const T* ap, const T* bp, TileSteps s,
                                                   const NextTiles& next, const TileOut<T>& o) {
  using L = Lanes<T>;
  const T* copy_from = static_cast<const T*>(next.copy_from);
  T* copy_to = static_cast<T*>(next.copy_to);
  const char* fetch = static_cast<const char*>(next.fetch);
  // Column q of a tile of A: its MR elements (192 bytes, on 3 or 4 lines); of A^T (MR
  // columns of A, each k long, lda apart): 192 bytes in memory order, all of the tile
  // where lda = k.
  const index_t fetch_step = s.lane == 1 ? s.step * static_cast<index_t>(sizeof(T)) : 192;
  index_t fetched = 0;
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
    if (copy_from != nullptr) copy_row(copy_from, s.step, p, next.mask, copy_to);
    if (fetch != nullptr && fetched < next.fetch_count && p * next.fetch_count >= fetched * k) {
      const char* np = fetch + (next.fetch_first + fetched) * fetch_step;
      _mm_prefetch(np, _MM_HINT_T1);
      _mm_prefetch(np + 64, _MM_HINT_T1);
      _mm_prefetch(np + 128, _MM_HINT_T1);
      _mm_prefetch(np + 191, _MM_HINT_T1);
      ++fetched;
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

// The rows of the tile starting `left` rows before the end, per vector.
template <class T>
void tile_masks(index_t left, unsigned (&mask)[kVectors]) {
  constexpr index_t w = Lanes<T>::W;
  for (int v = 0; v < kVectors; ++v) {
    const index_t n_v = left - v * w;
    mask[v] = lanes_mask(n_v <= 0 ? 0 : n_v >= w ? w : n_v);
  }
}

// The products C_i = alpha A_i op(B) + beta C_i of a call, cut into tiles of MR rows:
// tile g is tile g % per_product of product g / per_product (the last tile of each
// product may be short). With `w` set, C is not written: dots(i, j) = sum_r alpha (A_i
// op(B))(r, j) W(r, j) instead (dots zero on entry).
template <class T>
struct Tiles {
  index_t m, n, k;
  T alpha, beta;
  const T* a;
  index_t stride_a;
  TileSteps steps;  // of op(A)
  const T* bp;      // op(B) in panels (see tall_gemm)
  T* c;
  index_t ldc, stride_c;
  index_t per_product;
  const T* w;
  index_t ldw;
  T* dots;
  index_t ldd;
  index_t row_of(index_t g) const { return (g % per_product) * kVectors * Lanes<T>::W; }
  const T* a_of(index_t g) const {
    return a + (g / per_product) * stride_a + row_of(g) * steps.lane;
  }
  index_t rows_of(index_t g) const {
    return m - row_of(g) < kVectors * Lanes<T>::W ? m - row_of(g) : kVectors * Lanes<T>::W;
  }
  // Where tile g's panel starting at column j0 lands.
  TileOut<T> out(index_t g, index_t j0) const {
    TileOut<T> o{nullptr, ldc, n - j0 < kPanel ? n - j0 : kPanel, {}, alpha, beta};
    tile_masks<T>(rows_of(g), o.mask);
    if (w != nullptr) {
      o.w = w + row_of(g) + j0 * ldw;
      o.ldw = ldw;
      o.dots = dots + g / per_product + j0 * ldd;
      o.ldd = ldd;
    } else {
      o.c = c + (g / per_product) * stride_c + row_of(g) + j0 * ldc;
    }
    return o;
  }
};

// Tiles [g0, g1) of `t`, in order. Each tile of A (MR rows, all k columns, one page per
// column when lda is large) is copied once into a packed buffer (k x MR, missing rows
// zero), where all panels of op(B) find it in the core's cache: the first tile here, each
// later one during the first panel of the tile before, or for A^T just before it (two
// buffers, `ap` and `ap + k MR`), after the panels of the tile kFetchAhead - 1 before
// that fetched it into L2, a share of its columns each.
template <class T>
TENFOLD_AVX512 void run_tiles(const Tiles<T>& t, index_t g0, index_t g1, T* ap) {
  using L = Lanes<T>;
  constexpr index_t w = L::W, mr = kVectors * w;
  const index_t k = t.k;
  unsigned mask[kVectors];
  tile_masks<T>(t.rows_of(g0), mask);
  const T* a0 = t.a_of(g0);
  copy_tile(a0, k, t.steps, mask, ap);
  // Columns of a later tile fetched per panel.
  const index_t panels = (t.n + kPanel - 1) / kPanel, share = (k + panels - 1) / panels;
  int current = 0;
  for (index_t g = g0; g < g1; ++g) {
    const index_t rows_here = t.rows_of(g);
    const T* packed = ap + current * k * mr;
    NextTiles next;
    if (g + 1 < g1) {
      tile_masks<T>(t.rows_of(g + 1), next.mask);
      T* const to = ap + (1 - current) * k * mr;
      if (t.steps.lane == 1) {
        next.copy_from = t.a_of(g + 1);
        next.copy_to = to;
      } else {
        copy_tile(t.a_of(g + 1), k, t.steps, next.mask, to);
      }
    }
    for (index_t j0 = 0; j0 < t.n; j0 += kPanel) {
      NextTiles along;
      if (j0 == 0) along = next;
      if (g + kFetchAhead < g1) {
        along.fetch = t.a_of(g + kFetchAhead);
        along.fetch_first = j0 / kPanel * share;
        along.fetch_count = k - along.fetch_first < share ? k - along.fetch_first : share;
      }
      const TileOut<T> o = t.out(g, j0);
      if (rows_here > 2 * w) {
        tile<T, 3>(k, packed, t.bp + j0 * k, t.steps, along, o);
      } else if (rows_here > w) {
        tile<T, 2>(k, packed, t.bp + j0 * k, t.steps, along, o);
      } else {
        tile<T, 1>(k, packed, t.bp + j0 * k, t.steps, along, o);
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
  // A tile of op(A) (MR x k, at most 96 KB) and the next one being copied stay in the
  // core's L2 cache while the panels of op(B) pass over the first.
  return avx512 && m >= tile_rows<T>() && n >= 1 && n <= 128 && 5 * padded <= 6 * n && k >= 1 &&
         k * tile_rows<T>() * static_cast<index_t>(sizeof(T)) <= 98304;
}

namespace {

// tall_gemm (w null) or tall_gemm_dots (see Tiles).
template <class T>
void tall_products(index_t m, index_t n, index_t k, T alpha, Op ta, const T* a, index_t lda,
                   index_t stride_a, Op tb, const T* b, index_t ldb, T beta, T* c, index_t ldc,
                   index_t stride_c, const T* w, index_t ldw, T* dots, index_t ldd, index_t batch) {
  // Bp: op(B) in panels of kPanel columns, each k x kPanel row-major, zero-padded.
  const index_t panels = (n + kPanel - 1) / kPanel;
  std::vector<T> bp(static_cast<std::size_t>(panels * k * kPanel), T(0));
  for (index_t j = 0; j < n; ++j) {
    T* dst = bp.data() + (j / kPanel) * k * kPanel + j % kPanel;
    for (index_t p = 0; p < k; ++p)
      dst[p * kPanel] = tb == Op::none ? b[p + j * ldb] : b[j + p * ldb];
  }
  // Tasks: runs of consecutive tiles of the whole batch (a run may span products, so
  // that the copies and fetches run ahead across them), several per thread. The column
  // dots of a product are summed by one task, tile after tile: runs of whole products.
  const index_t per_product = (m + tile_rows<T>() - 1) / tile_rows<T>();
  const index_t total = per_product * batch;
  const auto threads = static_cast<index_t>(pool_threads());
  index_t run = std::clamp<index_t>(total / (8 * threads), kMinTilesPerTask, kMaxTilesPerTask);
  if (w != nullptr) run = (run + per_product - 1) / per_product * per_product;
  const TileSteps steps = ta == Op::none ? TileSteps{1, lda} : TileSteps{lda, 1};
  const Tiles<T> tiles{m, n,   k,        alpha,       beta, a,   stride_a, steps, bp.data(),
                       c, ldc, stride_c, per_product, w,    ldw, dots,     ldd};
  parallel_for((total + run - 1) / run, [&](index_t task) {
    // This task's two packed tiles of A (64-byte aligned for the loads).
    thread_local std::vector<T> ap_buffer;
    const auto ap_size = static_cast<std::size_t>(2 * k * tile_rows<T>()) + 64 / sizeof(T);
    if (ap_buffer.size() < ap_size) ap_buffer.resize(ap_size);
    T* ap = ap_buffer.data();
    ap += (64 - reinterpret_cast<std::uintptr_t>(ap) % 64) % 64 / sizeof(T);
    run_tiles<T>(tiles, task * run, std::min(total, (task + 1) * run), ap);
  });
}

}  // namespace

template <class T>
void tall_gemm(index_t m, index_t n, index_t k, T alpha, Op ta, const T* a, index_t lda,
               index_t stride_a, Op tb, const T* b, index_t ldb, T beta, T* c, index_t ldc,
               index_t stride_c, index_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  tall_products(m, n, k, alpha, ta, a, lda, stride_a, tb, b, ldb, beta, c, ldc, stride_c,
                static_cast<const T*>(nullptr), 0, static_cast<T*>(nullptr), 0, batch);
}

template <class T>
void tall_gemm_dots(index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
                    index_t stride_a, Op tb, const T* b, index_t ldb, const T* w, index_t ldw,
                    T* dots, index_t ldd, index_t batch) {
  if (n == 0 || batch == 0) return;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < batch; ++i) dots[i + j * ldd] = T(0);
  if (m == 0) return;
  tall_products(m, n, k, alpha, Op::none, a, lda, stride_a, tb, b, ldb, T(0),
                static_cast<T*>(nullptr), 0, 0, w, ldw, dots, ldd, batch);
}

template bool tall_gemm_suits<float>(index_t, index_t, index_t);
template bool tall_gemm_suits<double>(index_t, index_t, index_t);
template void tall_gemm<float>(index_t, index_t, index_t, float, Op, const float*, index_t, index_t,
                               Op, const float*, index_t, float, float*, index_t, index_t, index_t);
template void tall_gemm<double>(index_t, index_t, index_t, double, Op, const double*, index_t,
                                index_t, Op, const double*, index_t, double, double*, index_t,
                                index_t, index_t);
template void tall_gemm_dots<float>(index_t, index_t, index_t, float, const float*, index_t,
                                    index_t, Op, const float*, index_t, const float*, index_t,
                                    float*, index_t, index_t);
template void tall_gemm_dots<double>(index_t, index_t, index_t, double, const double*, index_t,
                                     index_t, Op, const double*, index_t, const double*, index_t,
                                     double*, index_t, index_t);

}  // namespace tenfold::detail
