// The decode-time cache read (tenfold::attention::cache_attention) with the kernel of every
// instruction set this processor runs, on one thread and on the library's threads:
//
//   build/bench/cache_kernel [tokens=8192] [reps=20]
//
// One query of 9 heads over one key head of 64 values and one value head of 128 per
// cached token (SmolLM2-135M's layers at half the KV cache, docs/kv-cache.md), float.
// "in cache": one layer's cache read again and again (it stays in L2 and L3); "from
// memory": 30 layers' caches read in turn, as a decode step reads them. Milliseconds per
// layer, medians of `reps`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "attention/cache_attention_with.hpp"
#include "tenfold/threads.hpp"

namespace {

using tenfold::index_t;
using tenfold::attention::HeadsView;
using tenfold::detail::Isa;

constexpr index_t kHeads = 9, kKeys = 64, kValues = 128, kLayers = 30;

struct Layer {
  std::vector<float> keys, values;
};

// Milliseconds per layer of reading `layers` in turn with the kernel of `isa`.
double ms_per_layer(Isa isa, const std::vector<Layer>& layers, index_t tokens,
                    const std::vector<float>& q, std::vector<float>& out, int reps) {
  std::vector<double> times;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (const Layer& l : layers) {
      const HeadsView<const float> qv{q.data(), 1, kHeads, 1, kKeys, kHeads * kKeys, kKeys, kKeys};
      const HeadsView<const float> kv{l.keys.data(),  1,    1, tokens, kKeys, tokens * kKeys,
                                      tokens * kKeys, kKeys};
      const HeadsView<const float> vv{
          l.values.data(), 1, 1, tokens, kValues, tokens * kValues, tokens * kValues, kValues};
      const HeadsView<float> ov{out.data(),       1,       kHeads, 1, kValues,
                                kHeads * kValues, kValues, kValues};
      tenfold::attention::cache_attention_with<float>(isa, qv, kv, vv, {}, false, 0.125f, ov);
    }
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() /
        static_cast<double>(layers.size()));
  }
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[static_cast<std::size_t>(reps / 2)];
}

}  // namespace

int main(int argc, char** argv) {
  const index_t tokens = argc > 1 ? std::atoll(argv[1]) : 8192;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (tokens < 1 || reps < 1) {
    std::fprintf(stderr, "usage: cache_kernel [tokens >= 1] [reps >= 1]\n");
    return 2;
  }
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::vector<Layer> layers(kLayers);
  for (Layer& l : layers) {
    l.keys.resize(static_cast<std::size_t>(tokens * kKeys));
    l.values.resize(static_cast<std::size_t>(tokens * kValues));
    for (float& x : l.keys) x = normal(rng);
    for (float& x : l.values) x = normal(rng);
  }
  std::vector<float> q(kHeads * kKeys), out(kHeads * kValues);
  for (float& x : q) x = normal(rng);
  const std::vector<Layer> one(layers.begin(), layers.begin() + 1);
  const int threads = tenfold::num_threads();
  std::printf("%lld cached tokens, %d heads, %lld key and %lld value columns, float\n",
              static_cast<long long>(tokens), static_cast<int>(kHeads),
              static_cast<long long>(kKeys), static_cast<long long>(kValues));
  std::printf("| kernel | threads | in cache, ms per layer | from memory, ms per layer |\n");
  std::printf("| --- | --- | --- | --- |\n");
  const char* names[] = {"baseline (SSE2)", "AVX2", "AVX-512"};
  for (Isa isa : {Isa::avx512, Isa::avx2, Isa::baseline}) {
    if (isa > tenfold::detail::processor_isa()) continue;
    for (int t : {1, threads}) {
      tenfold::set_num_threads(t);
      const double cached = ms_per_layer(isa, one, tokens, q, out, reps * 10);
      const double memory = ms_per_layer(isa, layers, tokens, q, out, reps);
      std::printf("| %s | %d | %.3f | %.3f |\n", names[static_cast<int>(isa)], t, cached, memory);
      if (threads == 1) break;
    }
  }
  return 0;
}
