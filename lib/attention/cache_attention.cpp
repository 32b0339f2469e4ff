// Attention of a few queries over a KV cache whose heads groups of query heads share
// (include/tenfold/cache_attention.hpp): each task streams a range of cached tokens once
// for all the rows (heads of a group times queries) that read it, in blocks: the block's
// scores, an online softmax (the running max, the sum of weights and the weighted values,
// rescaled when the max grows), then the ranges of a group merged. A block's scores sum
// along the rows (a vector of rows per key element) or, for a group of few rows, along the
// key width (a vector of key elements per row and token, reduced across lanes). The block
// loops are written once on vectors and register tiles of an instruction set's size (Tiles)
// and compiled per set; the call takes the processor's best. Keys and values stored in
// bfloat16 or float8 are widened to float as they are loaded.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention/cache_attention_with.hpp"
#include "core/exp_nonpositive.hpp"
#include "core/instantiate.hpp"
#include "core/simd.hpp"
#include "core/thread_pool.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

// Cached tokens whose scores a task holds at once (per row): a block's keys and values
// stay in L2 (192 KB at 64 key and 128 value columns in float), and each block starts the
// processor's stream prefetch on keys, then on values, again: with 64 tokens a block, a
// layer's read from memory took 0.99 ms on one thread, with 256 0.79 (in L2: 0.63, 0.58).
constexpr index_t kBlock = 256;
// Cached tokens a task covers at least, where the tokens are split between tasks.
constexpr index_t kMinRange = 1024;

// The sizes of one call, checked.
struct Shape {
  index_t batch, heads, n, tokens, key_width, value_width;
  index_t per_key, per_value;  // query heads per key head, per value head
  index_t per_group;           // query heads that read the same key and value head
  index_t groups() const { return heads / per_group; }
  index_t rows() const { return per_group * n; }  // rows of a group: head j, query i at j n + i
};

// The rows of one (batch, group): each row's query, bias row (or null) and last token seen;
// the keys and values stored as S.
template <class T, class S>
struct Rows {
  std::vector<const T*> query, bias;
  std::vector<index_t> last;
  const S* keys;    // the group's key head: token t at keys + t key_stride
  const S* values;  // its value head
};

// An instruction set's vectors and register tiles: vectors of `Bytes` bytes; the value
// loop keeps ValueRows x ValueVectors vectors of sums in registers beside ValueVectors
// vectors of values and a broadcast weight; the score loop kChains vectors of sums.
template <int Bytes, index_t ValueRows, index_t ValueVectors>
struct Tiles {
  static constexpr int bytes = Bytes;
  static constexpr index_t value_rows = ValueRows, value_vectors = ValueVectors;
  template <class T>
  static constexpr index_t lanes = Bytes / static_cast<index_t>(sizeof(T));
};
using Avx512Tiles = Tiles<64, 6, 4>;    // 32 registers: 24 sums, 4 values, a weight
using Avx2Tiles = Tiles<32, 5, 2>;      // 16 registers: 10 sums, 2 values, a weight
using BaselineTiles = Tiles<16, 4, 2>;  // SSE2's 16 registers, as AVX2's

// The float of each float8 e4m3 code: (-1)^s 2^(e - 7) (1 + m / 8) for an exponent e > 0,
// (-1)^s 2^-6 m / 8 for e = 0, NaN for 0x7f and 0xff.
constexpr std::array<float, 256> kFloat8Values = [] {
  std::array<float, 256> out{};
  for (unsigned code = 0; code < 256; ++code) {
    const unsigned e = (code >> 3) & 15u, m = code & 7u;
    float x = e == 0 ? static_cast<float>(m) / 512 : static_cast<float>(8 + m) / 1024;
    for (unsigned k = 0; k < e; ++k) x *= 2;
    out[code] = (code & 0x7fu) == 0x7fu ? std::numeric_limits<float>::quiet_NaN()
                : (code & 0x80u) != 0   ? -x
                                        : x;
  }
  return out;
}();

// A stored element as T: itself, a bfloat16's bits as the high half of a float's, a float8's
// value from the table (one load from L1).
template <class T, class S>
TENFOLD_INLINE_INTO_CLONE inline T widen(S x) {
  if constexpr (std::is_same_v<S, BFloat16>) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16);
  } else if constexpr (std::is_same_v<S, Float8E4M3>) {
    return kFloat8Values[x.bits];
  } else {
    return x;
  }
}

// A vector of T from stored elements, loaded once (vec_load_once): bfloat16 lanes widened
// to float by a shift into the high half; float8 lanes (t = the code without its sign) by
// moving the exponent and mantissa into a float's fields and adding 120 to the exponent's
// bias, for t < 8 (no exponent: t 2^-9) the float 2^-6 (1 + t / 8) less 2^-6 (no subnormal
// float in the arithmetic), then the sign, NaN where t = 0x7f.
template <class T, int Bytes, class S>
TENFOLD_INLINE_INTO_CLONE inline void load_widened(detail::Vec<T, Bytes>& v, const S* p) {
  using Wide = detail::Vec<std::uint32_t, Bytes>;
  if constexpr (std::is_same_v<S, BFloat16>) {
    static_assert(std::is_same_v<T, float>, "bfloat16 elements are read as float");
    detail::Vec<std::uint16_t, Bytes / 2> h;
    detail::vec_load_once<std::uint16_t, Bytes / 2>(h, reinterpret_cast<const std::uint16_t*>(p));
    const Wide w = __builtin_convertvector(h, Wide) << 16;
    __builtin_memcpy(&v, &w, sizeof(v));
  } else if constexpr (std::is_same_v<S, Float8E4M3>) {
    static_assert(std::is_same_v<T, float>, "float8 elements are read as float");
    detail::Vec<std::uint8_t, Bytes / 4> b;
    detail::vec_load_once<std::uint8_t, Bytes / 4>(b, reinterpret_cast<const std::uint8_t*>(p));
    const Wide w = __builtin_convertvector(b, Wide);
    const Wide t = w & 0x7fu;
    const Wide small = reinterpret_cast<Wide>(t < 8u);
    const Wide bits = (t << 20) + (120u << 23) + (small & (1u << 23));
    const Wide minus = small & std::bit_cast<std::uint32_t>(0x1p-6f);
    v = reinterpret_cast<detail::Vec<T, Bytes>>(bits) -
        reinterpret_cast<detail::Vec<T, Bytes>>(minus);
    const Wide out =
        reinterpret_cast<Wide>(v) | ((w & 0x80u) << 24) | reinterpret_cast<Wide>(t == 0x7fu);
    __builtin_memcpy(&v, &out, sizeof(v));
  } else {
    detail::vec_load_once<T, Bytes>(v, p);
  }
}

// Independent sums of the score loop (the latency of an add over its throughput).
constexpr index_t kChains = 4;

// Whether dots_along_keys widens a group's stored keys once into scratch for all the rows:
// float8's widening (about 14 operations a vector) is dearer than the trip through L1;
// bfloat16's shift is not.
template <class S>
constexpr bool kWidenKeysOnce = std::is_same_v<S, Float8E4M3>;

// Per task: the block's scores (rows x kBlock), then its weights; for scores along the
// rows, the queries transposed (C_k x padded rows, rows contiguous, the padding zero) and
// the block's scores by token (kBlock x padded rows); along the keys, float8 keys widened
// (lanes x C_k).
template <class T>
struct Scratch {
  std::vector<T> scores, queries, by_token, wide_keys;
  index_t padded_rows;
  bool along_keys;  // scores_along_keys: the queries read in place
};

// Whether the block's scores sum each row's products along the key width (a vector of one
// token's key elements per load, `lanes` tokens' sums reduced together: about
// rows (2 C_k / lanes + 3) instructions per token) rather than along the rows (a vector of
// rows per key element, which fills rows / lanes of it: C_k ceil(rows / lanes)), for the
// few rows of a group that reads several key heads' caches (3 query heads per key head:
// 33 against 64 instructions per token at C_k = 64 and 16 lanes).
template <class Tl, class T>
bool scores_along_keys(index_t rows, index_t ck) {
  constexpr index_t lanes = Tl::template lanes<T>;
  return ck % lanes == 0 && rows * (2 * ck / lanes + 3) < ck * ((rows + lanes - 1) / lanes);
}

// The task's scratch; along the rows, its queries transposed, the rows rounded up to whole
// vectors of `lanes`.
template <class Tl, class T, class S>
Scratch<T> make_scratch(const Rows<T, S>& rows_of, index_t rows, index_t ck) {
  constexpr index_t lanes = Tl::template lanes<T>;
  Scratch<T> s{std::vector<T>(static_cast<std::size_t>(rows * kBlock)),
               {},
               {},
               {},
               (rows + lanes - 1) / lanes * lanes,
               scores_along_keys<Tl, T>(rows, ck)};
  if (s.along_keys) {
    if (kWidenKeysOnce<S>) s.wide_keys.resize(static_cast<std::size_t>(lanes * ck));
    return s;
  }
  s.queries.assign(static_cast<std::size_t>(ck * s.padded_rows), T(0));
  s.by_token.resize(static_cast<std::size_t>(kBlock * s.padded_rows));
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < ck; ++c)
      s.queries[static_cast<std::size_t>(c * s.padded_rows + r)] =
          rows_of.query[static_cast<std::size_t>(r)][c];
  return s;
}

// out := the vector whose lanes are the sums of adjacent lane pairs of a, then of b.
template <class V, std::size_t... I>
TENFOLD_INLINE_INTO_CLONE inline void pair_sums(V& out, const V& a, const V& b,
                                                std::index_sequence<I...>) {
  out = __builtin_shufflevector(a, b, (2 * I)...) + __builtin_shufflevector(a, b, (2 * I + 1)...);
}

// a[0] := the vector whose lane j is the sum of a[j]'s lanes, for as many vectors as lanes
// (a power of two): pairs of vectors to pair sums, halving the count at each level (level k
// holds each of 2^k vectors' partial sums in lanes / 2^k adjacent lanes, in order).
template <class T, int Bytes>
TENFOLD_INLINE_INTO_CLONE inline void lane_sums(detail::Vec<T, Bytes>* a) {
  constexpr std::size_t lanes = Bytes / sizeof(T);
  for (std::size_t n = lanes; n > 1; n /= 2)
    for (std::size_t i = 0; i < n / 2; ++i)
      pair_sums(a[i], a[2 * i], a[2 * i + 1], std::make_index_sequence<lanes>{});
}

// s(r, t) = scale <q_r, k_t> along the key width (scores_along_keys): `lanes` tokens at a
// time (their keys stay in L1 for the rows; float8 keys widened once into `wide`, lanes x
// C_k), each row's products with a token summed in one vector, the tokens' vectors then
// reduced together.
template <class Tl, class T, class S>
TENFOLD_INLINE_INTO_CLONE inline void dots_along_keys(const Rows<T, S>& rows_of, index_t rows,
                                                      index_t ck, index_t key_stride, T scale,
                                                      index_t u0, index_t width, T* wide,
                                                      T* scores) {
  constexpr int bytes = Tl::bytes;
  constexpr index_t lanes = Tl::template lanes<T>;
  using Key = std::conditional_t<kWidenKeysOnce<S>, T, S>;
  for (index_t t0 = 0; t0 < width; t0 += lanes) {
    const Key* key[lanes];
    for (index_t j = 0; j < lanes; ++j) {  // past the block's end: its last token again
      const S* k = rows_of.keys + (u0 + std::min(t0 + j, width - 1)) * key_stride;
      if constexpr (kWidenKeysOnce<S>) {
        T* w = wide + j * ck;
        for (index_t c = 0; c < ck; c += lanes) {
          detail::Vec<T, bytes> x;
          load_widened<T, bytes>(x, k + c);
          detail::vec_store<T, bytes>(w + c, x);
        }
        key[j] = w;
      } else {
        key[j] = k;
      }
    }
    for (index_t r = 0; r < rows; ++r) {
      const T* q = rows_of.query[static_cast<std::size_t>(r)];
      detail::Vec<T, bytes> a[lanes];
      for (index_t j = 0; j < lanes; ++j) {
        detail::Vec<T, bytes> sum = {};
        for (index_t c = 0; c < ck; c += lanes) {
          detail::Vec<T, bytes> x, y;
          load_widened<T, bytes>(x, key[j] + c);
          detail::vec_load<T, bytes>(y, q + c);
          sum += x * y;
        }
        a[j] = sum;
      }
      lane_sums<T, bytes>(a);
      a[0] *= scale;
      T* s = scores + r * kBlock + t0;
      if (t0 + lanes <= width) {
        detail::vec_store<T, bytes>(s, a[0]);
      } else {
        for (index_t j = 0; t0 + j < width; ++j) s[j] = a[0][j];
      }
    }
  }
}

// s(r, t) = scale <q_r, k_t> along the rows: each token's scores for a vector of rows sum
// in registers over the key width (kChains tokens at once: independent sums), no
// horizontal sums; then from token-major to row-major.
template <class Tl, class T, class S>
TENFOLD_INLINE_INTO_CLONE inline void dots_along_rows(const Rows<T, S>& rows_of, index_t rows,
                                                      index_t ck, index_t key_stride, T scale,
                                                      index_t u0, index_t width,
                                                      Scratch<T>& scratch) {
  constexpr int bytes = Tl::bytes;
  constexpr index_t lanes = Tl::template lanes<T>;
  const index_t padded = scratch.padded_rows;
  const T* qt = scratch.queries.data();
  T* by_token = scratch.by_token.data();
  for (index_t t0 = 0; t0 < width; t0 += kChains) {
    const S* key[kChains];
    for (index_t j = 0; j < kChains; ++j)
      key[j] = rows_of.keys + (u0 + std::min(t0 + j, width - 1)) * key_stride;
    for (index_t r0 = 0; r0 < padded; r0 += lanes) {
      detail::Vec<T, bytes> a[kChains] = {};
      for (index_t c = 0; c < ck; ++c) {
        detail::Vec<T, bytes> q;
        detail::vec_load<T, bytes>(q, qt + c * padded + r0);
        for (index_t j = 0; j < kChains; ++j) a[j] += widen<T>(key[j][c]) * q;
      }
      for (index_t j = 0; j < kChains; ++j)
        if (t0 + j < width) detail::vec_store<T, bytes>(by_token + (t0 + j) * padded + r0, a[j]);
    }
  }
  for (index_t r = 0; r < rows; ++r) {
    T* s = scratch.scores.data() + r * kBlock;
    for (index_t t = 0; t < width; ++t) s[t] = scale * by_token[t * padded + r];
  }
}

// s(r, t) for the block's tokens [u0, u0 + width): scale <q_r, k_t> + bias(i, t), -inf
// past row i's last token.
template <class Tl, class T, class S>
TENFOLD_INLINE_INTO_CLONE inline void block_scores(const Rows<T, S>& rows_of, index_t rows,
                                                   index_t ck, index_t key_stride, T scale,
                                                   index_t u0, index_t width, Scratch<T>& scratch) {
  T* scores = scratch.scores.data();
  if (scratch.along_keys) {
    dots_along_keys<Tl>(rows_of, rows, ck, key_stride, scale, u0, width, scratch.wide_keys.data(),
                        scores);
  } else {
    dots_along_rows<Tl>(rows_of, rows, ck, key_stride, scale, u0, width, scratch);
  }
  for (index_t r = 0; r < rows; ++r) {
    const auto rs = static_cast<std::size_t>(r);
    T* s = scores + r * kBlock;
    if (const T* bias = rows_of.bias[rs]; bias != nullptr)
      for (index_t t = 0; t < width; ++t) s[t] += bias[u0 + t];
    for (index_t t = std::max<index_t>(0, rows_of.last[rs] + 1 - u0); t < width; ++t)
      s[t] = -std::numeric_limits<T>::infinity();
  }
}

// acc(r) += w(r, t) v_t for `Rs` rows from r0 and `Cs` vectors of columns from c0, over
// the block's tokens: Rs Cs sums held in registers, each value vector loaded once for the
// rows.
template <class Tl, index_t Rs, index_t Cs, class T, class S>
TENFOLD_INLINE_INTO_CLONE inline void add_values(const S* values, index_t value_stride,
                                                 index_t width, const T* weights, index_t r0,
                                                 index_t c0, index_t cv, T* acc) {
  constexpr int bytes = Tl::bytes;
  constexpr index_t lanes = Tl::template lanes<T>;
  detail::Vec<T, bytes> a[Rs][Cs];
  for (index_t i = 0; i < Rs; ++i)
    for (index_t v = 0; v < Cs; ++v)
      detail::vec_load<T, bytes>(a[i][v], acc + (r0 + i) * cv + c0 + v * lanes);
  for (index_t t = 0; t < width; ++t) {
    const S* from = values + t * value_stride + c0;
    detail::Vec<T, bytes> x[Cs];
    for (index_t v = 0; v < Cs; ++v) load_widened<T, bytes>(x[v], from + v * lanes);
    for (index_t i = 0; i < Rs; ++i) {
      const T w = weights[(r0 + i) * kBlock + t];
      for (index_t v = 0; v < Cs; ++v) a[i][v] += w * x[v];
    }
  }
  for (index_t i = 0; i < Rs; ++i)
    for (index_t v = 0; v < Cs; ++v)
      detail::vec_store<T, bytes>(acc + (r0 + i) * cv + c0 + v * lanes, a[i][v]);
}

// add_values for the last `left` rows from r0 (fewer than a tile's), as one tile of that
// many rows (Rs, Rs - 1, ... tried in turn).
template <class Tl, index_t Rs, index_t Cs, class T, class S>
TENFOLD_INLINE_INTO_CLONE inline void add_last_values(index_t left, const S* values,
                                                      index_t value_stride, index_t width,
                                                      const T* weights, index_t r0, index_t c0,
                                                      index_t cv, T* acc) {
  if constexpr (Rs > 0) {
    if (left == Rs) {
      add_values<Tl, Rs, Cs>(values, value_stride, width, weights, r0, c0, cv, acc);
    } else {
      add_last_values<Tl, Rs - 1, Cs>(left, values, value_stride, width, weights, r0, c0, cv, acc);
    }
  }
}

// acc(r) += w(r, t) v_t over the block's tokens: tiles of the set's value rows and vectors
// (each value vector loaded once for the rows), then what is left of the rows as one tile,
// then the whole vectors left, then the last columns one at a time.
template <class Tl, class T, class S>
TENFOLD_INLINE_INTO_CLONE inline void block_values(const Rows<T, S>& rows_of, index_t rows,
                                                   index_t cv, index_t value_stride, index_t u0,
                                                   index_t width, const T* weights, T* acc) {
  constexpr index_t lanes = Tl::template lanes<T>;
  constexpr index_t tile_rows = Tl::value_rows, tile_vectors = Tl::value_vectors;
  const S* values = rows_of.values + u0 * value_stride;
  index_t c0 = 0;
  for (; c0 + tile_vectors * lanes <= cv; c0 += tile_vectors * lanes) {
    index_t r = 0;
    for (; r + tile_rows <= rows; r += tile_rows)
      add_values<Tl, tile_rows, tile_vectors>(values, value_stride, width, weights, r, c0, cv, acc);
    add_last_values<Tl, tile_rows - 1, tile_vectors>(rows - r, values, value_stride, width, weights,
                                                     r, c0, cv, acc);
  }
  for (; c0 + lanes <= cv; c0 += lanes)
    for (index_t r = 0; r < rows; ++r)
      add_values<Tl, 1, 1>(values, value_stride, width, weights, r, c0, cv, acc);
  for (index_t r = 0; r < rows && c0 < cv; ++r) {
    const T* w = weights + r * kBlock;
    T* a = acc + r * cv;
    for (index_t t = 0; t < width; ++t) {
      const S* v = values + t * value_stride;
      for (index_t c = c0; c < cv; ++c) a[c] += w[t] * widen<T>(v[c]);
    }
  }
}

// The largest of s[0, width) (-inf for none), a vector of tokens at a time.
template <class Tl, class T>
TENFOLD_INLINE_INTO_CLONE inline T row_max(const T* s, index_t width) {
  constexpr int bytes = Tl::bytes;
  constexpr index_t lanes = Tl::template lanes<T>;
  T most = -std::numeric_limits<T>::infinity();
  index_t t = 0;
  if (width >= lanes) {
    detail::Vec<T, bytes> a;
    detail::vec_load<T, bytes>(a, s);
    for (t = lanes; t + lanes <= width; t += lanes) {
      detail::Vec<T, bytes> x;
      detail::vec_load<T, bytes>(x, s + t);
      a = a > x ? a : x;
    }
    for (index_t l = 0; l < lanes; ++l) most = std::max(most, a[l]);
  }
  for (; t < width; ++t) most = std::max(most, s[t]);
  return most;
}

// The sum of s[0, width), a vector of tokens at a time.
template <class Tl, class T>
TENFOLD_INLINE_INTO_CLONE inline T row_sum(const T* s, index_t width) {
  constexpr int bytes = Tl::bytes;
  constexpr index_t lanes = Tl::template lanes<T>;
  detail::Vec<T, bytes> a = {};
  index_t t = 0;
  for (; t + lanes <= width; t += lanes) {
    detail::Vec<T, bytes> x;
    detail::vec_load<T, bytes>(x, s + t);
    a += x;
  }
  T total = 0;
  for (index_t l = 0; l < lanes; ++l) total += a[l];
  for (; t < width; ++t) total += s[t];
  return total;
}

// One task: the rows of one (batch, group) over its cached tokens [t0, t1).
template <class T, class S>
struct Range {
  const Shape* shape;
  const Rows<T, S>* rows_of;
  index_t key_stride, value_stride;
  T scale;
  index_t t0, t1;
  T* state;  // top and sum per row, then rows x C_v weighted values
};

// The online softmax of a range: per row r, top[r] = the largest score, sum[r] = sum of
// exp(s - top), acc (rows x C_v) = sum of exp(s - top) v.
template <class Tl, class T, class S>
TENFOLD_INLINE_INTO_CLONE inline void attend_range(const Range<T, S>& g) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const Shape& p = *g.shape;
  const Rows<T, S>& rows_of = *g.rows_of;
  const index_t rows = p.rows(), cv = p.value_width;
  T *top = g.state, *sum = g.state + rows, *acc = g.state + 2 * rows;
  Scratch<T> scratch = make_scratch<Tl>(rows_of, rows, p.key_width);
  T* scores = scratch.scores.data();
  std::fill(top, top + rows, minus_inf);
  std::fill(sum, sum + rows, T(0));
  std::fill(acc, acc + rows * cv, T(0));
  for (index_t u0 = g.t0; u0 < g.t1; u0 += kBlock) {
    const index_t width = std::min(g.t1, u0 + kBlock) - u0;
    block_scores<Tl>(rows_of, rows, p.key_width, g.key_stride, g.scale, u0, width, scratch);
    // weights w = exp(s - top) with top raised to the block's largest; the sums so far
    // rescaled by exp(old top - new top)
    for (index_t r = 0; r < rows; ++r) {
      T* s = scores + r * kBlock;
      const T most = std::max(top[r], row_max<Tl>(s, width));
      if (most == minus_inf) {  // nothing seen yet: no weight
        std::fill(s, s + width, T(0));
        continue;
      }
      const T shrink = detail::exp_nonpositive(top[r] - most);
      top[r] = most;
      if (shrink != T(1)) {
        sum[r] *= shrink;
        T* a = acc + r * cv;
        for (index_t c = 0; c < cv; ++c) a[c] *= shrink;
      }
      for (index_t t = 0; t < width; ++t) s[t] = detail::exp_nonpositive(s[t] - most);
      sum[r] += row_sum<Tl>(s, width);
    }
    block_values<Tl>(rows_of, rows, cv, g.value_stride, u0, width, scores, acc);
  }
}

template <class T, class S>
TENFOLD_TARGET_AVX512 void attend_range_avx512(const Range<T, S>& g) {
  attend_range<Avx512Tiles>(g);
}

template <class T, class S>
TENFOLD_TARGET_AVX2 void attend_range_avx2(const Range<T, S>& g) {
  attend_range<Avx2Tiles>(g);
}

template <class T, class S>
void attend_range_baseline(const Range<T, S>& g) {
  attend_range<BaselineTiles>(g);
}

template <class T>
void check_view(const HeadsView<const T>& a, const char* name) {
  if (a.batch < 0 || a.heads < 0 || a.rows < 0 || a.width < 0) {
    throw InvalidArgument(std::string("cache_attention: ") + name + " has a negative size");
  }
  if (a.data == nullptr && a.batch * a.heads * a.rows * a.width > 0) {
    throw InvalidArgument(std::string("cache_attention: ") + name + " has no data");
  }
}

template <class T, class S>
Shape checked_shape(const HeadsView<const T>& q, const HeadsView<const S>& k,
                    const HeadsView<const S>& v, const HeadsView<const T>& bias, bool causal,
                    const HeadsView<T>& out) {
  const HeadsView<const T> o{out.data,  out.batch,        out.heads,       out.rows,
                             out.width, out.batch_stride, out.head_stride, out.row_stride};
  check_view(q, "queries");
  check_view(k, "keys");
  check_view(v, "values");
  check_view(o, "out");
  const auto shape = [](const auto& a) {
    return "(" + std::to_string(a.batch) + ", " + std::to_string(a.heads) + ", " +
           std::to_string(a.rows) + ", " + std::to_string(a.width) + ")";
  };
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument("cache_attention: queries " + shape(q) + ", keys " + shape(k) +
                          ", values " + shape(v) + ", out " + shape(o) + ": " + why);
  };
  if (k.batch != q.batch || v.batch != q.batch || o.batch != q.batch)
    fail("the batch sizes differ");
  if (k.heads < 1 || v.heads < 1 || q.heads % k.heads != 0 || q.heads % v.heads != 0)
    fail("the key and value heads must divide the query heads");
  if (k.width != q.width) fail("the keys' width differs from the queries'");
  if (v.rows != k.rows) fail("the cached tokens of keys and values differ");
  if (o.heads != q.heads || o.rows != q.rows || o.width != v.width)
    fail("out must be (batch, query heads, queries, value width)");
  if (causal && q.rows > k.rows) fail("causal queries must be among the cached tokens");
  if (bias.data != nullptr) {
    check_view(bias, "bias");
    if (bias.batch != q.batch || bias.heads != 1 || bias.rows != q.rows || bias.width != k.rows) {
      fail("the bias " + shape(bias) + " must be (batch, 1, queries, cached tokens)");
    }
  }
  Shape p{q.batch,           q.heads,           q.rows, k.rows, q.width, v.width,
          q.heads / k.heads, q.heads / v.heads, 0};
  p.per_group = std::gcd(p.per_key, p.per_value);
  return p;
}

}  // namespace

template <class T, class S>
void cache_attention_with(detail::Isa isa, const HeadsView<const T>& queries,
                          const HeadsView<const S>& keys, const HeadsView<const S>& values,
                          const HeadsView<const T>& bias, bool causal, T scale,
                          const HeadsView<T>& out) {
  using detail::Isa;
  if (isa > detail::processor_isa()) {
    throw InvalidArgument("cache_attention: this processor does not run the kernel asked for");
  }
  const auto attend_range = isa == Isa::avx512 ? &attend_range_avx512<T, S>
                            : isa == Isa::avx2 ? &attend_range_avx2<T, S>
                                               : &attend_range_baseline<T, S>;
  const Shape p = checked_shape(queries, keys, values, bias, causal, out);
  const index_t units = p.batch * p.groups(), rows = p.rows(), cv = p.value_width;
  if (units * rows == 0) return;
  // Each (batch, group) unit's tokens in `ranges` contiguous ranges, enough tasks for two
  // per thread, each range at least kMinRange tokens.
  const index_t wanted = (2 * detail::pool_threads() + units - 1) / units;
  const index_t ranges =
      std::max<index_t>(1, std::min(wanted, (p.tokens + kMinRange - 1) / kMinRange));
  // state of task (unit, range): top and sum per row, then rows x C_v weighted values
  const index_t state = rows * (cv + 2);
  std::vector<T> states(static_cast<std::size_t>(units * ranges * state));
  detail::parallel_for(units * ranges, [&](index_t task) {
    const index_t unit = task / ranges, range = task % ranges;
    const index_t t0 = range * p.tokens / ranges, t1 = (range + 1) * p.tokens / ranges;
    const index_t b = unit / p.groups(), first_head = (unit % p.groups()) * p.per_group;
    Rows<T, S> of{
        {},
        {},
        {},
        keys.data + b * keys.batch_stride + first_head / p.per_key * keys.head_stride,
        values.data + b * values.batch_stride + first_head / p.per_value * values.head_stride};
    for (index_t r = 0; r < rows; ++r) {
      const index_t j = r / p.n, i = r % p.n;
      of.query.push_back(queries.data + b * queries.batch_stride +
                         (first_head + j) * queries.head_stride + i * queries.row_stride);
      of.bias.push_back(
          bias.data == nullptr ? nullptr : bias.data + b * bias.batch_stride + i * bias.row_stride);
      of.last.push_back(causal ? p.tokens - p.n + i : p.tokens);
    }
    attend_range(
        {&p, &of, keys.row_stride, values.row_stride, scale, t0, t1, states.data() + task * state});
  });
  // out(row) = sum over ranges of e^(top - most) acc / sum over ranges of e^(top - most) sum
  detail::parallel_for(units, [&](index_t unit) {
    const index_t b = unit / p.groups(), g = unit % p.groups();
    const T* first = states.data() + unit * ranges * state;
    std::vector<T> row(static_cast<std::size_t>(cv));
    for (index_t r = 0; r < rows; ++r) {
      T most = -std::numeric_limits<T>::infinity();
      for (index_t range = 0; range < ranges; ++range)
        most = std::max(most, first[range * state + r]);
      std::fill(row.begin(), row.end(), T(0));
      T total = 0;
      for (index_t range = 0; range < ranges; ++range) {
        const T* s = first + range * state;
        // a range without weight (every score -inf) adds nothing
        if (s[r] == -std::numeric_limits<T>::infinity()) continue;
        const T w = detail::exp_nonpositive(s[r] - most);
        total += w * s[rows + r];
        const T* a = s + 2 * rows + r * cv;
        for (index_t c = 0; c < cv; ++c) row[static_cast<std::size_t>(c)] += w * a[c];
      }
      // no weight at all: NaN, as softmax of -inf scores
      const T inverse = total > T(0) ? T(1) / total : std::numeric_limits<T>::quiet_NaN();
      const index_t j = r / p.n, i = r % p.n;
      T* to = out.data + b * out.batch_stride + (g * p.per_group + j) * out.head_stride +
              i * out.row_stride;
      for (index_t c = 0; c < cv; ++c) to[c] = row[static_cast<std::size_t>(c)] * inverse;
    }
  });
}

template <class T, class S>
void cache_attention(const HeadsView<const T>& queries, const HeadsView<const S>& keys,
                     const HeadsView<const S>& values, const HeadsView<const T>& bias, bool causal,
                     T scale, const HeadsView<T>& out) {
  cache_attention_with(detail::processor_isa(), queries, keys, values, bias, causal, scale, out);
}

#define TENFOLD_INSTANTIATE_CACHE_ATTENTION_STORED(T, S)                                          \
  template void cache_attention<T, S>(const HeadsView<const T>&, const HeadsView<const S>&,       \
                                      const HeadsView<const S>&, const HeadsView<const T>&, bool, \
                                      T, const HeadsView<T>&);                                    \
  template void cache_attention_with<T, S>(                                                       \
      detail::Isa, const HeadsView<const T>&, const HeadsView<const S>&,                          \
      const HeadsView<const S>&, const HeadsView<const T>&, bool, T, const HeadsView<T>&);
#define TENFOLD_INSTANTIATE_CACHE_ATTENTION(T) TENFOLD_INSTANTIATE_CACHE_ATTENTION_STORED(T, T)
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CACHE_ATTENTION)
TENFOLD_INSTANTIATE_CACHE_ATTENTION_STORED(float, BFloat16)
TENFOLD_INSTANTIATE_CACHE_ATTENTION_STORED(float, Float8E4M3)

}  // namespace tenfold::attention
