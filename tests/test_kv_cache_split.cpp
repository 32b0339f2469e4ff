// kv_cache_split (include/tenfold/kv_cache.hpp): the split of one budget between shared
// rotary keys and latent values, worked out by hand; ties rounded to even; values above
// their whole size moved to the keys; the refusals; cache_widening, the stored numbers per
// model number of a cache_dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "expect_throw.hpp"
#include "tenfold/error.hpp"
#include "tenfold/kv_cache.hpp"

namespace {

using namespace tenfold;
using namespace tenfold::attention;
using tenfold::test::expect_throw_with;

void expect_split(double fraction, index_t cache, index_t bands, index_t keys, index_t values) {
  const KvCacheSplit s = kv_cache_split(fraction, cache, bands);
  EXPECT_EQ(s.key_values, keys) << fraction << " of 2 x " << cache << ", bands " << bands;
  EXPECT_EQ(s.value_values, values) << fraction << " of 2 x " << cache << ", bands " << bands;
}

TEST(KvCacheSplit, AThirdKeysTheRestValues) {
  // 2 f G d = 32: keys round(32 / 3) = 11, values 21; for bands == 1 whole complex keys,
  // 2 round(32 / 6) = 10, values 22.
  expect_split(0.5, 32, 4, 11, 21);
  expect_split(0.5, 32, 1, 10, 22);
  // SmolLM2-135M at half the cache: 192 values, 64 keys and 128 values.
  expect_split(0.5, 192, 8, 64, 128);
  expect_split(0.25, 192, 8, 32, 64);
  EXPECT_DOUBLE_EQ(kKvKeyShare, 1.0 / 3.0);
}

TEST(KvCacheSplit, TiesRoundToEven) {
  // 2 f G d = 2.5 rounds to 2 (not 3): one key, one value.
  expect_split(0.25, 5, 2, 1, 1);
  // 4.5 values: 4, of them round(1.5) = 2 keys.
  expect_split(0.75, 3, 2, 2, 2);
}

TEST(KvCacheSplit, ValuesAboveTheirWholeSizeGoToTheKeys) {
  // 18 values: 6 keys and 12 values, 2 of which exceed G d = 10: 8 keys, 10 values.
  expect_split(0.9, 10, 1, 8, 10);
  // The whole cache: both whole, whatever the rounding.
  for (const index_t bands : {1, 2, 8}) expect_split(1.0, 32, bands, 32, 32);
  expect_split(1.0, 3, 1, 3, 3);  // keys capped at G d (an odd G d with bands == 1)
}

TEST(KvCacheSplit, Refusals) {
  for (const double f : {0.0, -0.5, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    expect_throw_with<InvalidOption>([&] { kv_cache_split(f, 32, 2); },
                                     "kv_cache must be a fraction in (0, 1]");
  }
  expect_throw_with<InvalidOption>([] { kv_cache_split(1.5, 32, 2); }, "got 1.5");
  // 2 f G d = 1.28 -> 1 value: no room for a complex key (two values) and a latent value.
  expect_throw_with<InvalidOption>(
      [] { kv_cache_split(0.02, 32, 1); },
      "kv_cache 0.02 keeps 1 of the 64 key and value values per token and layer: too few for 2 "
      "key values and one latent value");
  expect_throw_with<InvalidOption>([] { kv_cache_split(0.01, 32, 4); }, "too few for 1 key value");
  expect_throw_with<InvalidOption>([] { kv_cache_split(0.5, 32, 0); }, "bands must be at least 1");
  expect_throw_with<InvalidArgument>([] { kv_cache_split(0.5, 0, 1); }, "at least one value");
  try {
    kv_cache_split(0.0, 32, 1);
    ADD_FAILURE() << "0 was not refused";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "kv_cache");  // the program names --kv-cache, Python kv_cache
  }
}

// Stored numbers per model number: bfloat16 under float32, float8 under float32 and 16-bit
// models; the model's own precision 1; the rest refused naming cache_dtype.
TEST(CacheWidening, StoredNumbersPerModelNumber) {
  EXPECT_EQ(cache_widening("", "float64"), 1);
  EXPECT_EQ(cache_widening("bfloat16", "float32"), 2);
  EXPECT_EQ(cache_widening("float8_e4m3fn", "float32"), 4);
  EXPECT_EQ(cache_widening("float8_e4m3fn", "bfloat16"), 2);
  EXPECT_EQ(cache_widening("float8_e4m3fn", "float16"), 2);
  expect_throw_with<InvalidOption>(
      [] { cache_widening("bfloat16", "bfloat16"); },
      "cache_dtype bfloat16 is for float32 models; this model computes in bfloat16");
  expect_throw_with<InvalidOption>([] { cache_widening("float8_e4m3fn", "float64"); },
                                   "float32, bfloat16 and float16 models; this model computes in "
                                   "float64");
  expect_throw_with<InvalidOption>([] { cache_widening("float16", "float32"); },
                                   "cache_dtype must be bfloat16 or float8_e4m3fn, got 'float16'");
}

}  // namespace
