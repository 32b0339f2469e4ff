// The decode-time cache read (tenfold::attention::cache_attention) with the kernel of every
// instruction set this processor runs, on one thread and on the library's threads:
//
//   build/bench/cache_kernel [tokens=8192] [reps=20]
//
// One query of SmolLM2-135M's 9 heads per layer, float, over
//  - one key head of 64 values and one value head of 128 per cached token (its layers at
//    half the KV cache, the default form of docs/kv-cache.md): "in cache", one layer's cache
//    read again and again (it stays in L2 and L3), and "from memory", 30 layers' caches read
//    in turn, as a decode step reads them;
//  - its original 3 key and 3 value heads of 64 (the whole forms of a cache stored in fewer
//    bytes), stored in float, bfloat16 and float8 e4m3, from memory on one thread.
// Milliseconds per layer, medians of `reps`.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#include "attention/cache_attention_with.hpp"
#include "tenfold/threads.hpp"

namespace {

using tenfold::index_t;
using tenfold::attention::BFloat16;
using tenfold::attention::Float8E4M3;
using tenfold::attention::HeadsView;
using tenfold::detail::Isa;

constexpr index_t kHeads = 9, kLayers = 30;

// The cached heads of one layer's cache.
struct Shape {
  index_t key_heads, value_heads, key_width, value_width;
};
constexpr Shape kHalf{1, 1, 64, 128}, kWhole{3, 3, 64, 64};

template <class S>
struct Layer {
  std::vector<S> keys, values;
};

// The value of a float8 e4m3 code below 0x7f (no sign).
double float8_value(unsigned code) {
  const unsigned e = code >> 3, m = code & 7u;
  return e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, static_cast<int>(e) - 10);
}

// x as S: itself, its bfloat16 (the high half), or the nearest float8 e4m3 (by search).
template <class S>
S stored(float x) {
  if constexpr (std::is_same_v<S, BFloat16>) {
    return {static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x) >> 16)};
  } else if constexpr (std::is_same_v<S, Float8E4M3>) {
    unsigned best = 0;
    for (unsigned code = 1; code < 0x7f; ++code)
      if (std::abs(float8_value(code) - std::abs(x)) < std::abs(float8_value(best) - std::abs(x)))
        best = code;
    return {static_cast<std::uint8_t>(best | (x < 0 ? 0x80u : 0u))};
  } else {
    return x;
  }
}

template <class S>
std::vector<Layer<S>> random_layers(index_t count, index_t tokens, const Shape& s) {
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::vector<Layer<S>> layers(static_cast<std::size_t>(count));
  for (Layer<S>& l : layers) {
    l.keys.resize(static_cast<std::size_t>(tokens * s.key_heads * s.key_width));
    l.values.resize(static_cast<std::size_t>(tokens * s.value_heads * s.value_width));
    for (S& x : l.keys) x = stored<S>(normal(rng));
    for (S& x : l.values) x = stored<S>(normal(rng));
  }
  return layers;
}

// Milliseconds per layer of reading `layers` in turn with the kernel of `isa`.
template <class S>
double ms_per_layer(Isa isa, const Shape& s, const std::vector<Layer<S>>& layers, index_t tokens,
                    int reps) {
  std::vector<float> q(static_cast<std::size_t>(kHeads * s.key_width), 0.1f),
      out(static_cast<std::size_t>(kHeads * s.value_width));
  std::vector<double> times;
  const index_t kw = s.key_width, vw = s.value_width;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (const Layer<S>& l : layers) {
      const HeadsView<const float> qv{q.data(), 1, kHeads, 1, kw, kHeads * kw, kw, kw};
      const HeadsView<const S> kv{
          l.keys.data(), 1, s.key_heads, tokens, kw, s.key_heads * tokens * kw, tokens * kw, kw};
      const HeadsView<const S> vv{l.values.data(), 1,  s.value_heads,
                                  tokens,          vw, s.value_heads * tokens * vw,
                                  tokens * vw,     vw};
      const HeadsView<float> ov{out.data(), 1, kHeads, 1, vw, kHeads * vw, vw, vw};
      tenfold::attention::cache_attention_with<float, S>(isa, qv, kv, vv, {}, false, 0.125f, ov);
    }
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() /
        static_cast<double>(layers.size()));
  }
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[static_cast<std::size_t>(reps / 2)];
}

// The whole form's row: from memory on one thread, stored as S.
template <class S>
void whole_row(const char* kernel, Isa isa, const char* stored_as, index_t tokens, int reps) {
  const std::vector<Layer<S>> layers = random_layers<S>(kLayers, tokens, kWhole);
  std::printf("| %s | %s | %.3f |\n", kernel, stored_as,
              ms_per_layer(isa, kWhole, layers, tokens, reps));
}

}  // namespace

int main(int argc, char** argv) {
  const index_t tokens = argc > 1 ? std::atoll(argv[1]) : 8192;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (tokens < 1 || reps < 1) {
    std::fprintf(stderr, "usage: cache_kernel [tokens >= 1] [reps >= 1]\n");
    return 2;
  }
  const std::vector<Layer<float>> layers = random_layers<float>(kLayers, tokens, kHalf);
  const std::vector<Layer<float>> one(layers.begin(), layers.begin() + 1);
  const int threads = tenfold::num_threads();
  const char* names[] = {"baseline (SSE2)", "AVX2", "AVX-512"};
  std::printf("%lld cached tokens, %d heads over 1 key head of 64 and 1 value head of 128, float\n",
              static_cast<long long>(tokens), static_cast<int>(kHeads));
  std::printf("| kernel | threads | in cache, ms per layer | from memory, ms per layer |\n");
  std::printf("| --- | --- | --- | --- |\n");
  for (Isa isa : {Isa::avx512, Isa::avx2, Isa::baseline}) {
    if (isa > tenfold::detail::processor_isa()) continue;
    for (int t : {1, threads}) {
      tenfold::set_num_threads(t);
      const double cached = ms_per_layer(isa, kHalf, one, tokens, reps * 10);
      const double memory = ms_per_layer(isa, kHalf, layers, tokens, reps);
      std::printf("| %s | %d | %.3f | %.3f |\n", names[static_cast<int>(isa)], t, cached, memory);
      if (threads == 1) break;
    }
  }
  tenfold::set_num_threads(1);
  std::printf("\n%d heads over 3 key and 3 value heads of 64 (the whole forms), one thread\n",
              static_cast<int>(kHeads));
  std::printf("| kernel | stored as | from memory, ms per layer |\n| --- | --- | --- |\n");
  for (Isa isa : {Isa::avx512, Isa::avx2, Isa::baseline}) {
    if (isa > tenfold::detail::processor_isa()) continue;
    const char* kernel = names[static_cast<int>(isa)];
    whole_row<float>(kernel, isa, "float", tokens, reps);
    whole_row<BFloat16>(kernel, isa, "bfloat16", tokens, reps);
    whole_row<Float8E4M3>(kernel, isa, "float8 e4m3", tokens, reps);
  }
  tenfold::set_num_threads(threads);
  return 0;
}
