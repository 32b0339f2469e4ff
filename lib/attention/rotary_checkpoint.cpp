// Rotary checkpoints (Llama, Qwen2, Mistral): find_rotary_layers finds every
// "<M>layers.<n>.self_attn." layer and refuses QK-norm layers, load_rotary_layer checks
// a layer's shapes against config.json and its values for NaN and Inf, and
// compress_rotary_checkpoint replaces each layer's k_proj by shared keys (rotary_keys:
// complex keys per frequency pair for bands 1, band latents else), optionally against calibration
// moments of [x; 1], in the tensors tenfold.torch's RotarySharedKeyAttention loads, through the
// checkpoint writer.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "attention/checkpoint_parts.hpp"
#include "attention/checkpoint_writer.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

// One rotary layer: "<M>layers.<n>.self_attn." with its q_proj / k_proj tensors.
struct RotaryNames {
  int index = 0;
  std::string prefix;
  bool query_bias = false, key_bias = false;
};

std::vector<RotaryNames> find_rotary_layers(const io::SafetensorsFile& file) {
  static const std::regex query(R"(^(.*layers\.([0-9]+)\.self_attn\.)q_proj\.weight$)");
  std::vector<RotaryNames> out;
  for (const io::SafetensorsEntry& e : file.tensors()) {
    std::smatch m;
    if (!std::regex_match(e.name, m, query)) continue;
    RotaryNames l;
    l.prefix = m[1];
    l.index = detail::layer_number(m[2], e.name);
    for (const char* norm : {"q_norm.weight", "k_norm.weight"}) {
      if (file.find(l.prefix + norm)) {
        throw IoError("'" + l.prefix + norm +
                      "': the layer normalises its queries and keys "
                      "(QK-norm) before the rotation, so no shared linear key projection "
                      "reproduces its keys");
      }
    }
    if (!file.find(l.prefix + "k_proj.weight")) {
      throw IoError("layer " + std::to_string(l.index) + " has '" + e.name + "' but no '" +
                    l.prefix + "k_proj.weight'");
    }
    l.query_bias = file.find(l.prefix + "q_proj.bias") != nullptr;
    l.key_bias = file.find(l.prefix + "k_proj.bias") != nullptr;
    out.push_back(std::move(l));
  }
  if (out.empty()) {
    throw IoError(
        "no rotary attention layer found (tensors '<...>layers.<n>.self_attn.q_proj.weight')");
  }
  std::sort(out.begin(), out.end(),
            [](const RotaryNames& a, const RotaryNames& b) { return a.index < b.index; });
  return out;
}

template <class T>
RotaryLayer<T> load_rotary_layer(const io::SafetensorsFile& file, const RotaryNames& n,
                                 const RotaryConfig& c) {
  using detail::check_finite_tensor;
  RotaryLayer<T> l;
  l.heads = c.heads;
  l.key_heads = c.key_heads;
  l.head_dim = c.head_dim;
  const std::string q = n.prefix + "q_proj.", k = n.prefix + "k_proj.";
  for (const auto& [name, rows] : {std::pair{q + "weight", c.heads * c.head_dim},
                                   std::pair{k + "weight", c.key_heads * c.head_dim}}) {
    const io::SafetensorsEntry& e = file.at(name);
    if (e.shape != std::vector<index_t>{rows, c.hidden_size}) {
      throw DimensionMismatch("'" + name + "' has shape " + detail::shape_text(e.shape) +
                              ", expected (" + std::to_string(rows) + ", " +
                              std::to_string(c.hidden_size) + ") from config.json");
    }
  }
  l.query_weight = file.read_matrix<T>(q + "weight");
  l.key_weight = file.read_matrix<T>(k + "weight");
  check_finite_tensor(q + "weight", l.query_weight.values(), c.hidden_size);
  check_finite_tensor(k + "weight", l.key_weight.values(), c.hidden_size);
  if (n.query_bias) {
    l.query_bias = file.read<T>(q + "bias").values();
    check_finite_tensor(q + "bias", l.query_bias, 0);
  }
  if (n.key_bias) {
    l.key_bias = file.read<T>(k + "bias").values();
    check_finite_tensor(k + "bias", l.key_bias, 0);
  }
  try {
    l.validate();
  } catch (const Error& e) {
    throw IoError("layer " + std::to_string(n.index) + " (" + n.prefix + "): " + e.what());
  }
  return l;
}

/// Row-major (rows, cols) values of the column-major `m` restricted to its first `rows`
/// rows, transposed when `transpose` (then (m.cols(), rows)).
template <class U>
std::vector<std::byte> rotary_bytes(const Matrix<double>& m, index_t rows, bool transpose) {
  std::vector<U> v;
  v.reserve(static_cast<std::size_t>(rows * m.cols()));
  if (transpose) {  // (cols, rows): row c is column c of m
    for (index_t j = 0; j < m.cols(); ++j)
      for (index_t i = 0; i < rows; ++i) v.push_back(static_cast<U>(m(i, j)));
  } else {  // (rows, cols)
    for (index_t i = 0; i < rows; ++i)
      for (index_t j = 0; j < m.cols(); ++j) v.push_back(static_cast<U>(m(i, j)));
  }
  return detail::as_bytes(v);
}

}  // namespace

RotaryCheckpointReport compress_rotary_checkpoint(
    const std::filesystem::path& input, const std::filesystem::path& output,
    const RotaryCheckpointOptions& o,
    const std::function<void(const RotaryLayerReport&)>& on_layer) {
  const auto start = std::chrono::steady_clock::now();
  detail::CheckpointWriter writer(output, {{input, "the input checkpoint"},
                                           {config_path(input), "the config.json beside the input"},
                                           {o.calibration, "the calibration file"}});
  if (!is_rotary_checkpoint(input)) {
    throw IoError("'" + config_path(input).string() +
                  "' does not name a rotary model_type (llama, qwen2, mistral)");
  }
  RotaryCheckpointReport rep;
  rep.config = read_rotary_config(input);
  const RotaryConfig& c = rep.config;
  const io::SafetensorsFile file(input);
  const std::vector<RotaryNames> layers = find_rotary_layers(file);
  RotaryOptions ro = o.rotary;
  ro.inv_freq = c.inv_freq;
  rep.bands = ro.bands;
  rep.original_key_values = c.key_heads * c.head_dim;
  const index_t half = c.head_dim / 2;
  if (ro.bands < 1 || half % ro.bands) {
    throw InvalidOption("bands", "must be a positive divisor of the " + std::to_string(half) +
                                     " frequency pairs of a head, got " + std::to_string(ro.bands));
  }
  if (ro.key_values < 0 || ro.key_values > rep.original_key_values) {
    throw InvalidArgument("shared dimension " + std::to_string(ro.key_values) +
                          " exceeds the original key cache of " +
                          std::to_string(rep.original_key_values) +
                          " values per token and layer (" + std::to_string(c.key_heads) +
                          " key heads x " + std::to_string(c.head_dim) + "); full is exact");
  }
  const bool biased = layers.front().query_bias || layers.front().key_bias;
  const index_t dim = c.hidden_size + (biased ? 1 : 0);

  std::vector<InputMoments> moments;
  if (!o.calibration.empty()) {
    const CalibrationFile calib(o.calibration);
    std::vector<std::pair<std::string, int>> names;
    for (const RotaryNames& l : layers) names.emplace_back(l.prefix, l.index);
    moments = calib.layer_moments(names, dim, [&](const std::string& prefix, const auto& shape) {
      if (biased && shape == std::vector<index_t>{c.hidden_size, c.hidden_size}) {
        throw IoError("calibration tensor '" + prefix + "input_moment' is " +
                      detail::shape_text(shape) +
                      "; the layers have query/key biases, so the rotary objective needs the "
                      "moment of [x; 1], (" +
                      std::to_string(dim) + ", " + std::to_string(dim) +
                      ") (tenfold.torch.write_calibration writes it)");
      }
    });
    rep.calibration_tokens = calib.tokens();
    rep.calibration_source = calib.source();
  }

  const std::string out_dtype = o.float64 ? "F64" : "F32";
  nlohmann::json sizes = nlohmann::json::array();
  std::vector<double> errors, data_errors;
  const std::vector<float> inv_freq(c.inv_freq.begin(), c.inv_freq.end());
  const float one = 1.0f;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const RotaryNames& n = layers[i];
    if ((n.query_bias || n.key_bias) != biased) {
      throw IoError("layer " + std::to_string(n.index) + " (" + n.prefix + ") differs from layer " +
                    std::to_string(layers.front().index) + " in having query/key biases");
    }
    const RotaryLayer<double> layer = load_rotary_layer<double>(file, n, c);
    RotaryKeys keys;
    try {
      keys = rotary_keys(layer, ro, moments.empty() ? nullptr : &moments[i]);
    } catch (const NumericalError& e) {
      throw NumericalError("layer " + std::to_string(n.index) + " (" + n.prefix + "): " + e.what());
    }
    RotaryLayerReport lr{n.index,
                         n.prefix,
                         keys.key_values(),
                         keys.ranks,
                         keys.relative_error,
                         keys.data_error,
                         keys.decode_flops,
                         keys.seconds,
                         keys.params_before,
                         keys.params_after};
    rep.layers.push_back(lr);
    if (on_layer) on_layer(lr);
    sizes.push_back(keys.key_values());
    errors.push_back(keys.relative_error);
    if (keys.data_error) data_errors.push_back(*keys.data_error);

    // The new tensors stand where the layer's k_proj.weight stood.
    const index_t cv = keys.key_values(), gd = c.key_heads * c.head_dim;
    const auto add = [&](const std::string& name, const std::string& dtype,
                         std::vector<index_t> shape, std::vector<std::byte> bytes) {
      writer.insert(n.prefix + "k_proj.weight", n.prefix + name, dtype, std::move(shape),
                    std::move(bytes));
    };
    const auto matrix = [&](const Matrix<double>& m, index_t rows, bool transpose) {
      return o.float64 ? rotary_bytes<double>(m, rows, transpose)
                       : rotary_bytes<float>(m, rows, transpose);
    };
    add("key.weight", out_dtype, {cv, c.hidden_size}, matrix(keys.latent, c.hidden_size, true));
    if (biased) {
      Matrix<double> bias_row(1, cv);
      for (index_t j = 0; j < cv; ++j) bias_row(0, j) = keys.latent(c.hidden_size, j);
      add("key.bias", out_dtype, {cv}, matrix(bias_row, 1, false));
    }
    if (ro.bands == 1) {
      // mixing (G, R, 2): c_{g,r} as (real, imaginary); frequency (R,): the pair of key r.
      const index_t shared = cv / 2;
      Matrix<double> mixing(c.key_heads, cv);
      for (index_t g = 0; g < c.key_heads; ++g)
        for (index_t r = 0; r < shared; ++r) {
          mixing(g, 2 * r) = keys.mixing(g, r);
          mixing(g, 2 * r + 1) = keys.mixing(g, shared + r);
        }
      add("mixing", out_dtype, {c.key_heads, shared, 2}, matrix(mixing, c.key_heads, false));
      const std::vector<std::int64_t> frequency(keys.frequency.begin(), keys.frequency.end());
      add("frequency", "I64", {shared}, detail::as_bytes(frequency));
    } else {
      add("expand", out_dtype, {gd, cv}, matrix(keys.expand, gd, false));
      add("inv_freq", "F32", {half}, detail::as_bytes(inv_freq));
      add("attention_scaling", "F32", {}, detail::as_bytes(std::vector<float>{one}));
    }
    writer.replace(n.prefix + "k_proj.weight");
    if (n.key_bias) writer.replace(n.prefix + "k_proj.bias");
  }

  std::map<std::string, std::string> meta;
  const bool same = std::all_of(sizes.begin(), sizes.end(),
                                [&](const nlohmann::json& v) { return v == sizes.front(); });
  meta["tenfold.rotary"] = nlohmann::json{
      {"family", c.family},
      {"key_values", same ? sizes.front() : sizes},
      {"bands", ro.bands}}.dump();
  meta["tenfold.rotary.context"] = std::to_string(ro.context);
  meta["tenfold.heads"] = std::to_string(c.heads);
  meta["tenfold.key_heads"] = std::to_string(c.key_heads);
  meta["tenfold.head_dim"] = std::to_string(c.head_dim);
  const detail::CalibrationRecord calibration{o.calibration, rep.calibration_tokens,
                                              rep.calibration_source, ro.damping, data_errors};
  writer.write(rep, start, file, meta, errors, moments.empty() ? nullptr : &calibration);
  return rep;
}

}  // namespace tenfold::attention
