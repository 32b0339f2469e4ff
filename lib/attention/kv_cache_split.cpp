// One budget for keys and values (include/tenfold/kv_cache.hpp, docs/kv-cache.md): a
// fraction of the original key and value cache split between shared rotary keys and
// latent values, for tenfold.torch's kv_cache= and the program's --kv-cache; and how many
// stored numbers a cache_dtype fits in the bytes of one of the model's.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/format.hpp"
#include "tenfold/error.hpp"
#include "tenfold/kv_cache.hpp"

namespace tenfold::attention {
namespace {

/// The nearest integer, ties to even (as Python's round(), which the split was written with).
index_t round_even(double x) {
  const double r = std::round(x);
  const bool tie = std::abs(x - std::trunc(x)) == 0.5;
  return static_cast<index_t>(tie ? 2.0 * std::round(x / 2.0) : r);
}

}  // namespace

KvCacheSplit kv_cache_split(double fraction, index_t cache_values, index_t bands) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw InvalidOption("kv_cache",
                        "must be a fraction in (0, 1] of the original key and value cache, got " +
                            detail::number_string(fraction));
  }
  if (bands < 1) throw InvalidOption("bands", "must be at least 1, got " + std::to_string(bands));
  if (cache_values < 1) {
    throw InvalidArgument("the original key cache must hold at least one value per token, got " +
                          std::to_string(cache_values));
  }
  const index_t step = bands == 1 ? 2 : 1;  // cached values per shared key
  // 2 f G d values: kKvKeyShare of them keys (whole steps), the rest latent values.
  const double total = 2.0 * fraction * static_cast<double>(cache_values);
  index_t keys = round_even(total * kKvKeyShare / static_cast<double>(step)) * step;
  index_t values = round_even(total) - keys;
  // Values beyond their whole size G d go to the keys, in whole steps.
  if (values > cache_values) {
    keys += (values - cache_values + step - 1) / step * step;
    values = cache_values;
  }
  if (keys < step || values < 1) {
    throw InvalidOption("kv_cache", detail::number_string(fraction) + " keeps " +
                                        std::to_string(round_even(total)) + " of the " +
                                        std::to_string(2 * cache_values) +
                                        " key and value values per token and layer: too few for " +
                                        std::to_string(step) + " key value" +
                                        (step > 1 ? "s" : "") + " and one latent value");
  }
  return {std::min(keys, cache_values), values};
}

index_t cache_widening(const std::string& cache_dtype, const std::string& model_dtype) {
  if (cache_dtype.empty()) return 1;
  // model bytes per number over stored bytes per number, where the dtype serves the model
  if (cache_dtype == "bfloat16") {
    if (model_dtype == "float32") return 2;
    throw InvalidOption("cache_dtype",
                        "bfloat16 is for float32 models; this model computes in " + model_dtype);
  }
  if (cache_dtype == "float8_e4m3fn") {
    if (model_dtype == "float32") return 4;
    if (model_dtype == "bfloat16" || model_dtype == "float16") return 2;
    throw InvalidOption("cache_dtype",
                        "float8_e4m3fn is for float32, bfloat16 and float16 models; this model "
                        "computes in " +
                            model_dtype);
  }
  throw InvalidOption("cache_dtype",
                      "must be bfloat16 or float8_e4m3fn, got '" + cache_dtype + "'");
}

}  // namespace tenfold::attention
