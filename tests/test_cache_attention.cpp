// cache_attention (include/tenfold/cache_attention.hpp) against softmax attention computed
// directly in long double on random data: grouped and multi-query heads, one and several
// queries, causal rows, a padding bias with -inf and large negative entries, caches inside
// larger buffers (strides), token counts across blocks and ranges, scores summed along the
// rows and along the key width (few rows), float and double, with
// the kernel of every instruction set the processor runs, keys and values also stored in
// bfloat16 or float8 for float queries, every float8 code read exactly; the exponential it
// uses against std::exp; the refusals.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "attention/cache_attention_with.hpp"
#include "core/exp_nonpositive.hpp"
#include "expect_throw.hpp"
#include "tenfold/cache_attention.hpp"
#include "tenfold/error.hpp"
#include "tenfold/threads.hpp"

namespace {

using namespace tenfold;
using namespace tenfold::attention;

// A (batch, heads, rows, width) array inside a buffer with `pad` unused values after each
// row and `spare` unused rows after each head (a cache with room to grow).
template <class T>
struct Array {
  index_t batch, heads, rows, width, pad, spare;
  std::vector<T> data;
  Array(index_t b, index_t h, index_t r, index_t w, index_t pad_ = 0, index_t spare_ = 0)
      : batch(b),
        heads(h),
        rows(r),
        width(w),
        pad(pad_),
        spare(spare_),
        data(static_cast<std::size_t>(b * h * (r + spare_) * (w + pad_)),
             std::numeric_limits<T>::quiet_NaN()) {}
  index_t row_stride() const { return width + pad; }
  index_t head_stride() const { return (rows + spare) * row_stride(); }
  T& at(index_t b, index_t h, index_t i, index_t c) {
    return data[static_cast<std::size_t>((b * heads + h) * head_stride() + i * row_stride() + c)];
  }
  HeadsView<const T> view() const {
    return {data.data(),           batch,         heads,       rows, width,
            heads * head_stride(), head_stride(), row_stride()};
  }
  HeadsView<T> out() {
    return {data.data(),           batch,         heads,       rows, width,
            heads * head_stride(), head_stride(), row_stride()};
  }
  void fill(std::mt19937_64& rng) {
    std::normal_distribution<double> g;
    for (index_t b = 0; b < batch; ++b)
      for (index_t h = 0; h < heads; ++h)
        for (index_t i = 0; i < rows; ++i)
          for (index_t c = 0; c < width; ++c) at(b, h, i, c) = static_cast<T>(g(rng));
  }
};

// x rounded to the nearest bfloat16 (ties to even).
BFloat16 to_bfloat16(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  return {static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16)};
}

// The value of a float8 e4m3 code, decoded on its own: NaN for 0x7f and 0xff,
// (-1)^s m 2^-9 without exponent, (-1)^s (8 + m) 2^(e - 10) otherwise.
double float8_value(unsigned code) {
  const unsigned e = (code >> 3) & 15u, m = code & 7u;
  if ((code & 0x7fu) == 0x7fu) return std::numeric_limits<double>::quiet_NaN();
  const double x = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, static_cast<int>(e) - 10);
  return (code & 0x80u) != 0 ? -x : x;
}

// x (|x| <= 448) rounded to the nearest float8 e4m3 (ties to the even code), by search.
Float8E4M3 to_float8(float x) {
  unsigned best = 0;
  for (unsigned code = 1; code < 0x7f; ++code) {
    const double d = std::abs(float8_value(code) - std::abs(x)),
                 b = std::abs(float8_value(best) - std::abs(x));
    if (d < b || (d == b && code % 2 == 0)) best = code;
  }
  return {static_cast<std::uint8_t>(best | (std::signbit(x) ? 0x80u : 0u))};
}

// a's elements rounded to S (BFloat16 or Float8E4M3), in place, and the array of S of the
// same layout.
template <class S>
Array<S> stored_as(Array<float>& a) {
  Array<S> out(a.batch, a.heads, a.rows, a.width, a.pad, a.spare);
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    if constexpr (std::is_same_v<S, BFloat16>) {
      out.data[i] = to_bfloat16(a.data[i]);
      a.data[i] = std::bit_cast<float>(static_cast<std::uint32_t>(out.data[i].bits) << 16);
    } else {
      // (NaN, the padding, stays NaN: code 0x7f)
      out.data[i] = std::isnan(a.data[i]) ? Float8E4M3{0x7f} : to_float8(a.data[i]);
      a.data[i] = static_cast<float>(float8_value(out.data[i].bits));
    }
  }
  return out;
}

struct Case {
  index_t batch, heads, key_heads, value_heads, n, tokens, key_width, value_width;
  bool causal, bias;
};

// The instruction sets whose kernels this processor runs.
std::vector<detail::Isa> processor_isas() {
  std::vector<detail::Isa> out;
  for (detail::Isa isa : {detail::Isa::baseline, detail::Isa::avx2, detail::Isa::avx512})
    if (isa <= detail::processor_isa()) out.push_back(isa);
  return out;
}

// S: how the keys and values are stored (T, or BFloat16 or Float8E4M3 for float: the
// reference then reads the same rounded numbers).
template <class T, class S = T>
void expect_matches_reference(const Case& c, std::uint64_t seed, detail::Isa isa) {
  SCOPED_TRACE(std::string(std::is_same_v<S, BFloat16>     ? "bfloat16 cache, "
                           : std::is_same_v<S, Float8E4M3> ? "float8 cache, "
                                                           : "") +
               "kernel " + std::to_string(static_cast<int>(isa)) + ", " + "batch " +
               std::to_string(c.batch) + ", heads " + std::to_string(c.heads) + "/" +
               std::to_string(c.key_heads) + "/" + std::to_string(c.value_heads) + ", n " +
               std::to_string(c.n) + ", tokens " + std::to_string(c.tokens) + ", widths " +
               std::to_string(c.key_width) + "/" + std::to_string(c.value_width) +
               (c.causal ? ", causal" : "") + (c.bias ? ", bias" : ""));
  std::mt19937_64 rng(seed);
  Array<T> q(c.batch, c.heads, c.n, c.key_width, 3);
  Array<T> k(c.batch, c.key_heads, c.tokens, c.key_width, 0, 5);
  Array<T> v(c.batch, c.value_heads, c.tokens, c.value_width, 2, 7);
  Array<T> bias(c.batch, 1, c.n, c.tokens, 1);
  Array<T> out(c.batch, c.heads, c.n, c.value_width, 4);
  q.fill(rng);
  k.fill(rng);
  v.fill(rng);
  // a padding mask: the first tokens of batch row b hidden (-inf for one row, the lowest
  // finite number for the others), mild values elsewhere
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (index_t b = 0; b < c.batch; ++b)
    for (index_t i = 0; i < c.n; ++i)
      for (index_t t = 0; t < c.tokens; ++t)
        bias.at(b, 0, i, t) = t < b * c.tokens / 4 ? (b == 1 ? -std::numeric_limits<T>::infinity()
                                                             : std::numeric_limits<T>::lowest())
                                                   : static_cast<T>(u(rng));
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(c.key_width)));
  const HeadsView<const T> b_view = c.bias ? bias.view() : HeadsView<const T>{};
  if constexpr (!std::is_same_v<S, T>) {
    const Array<S> ks = stored_as<S>(k), vs = stored_as<S>(v);
    cache_attention_with<T, S>(isa, q.view(), ks.view(), vs.view(), b_view, c.causal, scale,
                               out.out());
  } else {
    cache_attention_with<T>(isa, q.view(), k.view(), v.view(), b_view, c.causal, scale, out.out());
  }
  // tolerance: the scores' rounding (about the key width times the unit round-off) moves
  // the weights by as much, relative; the outputs are weighted means of N(0, 1) values
  const double eps = std::numeric_limits<T>::epsilon();
  const double tol = 20.0 * eps * (1.0 + static_cast<double>(c.key_width));
  for (index_t b = 0; b < c.batch; ++b) {
    for (index_t h = 0; h < c.heads; ++h) {
      const index_t kh = h / (c.heads / c.key_heads), vh = h / (c.heads / c.value_heads);
      for (index_t i = 0; i < c.n; ++i) {
        std::vector<long double> s(static_cast<std::size_t>(c.tokens));
        long double most = -std::numeric_limits<long double>::infinity();
        for (index_t t = 0; t < c.tokens; ++t) {
          long double d = 0;
          for (index_t x = 0; x < c.key_width; ++x)
            d += static_cast<long double>(q.at(b, h, i, x)) * k.at(b, kh, t, x);
          d *= scale;
          if (c.bias) d += bias.at(b, 0, i, t);
          if (c.causal && t > c.tokens - c.n + i) d = -std::numeric_limits<long double>::infinity();
          s[static_cast<std::size_t>(t)] = d;
          most = std::max(most, d);
        }
        long double total = 0;
        for (long double& w : s) total += (w = std::exp(w - most));
        for (index_t x = 0; x < c.value_width; ++x) {
          long double want = 0;
          for (index_t t = 0; t < c.tokens; ++t)
            want += s[static_cast<std::size_t>(t)] * v.at(b, vh, t, x);
          want /= total;
          ASSERT_NEAR(out.at(b, h, i, x), static_cast<double>(want), tol)
              << "b " << b << " h " << h << " i " << i << " column " << x;
        }
      }
    }
  }
  // the padding of out untouched
  for (index_t b = 0; b < c.batch; ++b)
    for (index_t h = 0; h < c.heads; ++h)
      for (index_t i = 0; i < c.n; ++i) ASSERT_TRUE(std::isnan(out.at(b, h, i, c.value_width)));
}

const std::vector<Case> kCases = {
    // the latent cache of SmolLM2-135M's layers at half the cache: one key and one value
    // head for 9 query heads, one query, a cache over several blocks and ranges
    {1, 9, 1, 1, 1, 3000, 64, 128, false, false},
    // keys shared, values per group (keys-only shared rotary keys)
    {2, 6, 1, 3, 1, 300, 40, 16, false, true},
    // grouped keys and values, several queries, causal, odd widths
    {3, 6, 2, 2, 3, 130, 7, 5, true, false},
    {3, 6, 3, 1, 4, 257, 33, 9, true, true},
    {2, 4, 4, 4, 2, 2, 16, 64, true, true},
    // 11 rows (a whole register tile and a smaller one of every set), a value width that
    // ends in a part of a vector
    {1, 11, 1, 1, 1, 700, 20, 72, false, true},
    {1, 1, 1, 1, 1, 1, 1, 1, false, false},
    // few rows, the scores summed along the key width (scores_along_keys): the original's
    // 3 key and value heads (3 rows each), 2 causal rows, 4 rows, one row of 8
    {1, 9, 3, 3, 1, 600, 64, 64, false, false},
    {2, 4, 4, 4, 2, 700, 32, 16, true, true},
    {1, 8, 2, 2, 1, 1000, 48, 8, false, true},
    {1, 2, 2, 2, 1, 37, 8, 3, false, false},
};

TEST(CacheAttention, MatchesSoftmaxAttentionInFloatAndDouble) {
  std::uint64_t seed = 1;
  for (detail::Isa isa : processor_isas()) {
    for (const Case& c : kCases) {
      expect_matches_reference<float>(c, seed++, isa);
      expect_matches_reference<double>(c, seed++, isa);
    }
  }
}

TEST(CacheAttention, KeysAndValuesStoredInBfloat16) {
  std::uint64_t seed = 100;
  for (detail::Isa isa : processor_isas())
    for (const Case& c : kCases) expect_matches_reference<float, BFloat16>(c, seed++, isa);
}

TEST(CacheAttention, KeysAndValuesStoredInFloat8) {
  std::uint64_t seed = 200;
  for (detail::Isa isa : processor_isas())
    for (const Case& c : kCases) expect_matches_reference<float, Float8E4M3>(c, seed++, isa);
}

// One cached token (weight 1): out is the token's values, each of the 256 float8 codes (a
// width past whole vectors) widened exactly, NaN for the two NaN codes, on every kernel.
TEST(CacheAttention, EveryFloat8CodeReadExactly) {
  const index_t width = 259;
  Array<float> q(1, 3, 1, 4), out(1, 3, 1, width);
  Array<Float8E4M3> k(1, 1, 1, 4), v(1, 1, 1, width);
  for (index_t c = 0; c < 4; ++c) {
    q.at(0, 0, 0, c) = q.at(0, 1, 0, c) = q.at(0, 2, 0, c) = 1.0f;
    k.at(0, 0, 0, c) = {0x38};  // 1
  }
  for (index_t c = 0; c < width; ++c) v.at(0, 0, 0, c) = {static_cast<std::uint8_t>(c % 256)};
  for (detail::Isa isa : processor_isas()) {
    cache_attention_with<float, Float8E4M3>(isa, q.view(), k.view(), v.view(), {}, false, 0.5f,
                                            out.out());
    for (index_t h = 0; h < 3; ++h) {
      for (index_t c = 0; c < width; ++c) {
        const double want = float8_value(static_cast<unsigned>(c % 256));
        const float got = out.at(0, h, 0, c);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << "kernel " << static_cast<int>(isa) << " code " << c;
        } else {
          EXPECT_EQ(static_cast<double>(got), want)
              << "kernel " << static_cast<int>(isa) << " code " << c % 256;
        }
      }
    }
  }
}

TEST(CacheAttention, AnyThreadCount) {
  const int before = num_threads();
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    expect_matches_reference<double>({2, 9, 1, 1, 1, 5000, 64, 32, false, true}, 7,
                                     detail::processor_isa());
  }
  set_num_threads(before);
}

TEST(CacheAttention, EveryTokenMaskedGivesNan) {
  Array<float> q(1, 2, 1, 4), k(1, 1, 3, 4), v(1, 1, 3, 2), bias(1, 1, 1, 3), out(1, 2, 1, 2);
  for (auto* a : {&q, &k, &v}) std::fill(a->data.begin(), a->data.end(), 1.0f);
  std::fill(bias.data.begin(), bias.data.end(), -std::numeric_limits<float>::infinity());
  for (detail::Isa isa : processor_isas()) {
    std::fill(out.data.begin(), out.data.end(), 0.0f);
    cache_attention_with<float>(isa, q.view(), k.view(), v.view(), bias.view(), false, 1.0f,
                                out.out());
    for (float x : out.data) EXPECT_TRUE(std::isnan(x));
  }
}

TEST(CacheAttention, RefusesSizesThatDoNotFit) {
  Array<float> q(1, 4, 1, 8), k(1, 2, 10, 8), v(1, 2, 10, 6), out(1, 4, 1, 6);
  const auto call = [&](const HeadsView<const float>& qv, const HeadsView<const float>& kv,
                        const HeadsView<const float>& vv, const HeadsView<const float>& bv,
                        bool causal, const HeadsView<float>& ov) {
    cache_attention<float>(qv, kv, vv, bv, causal, 1.0f, ov);
  };
  Array<float> k3(1, 3, 10, 8), k_wide(1, 2, 10, 9), v_short(1, 2, 9, 6), out_bad(1, 4, 1, 5);
  Array<float> bias_bad(1, 1, 1, 9), q_many(1, 4, 11, 8);
  using tenfold::test::expect_throw_with;
  expect_throw_with<InvalidArgument>(
      [&] { call(q.view(), k3.view(), v.view(), {}, false, out.out()); },
      "must divide the query heads");
  expect_throw_with<InvalidArgument>(
      [&] { call(q.view(), k_wide.view(), v.view(), {}, false, out.out()); }, "keys' width");
  expect_throw_with<InvalidArgument>(
      [&] { call(q.view(), k.view(), v_short.view(), {}, false, out.out()); }, "cached tokens");
  expect_throw_with<InvalidArgument>(
      [&] { call(q.view(), k.view(), v.view(), {}, false, out_bad.out()); }, "out must be");
  expect_throw_with<InvalidArgument>(
      [&] { call(q.view(), k.view(), v.view(), bias_bad.view(), false, out.out()); }, "the bias");
  Array<float> out_many(1, 4, 11, 6);
  expect_throw_with<InvalidArgument>(
      [&] { call(q_many.view(), k.view(), v.view(), {}, true, out_many.out()); }, "causal queries");
}

template <class T>
void expect_exp_close() {
  // every x from the lowest normal result's log to 0 in small steps, and the edges
  const double lowest = std::is_same_v<T, float> ? -87.33 : -708.3;
  const double ulp = std::numeric_limits<T>::epsilon();
  for (double x = lowest; x <= 0.0; x += std::is_same_v<T, float> ? 1.37e-3 : 1.1e-2) {
    const T got = detail::exp_nonpositive(static_cast<T>(x));
    const T want = std::exp(static_cast<T>(x));
    ASSERT_LE(std::abs(got - want), 2.0 * ulp * want) << x;
  }
  EXPECT_EQ(detail::exp_nonpositive(T(0)), T(1));
  EXPECT_EQ(detail::exp_nonpositive(static_cast<T>(lowest - 1.0)), T(0));
  EXPECT_EQ(detail::exp_nonpositive(std::numeric_limits<T>::lowest()), T(0));
  EXPECT_EQ(detail::exp_nonpositive(-std::numeric_limits<T>::infinity()), T(0));
  EXPECT_TRUE(std::isnan(detail::exp_nonpositive(std::numeric_limits<T>::quiet_NaN())));
}

TEST(ExpNonpositive, WithinTwoUlpOfStdExp) {
  expect_exp_close<float>();
  expect_exp_close<double>();
}

}  // namespace
