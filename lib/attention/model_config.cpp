// What the config.json beside a checkpoint says, for both conversions: config_path (the
// file read), read_model_config and heads_from_config (head count, hidden size and
// GPT-2's score scaling, each accepted under all its spellings when they agree), and
// for rotary checkpoints is_rotary_checkpoint (which families convert, which are refused
// and why) and read_rotary_config (head layout and the RoPE frequencies, computed as
// transformers computes them). Malformed values are refused naming the file and the key.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attention/checkpoint_parts.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

/// "llama, qwen2, mistral": the families that convert, for messages.
std::string converted_names() {
  std::string out;
  for (const auto& family : rotary_families().converted) {
    if (!out.empty()) out += ", ";
    out += family.first;
  }
  return out;
}

// The config.json beside `checkpoint` as a JSON object: empty when there is no such
// file or it holds no object; IoError when it is not JSON.
nlohmann::json read_config_json(const std::filesystem::path& checkpoint) {
  const std::filesystem::path config = config_path(checkpoint);
  std::ifstream in(config);
  if (!in) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    return j.is_object() ? j : nlohmann::json::object();
  } catch (const nlohmann::json::exception& e) {
    throw IoError("'" + config.string() + "' is not valid JSON: " + e.what());
  }
}

// "'<config.json path>'", the start of every message about the file. (Appended, not
// written "'" + path + "'", which GCC 12 at -O3 warns about wrongly, -Wrestrict.)
std::string quoted_config(const std::filesystem::path& checkpoint) {
  std::string where = "'";
  where += config_path(checkpoint).string();
  where += '\'';
  return where;
}

// The one value of a setting the config may spell several ways (num_attention_heads,
// n_heads, n_head): a positive integer, the same under every spelling given; 0 if none.
index_t config_integer(const nlohmann::json& j, const std::string& where,
                       std::initializer_list<const char*> keys) {
  index_t value = 0;
  const char* first = nullptr;
  for (const char* key : keys) {
    if (!j.contains(key)) continue;
    const auto& v = j[key];
    if (!v.is_number_integer() || v.get<long long>() < 1) {
      throw IoError(where + ": " + key + " is " + v.dump() + ", not a positive integer");
    }
    const auto n = static_cast<index_t>(v.get<long long>());
    if (first && n != value) {
      throw IoError(where + ": " + first + " = " + std::to_string(value) + " disagrees with " +
                    key + " = " + std::to_string(n) + "; the model has one value");
    }
    value = n;
    first = key;
  }
  return value;
}

bool config_flag(const nlohmann::json& j, const std::string& where, const char* key,
                 bool fallback) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_boolean()) {
    throw IoError(where + ": " + key + " is " + j[key].dump() + ", not true or false");
  }
  return j[key].get<bool>();
}

double config_number(const nlohmann::json& j, const std::string& where, const char* key,
                     double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number() || !std::isfinite(j[key].get<double>()) || j[key].get<double>() <= 0) {
    throw IoError(where + ": " + key + " is " + j[key].dump() + ", not a positive number");
  }
  return j[key].get<double>();
}

}  // namespace

std::filesystem::path config_path(const std::filesystem::path& checkpoint) {
  return checkpoint.parent_path() / "config.json";
}

ModelConfig read_model_config(const std::filesystem::path& checkpoint) {
  // No file, or no object in it: every key absent, so the defaults.
  const nlohmann::json j = read_config_json(checkpoint);
  const std::string where = quoted_config(checkpoint);
  ModelConfig c;
  c.heads = config_integer(j, where, {"num_attention_heads", "n_heads", "n_head"});
  c.hidden_size = config_integer(j, where, {"hidden_size", "n_embd", "dim"});
  c.scale_attn_weights = config_flag(j, where, "scale_attn_weights", true);
  c.scale_attn_by_inverse_layer_idx =
      config_flag(j, where, "scale_attn_by_inverse_layer_idx", false);
  return c;
}

index_t heads_from_config(const std::filesystem::path& checkpoint) {
  return read_model_config(checkpoint).heads;
}

const RotaryFamilies& rotary_families() {
  static const RotaryFamilies families{
      {{"llama", "LlamaAttention"}, {"qwen2", "Qwen2Attention"}, {"mistral", "MistralAttention"}},
      {"qwen3", "qwen3_moe", "qwen3_next", "olmo2", "olmoe", "gemma3", "gemma3_text", "cohere2"}};
  return families;
}

bool is_rotary_checkpoint(const std::filesystem::path& checkpoint) {
  const nlohmann::json j = read_config_json(checkpoint);
  if (!j.contains("model_type") || !j["model_type"].is_string()) return false;
  const std::string type = j["model_type"].get<std::string>();
  const std::string where = quoted_config(checkpoint);
  const RotaryFamilies& f = rotary_families();
  if (std::any_of(f.converted.begin(), f.converted.end(),
                  [&](const auto& family) { return family.first == type; })) {
    return true;
  }
  if (std::find(f.qk_norm.begin(), f.qk_norm.end(), type) != f.qk_norm.end()) {
    throw IoError(where + ": model_type " + type +
                  " normalises every query and key head (q_norm, k_norm: an RMSNorm) before the "
                  "rotation, so a key is not a linear function of the token and no shared linear "
                  "key projection reproduces it; rotary conversion supports " +
                  converted_names());
  }
  if (j.contains("rope_theta") || j.contains("rope_scaling") || j.contains("rope_parameters")) {
    throw IoError(where + ": rotary model_type " + type +
                  " is not supported; rotary conversion supports " + converted_names());
  }
  return false;
}

RotaryConfig read_rotary_config(const std::filesystem::path& checkpoint) {
  const nlohmann::json j = read_config_json(checkpoint);
  const std::string where = quoted_config(checkpoint);
  RotaryConfig c;
  c.family = j.value("model_type", std::string());
  c.heads = config_integer(j, where, {"num_attention_heads"});
  c.hidden_size = config_integer(j, where, {"hidden_size"});
  if (c.heads == 0 || c.hidden_size == 0) {
    throw IoError(where + " lacks num_attention_heads or hidden_size");
  }
  c.key_heads = config_integer(j, where, {"num_key_value_heads"});
  if (c.key_heads == 0) c.key_heads = c.heads;
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null()
                   ? config_integer(j, where, {"head_dim"})
                   : c.hidden_size / c.heads;
  if (c.heads % c.key_heads) {
    throw IoError(where + ": num_attention_heads " + std::to_string(c.heads) +
                  " is not a multiple of num_key_value_heads " + std::to_string(c.key_heads));
  }
  if (c.head_dim % 2) {
    throw IoError(where + ": head_dim " + std::to_string(c.head_dim) +
                  " is odd; RoPE pairs need "
                  "an even head width");
  }
  if (config_number(j, where, "partial_rotary_factor", 1.0) != 1.0) {
    throw IoError(where + ": partial_rotary_factor " + j["partial_rotary_factor"].dump() +
                  " (partial rotary embeddings) is not supported");
  }
  // transformers 5 writes rope_parameters {rope_theta, rope_type, factor, ...}; older
  // configs rope_theta and rope_scaling {type or rope_type, factor, ...}.
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& params = j.contains("rope_parameters") && j["rope_parameters"].is_object()
                                     ? j["rope_parameters"]
                                     : none;
  const nlohmann::json& scaling =
      j.contains("rope_scaling") && j["rope_scaling"].is_object() ? j["rope_scaling"] : params;
  const double theta =
      config_number(params, where, "rope_theta", config_number(j, where, "rope_theta", 10000.0));
  c.rope_type = scaling.value("rope_type", scaling.value("type", std::string("default")));
  double factor = 1.0;
  if (c.rope_type == "linear") {
    factor = config_number(scaling, where, "factor", 1.0);
  } else if (c.rope_type == "dynamic" || c.rope_type == "longrope") {
    throw IoError(where + ": RoPE type " + c.rope_type +
                  " changes its frequencies with the sequence length; band latents rotate "
                  "rebuilt keys with fixed frequencies (supported: default, linear)");
  } else if (c.rope_type == "llama3" || c.rope_type == "yarn") {
    throw IoError(where + ": RoPE type " + c.rope_type +
                  " is not computed by this program (supported: default, linear); "
                  "tenfold.torch's compress_model converts it");
  } else if (c.rope_type != "default") {
    throw IoError(where + ": unknown RoPE type '" + c.rope_type +
                  "' (this program converts default and linear; tenfold.torch's "
                  "compress_model also llama3 and yarn)");
  }
  // transformers: inv_freq = 1 / base^(arange(0, d, 2) / d) in float32, / factor.
  const float base = static_cast<float>(theta);
  for (index_t k = 0; k < c.head_dim / 2; ++k) {
    const float e = static_cast<float>(2 * k) / static_cast<float>(c.head_dim);
    const float f = 1.0f / std::pow(base, e);
    c.inv_freq.push_back(static_cast<double>(f / static_cast<float>(factor)));
  }
  return c;
}

}  // namespace tenfold::attention
