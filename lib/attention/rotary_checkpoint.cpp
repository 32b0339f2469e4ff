// Rotary checkpoints (Llama, Qwen2, Mistral): find_rotary_layers finds every
// "<M>layers.<n>.self_attn." layer and refuses QK-norm layers, load_rotary_layer and
// load_value_layer check a layer's shapes against config.json and its values for NaN and
// Inf, and compress_rotary_checkpoint replaces each layer's k_proj by shared keys
// (rotary_keys: complex keys per frequency pair for bands 1, band latents else) and, when
// asked, v_proj and o_proj by latent values (value_latent), optionally against calibration
// moments of [x; 1], in the tensors tenfold.torch's RotarySharedKeyAttention loads, through
// the checkpoint writer.
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
#include "core/format.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/error.hpp"
#include "tenfold/kv_cache.hpp"

namespace tenfold::attention {
namespace {

// One rotary layer: "<M>layers.<n>.self_attn." with its q_proj / k_proj / v_proj tensors.
struct RotaryNames {
  int index = 0;
  std::string prefix;
  bool query_bias = false, key_bias = false, value_bias = false;
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
    l.value_bias = file.find(l.prefix + "v_proj.bias") != nullptr;
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

/// The (out x in) = (rows, cols) weight `name` as the column-major cols x rows matrix,
/// its shape checked against config.json and its entries for NaN and Inf.
template <class T>
Matrix<T> load_weight(const io::SafetensorsFile& file, const std::string& name, index_t rows,
                      index_t cols) {
  const io::SafetensorsEntry& e = file.at(name);
  if (e.shape != std::vector<index_t>{rows, cols}) {
    throw DimensionMismatch("'" + name + "' has shape " + detail::shape_text(e.shape) +
                            ", expected (" + std::to_string(rows) + ", " + std::to_string(cols) +
                            ") from config.json");
  }
  Matrix<T> m = file.read_matrix<T>(name);
  detail::check_finite_tensor(name, m.values(), cols);
  return m;
}

/// The bias `name` when `present` (else empty), checked for NaN and Inf.
template <class T>
std::vector<T> load_bias(const io::SafetensorsFile& file, const std::string& name, bool present) {
  if (!present) return {};
  std::vector<T> b = file.read<T>(name).values();
  detail::check_finite_tensor(name, b, 0);
  return b;
}

/// `l` after its validate(), whose refusal names the layer.
template <class Layer>
Layer validated(Layer l, const RotaryNames& n) {
  try {
    l.validate();
  } catch (const Error& e) {
    throw IoError("layer " + std::to_string(n.index) + " (" + n.prefix + "): " + e.what());
  }
  return l;
}

template <class T>
RotaryLayer<T> load_rotary_layer(const io::SafetensorsFile& file, const RotaryNames& n,
                                 const RotaryConfig& c) {
  RotaryLayer<T> l;
  l.heads = c.heads;
  l.key_heads = c.key_heads;
  l.head_dim = c.head_dim;
  const std::string q = n.prefix + "q_proj.", k = n.prefix + "k_proj.";
  l.query_weight = load_weight<T>(file, q + "weight", c.heads * c.head_dim, c.hidden_size);
  l.key_weight = load_weight<T>(file, k + "weight", c.key_heads * c.head_dim, c.hidden_size);
  l.query_bias = load_bias<T>(file, q + "bias", n.query_bias);
  l.key_bias = load_bias<T>(file, k + "bias", n.key_bias);
  return validated(std::move(l), n);
}

/// The value side of a layer: v_proj (G d, D) with its bias, o_proj (E, H d), E = D.
template <class T>
ValueLayer<T> load_value_layer(const io::SafetensorsFile& file, const RotaryNames& n,
                               const RotaryConfig& c) {
  const std::string v = n.prefix + "v_proj.", out = n.prefix + "o_proj.weight";
  for (const std::string& name : {v + "weight", out}) {
    if (!file.find(name)) {
      throw IoError("layer " + std::to_string(n.index) + " has no '" + name +
                    "', which latent values replace");
    }
  }
  ValueLayer<T> l;
  l.heads = c.heads;
  l.key_heads = c.key_heads;
  l.head_dim = c.head_dim;
  l.value_weight = load_weight<T>(file, v + "weight", c.key_heads * c.head_dim, c.hidden_size);
  l.value_bias = load_bias<T>(file, v + "bias", n.value_bias);
  l.output_weight = load_weight<T>(file, out, c.hidden_size, c.heads * c.head_dim);
  return validated(std::move(l), n);
}

/// The leading n x n block of `m` (the moment of x within that of [x; 1]).
Matrix<double> leading_block(const Matrix<double>& m, index_t n) {
  Matrix<double> b(n, n);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) b(i, j) = m(i, j);
  return b;
}

/// The layer's moments for a side with (`with_one`) or without a bias from those of the
/// stored dimension (which has the 1 when any side has a bias).
InputMoments side_moments(const InputMoments& m, index_t dim, bool with_one) {
  if (with_one || m.query.rows() == dim) return m;
  InputMoments out;
  out.query = leading_block(m.query, dim);
  if (m.key.rows() > 0) out.key = leading_block(m.key, dim);
  return out;
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

/// The new tensors of one layer, each written just before the input tensor it replaces.
struct LayerWriter {
  detail::CheckpointWriter& writer;
  std::string prefix;
  bool float64;

  void add(const std::string& at, const std::string& name, std::string dtype,
           std::vector<index_t> shape, std::vector<std::byte> bytes) const {
    writer.insert(prefix + at, prefix + name, std::move(dtype), std::move(shape), std::move(bytes));
  }
  /// The first `rows` rows of `m` ((rows, cols), or (cols, rows) when `transpose`) in the
  /// output dtype.
  void add(const std::string& at, const std::string& name, std::vector<index_t> shape,
           const Matrix<double>& m, index_t rows, bool transpose) const {
    add(at, name, float64 ? "F64" : "F32", std::move(shape),
        float64 ? rotary_bytes<double>(m, rows, transpose)
                : rotary_bytes<float>(m, rows, transpose));
  }
  /// A latent D' x C as name.weight (C, D) and, with a bias, name.bias (C,): its row D.
  void add_latent(const std::string& at, const std::string& name, const Matrix<double>& latent,
                  index_t dim, bool bias) const {
    add(at, name + ".weight", {latent.cols(), dim}, latent, dim, true);
    if (!bias) return;
    Matrix<double> row(1, latent.cols());
    for (index_t j = 0; j < latent.cols(); ++j) row(0, j) = latent(dim, j);
    add(at, name + ".bias", {latent.cols()}, row, 1, false);
  }
  void replace(const std::string& name) const { writer.replace(prefix + name); }
};

/// The keys rebuilt from a latent, then rotated: expand (G d, C), inv_freq and
/// attention_scaling, where k_proj.weight stood.
void write_rebuild(const LayerWriter& w, const Matrix<double>& expand, const RotaryConfig& c) {
  const index_t gd = c.key_heads * c.head_dim;
  const std::string at = "k_proj.weight";
  const std::vector<float> inv_freq(c.inv_freq.begin(), c.inv_freq.end());
  w.add(at, "expand", {gd, expand.cols()}, expand, gd, false);
  w.add(at, "inv_freq", "F32", {c.head_dim / 2}, detail::as_bytes(inv_freq));
  w.add(at, "attention_scaling", "F32", {}, detail::as_bytes(std::vector<float>{1.0f}));
}

/// The shared keys in place of k_proj: key.*, and mixing and frequency (bands == 1) or
/// expand, inv_freq and attention_scaling (bands > 1).
void write_keys(const LayerWriter& w, const RotaryKeys& keys, const RotaryConfig& c, index_t bands,
                bool bias, bool key_bias) {
  const index_t cv = keys.key_values();
  const std::string at = "k_proj.weight";
  w.add_latent(at, "key", keys.latent, c.hidden_size, bias);
  if (bands == 1) {
    // mixing (G, R, 2): c_{g,r} as (real, imaginary); frequency (R,): the pair of key r.
    const index_t shared = cv / 2;
    Matrix<double> mixing(c.key_heads, cv);
    for (index_t g = 0; g < c.key_heads; ++g)
      for (index_t r = 0; r < shared; ++r) {
        mixing(g, 2 * r) = keys.mixing(g, r);
        mixing(g, 2 * r + 1) = keys.mixing(g, shared + r);
      }
    w.add(at, "mixing", {c.key_heads, shared, 2}, mixing, c.key_heads, false);
    const std::vector<std::int64_t> frequency(keys.frequency.begin(), keys.frequency.end());
    w.add(at, "frequency", "I64", {shared}, detail::as_bytes(frequency));
  } else {
    write_rebuild(w, keys.expand, c);
  }
  w.replace(at);
  if (key_bias) w.replace("k_proj.bias");
}

/// value_expand (G d, C_v) beside the original o_proj, or the folded o_proj weight (E, H C_v)
/// in place of o_proj's (value_expansion_folded).
void write_value_rebuild(const LayerWriter& w, const ValueLatent& v, const RotaryConfig& c) {
  if (!value_expansion_folded(v.values(), c.head_dim, c.hidden_size)) {
    const index_t gd = c.key_heads * c.head_dim;
    w.add("v_proj.weight", "value_expand", {gd, v.values()}, v.expand, gd, false);
    return;
  }
  w.add("o_proj.weight", "o_proj.weight", {c.hidden_size, c.heads * v.values()}, v.output,
        c.heads * v.values(), true);
  w.replace("o_proj.weight");
}

/// The latent values in place of v_proj (value.*), and the folded o_proj weight (E, H C_v)
/// in place of o_proj's, or value_expand (G d, C_v) beside the original o_proj
/// (value_expansion_folded).
void write_values(const LayerWriter& w, const ValueLatent& v, const RotaryConfig& c, bool bias) {
  w.add_latent("v_proj.weight", "value", v.latent, c.hidden_size, bias);
  w.replace("v_proj.weight");
  if (bias) w.replace("v_proj.bias");
  write_value_rebuild(w, v, c);
}

/// The joint latent in place of k_proj and v_proj: key.* (the latent, with a bias when
/// k_proj or v_proj has one), the keys' rebuild and rotation, and the values' rebuild.
void write_joint(const LayerWriter& w, const ValueLatent& v, const RotaryConfig& c,
                 const RotaryNames& n) {
  w.add_latent("k_proj.weight", "key", v.latent, c.hidden_size, n.key_bias || n.value_bias);
  write_rebuild(w, v.key_expand, c);
  for (const char* name : {"k_proj.weight", "v_proj.weight"}) w.replace(name);
  if (n.key_bias) w.replace("k_proj.bias");
  if (n.value_bias) w.replace("v_proj.bias");
  write_value_rebuild(w, v, c);
}

/// One size for every layer, or the list when they differ.
nlohmann::json one_or_all(const nlohmann::json& sizes) {
  const bool same = std::all_of(sizes.begin(), sizes.end(),
                                [&](const nlohmann::json& v) { return v == sizes.front(); });
  return same ? sizes.front() : sizes;
}

/// "layer n (prefix): what", for a solver's refusal.
template <class F>
auto in_layer(const RotaryNames& n, F&& solve) {
  try {
    return solve();
  } catch (const NumericalError& e) {
    throw NumericalError("layer " + std::to_string(n.index) + " (" + n.prefix + "): " + e.what());
  }
}

/// The key and value sizes of the options (kv_cache split, or as given), checked against
/// the original cache of G d values per token and layer; rep.key_values and value_values.
std::optional<index_t> resolve_sizes(const RotaryCheckpointOptions& o, RotaryOptions& ro,
                                     RotaryCheckpointReport& rep) {
  const index_t gd = rep.original_key_values;
  std::optional<index_t> values = o.values;
  if (o.key_emphasis && !o.joint) {
    throw InvalidOption("key_emphasis", "applies to the joint latent only");
  }
  if (o.joint) {
    // One latent: all of the budget's 2 f G d values, or key_values (0: full), up to 2 G d.
    if (o.values) throw InvalidOption("values", "does not apply to the joint latent");
    if (ro.bands != 1) throw InvalidOption("bands", "does not apply to the joint latent");
    if (o.kv_cache) {
      if (ro.key_values != 0) {
        throw InvalidOption("kv_cache", "sets the latent's size: give it alone");
      }
      const KvCacheSplit split = kv_cache_split(*o.kv_cache, gd, 2);
      ro.key_values = split.key_values + split.value_values;
    }
    if (ro.key_values < 0 || ro.key_values > 2 * gd) {
      throw InvalidArgument("joint latent of " + std::to_string(ro.key_values) +
                            " values exceeds the original key and value cache of " +
                            std::to_string(2 * gd) + " values per token and layer; full is exact");
    }
    rep.key_values = rep.value_values = ro.key_values;
    rep.values = true;
    rep.bands = rep.config.head_dim / 2;
    return ro.key_values;
  }
  if (o.kv_cache) {
    if (o.values || ro.key_values != 0) {
      throw InvalidOption("kv_cache", "sets both the key and the value size: give it alone");
    }
    const KvCacheSplit split = kv_cache_split(*o.kv_cache, gd, ro.bands);
    ro.key_values = split.key_values;
    values = split.value_values;
  }
  if (ro.key_values < 0 || ro.key_values > gd) {
    throw InvalidArgument("shared dimension " + std::to_string(ro.key_values) +
                          " exceeds the original key cache of " + std::to_string(gd) +
                          " values per token and layer (" + std::to_string(rep.config.key_heads) +
                          " key heads x " + std::to_string(rep.config.head_dim) +
                          "); full is exact");
  }
  if (values && (*values < 0 || *values > gd)) {
    throw InvalidOption("values", std::to_string(*values) +
                                      " exceeds the original value cache of " + std::to_string(gd) +
                                      " values per token and layer (" +
                                      std::to_string(rep.config.key_heads) + " value heads x " +
                                      std::to_string(rep.config.head_dim) + "); full is exact");
  }
  rep.key_values = ro.key_values;
  rep.values = values.has_value();
  rep.value_values = values.value_or(0);
  return values;
}

/// The calibration moments of every layer, of [x; 1] when `biased` (a layer side has a
/// bias), else of x; the calibration fields of `rep`.
std::vector<InputMoments> read_moments(const std::filesystem::path& path,
                                       const std::vector<RotaryNames>& layers, bool biased,
                                       RotaryCheckpointReport& rep) {
  if (path.empty()) return {};
  const index_t width = rep.config.hidden_size, dim = width + (biased ? 1 : 0);
  const CalibrationFile calib(path);
  std::vector<std::pair<std::string, int>> names;
  for (const RotaryNames& l : layers) names.emplace_back(l.prefix, l.index);
  rep.calibration_tokens = calib.tokens();
  rep.calibration_source = calib.source();
  return calib.layer_moments(names, dim, [&](const std::string& prefix, const auto& shape) {
    if (biased && shape == std::vector<index_t>{width, width}) {
      throw IoError("calibration tensor '" + prefix + "input_moment' is " +
                    detail::shape_text(shape) +
                    "; the layers have query, key or value biases, so the rotary objective needs "
                    "the moment of [x; 1], (" +
                    std::to_string(dim) + ", " + std::to_string(dim) +
                    ") (tenfold.torch.write_calibration writes it)");
    }
  });
}

/// One layer's joint latent (ValueOptions::joint) on its moment of [x; 1] (with a key or value
/// bias) or x, written in place of k_proj and v_proj; its report (the keys' errors as
/// relative_error and data_error).
RotaryLayerReport joint_layer(const LayerWriter& w, const io::SafetensorsFile& file,
                              const RotaryNames& n, const RotaryConfig& c, index_t values,
                              const RotaryCheckpointOptions& o, const InputMoments* moments) {
  ValueLayer<double> layer = load_value_layer<double>(file, n, c);
  const RotaryLayer<double> keys = load_rotary_layer<double>(file, n, c);
  layer.key_weight = keys.key_weight;
  layer.key_bias = keys.key_bias;
  ValueOptions vo{.values = values, .damping = o.rotary.damping, .joint = true};
  if (o.key_emphasis) {
    layer.query_weight = keys.query_weight;
    layer.query_bias = keys.query_bias;
    vo.key_emphasis = *o.key_emphasis;
    vo.inv_freq = c.inv_freq;
    vo.context = o.rotary.context;
  }
  std::optional<Matrix<double>> s;
  if (moments) {
    const InputMoments m = side_moments(*moments, c.hidden_size, n.key_bias || n.value_bias);
    s = m.key.rows() > 0 ? m.key : m.query;
  }
  const ValueLatent v = in_layer(n, [&] { return value_latent(layer, vo, s ? &*s : nullptr); });
  write_joint(w, v, c, n);
  RotaryLayerReport lr;
  lr.index = n.index;
  lr.prefix = n.prefix;
  lr.key_values = lr.value_values = v.values();
  lr.relative_error = v.key_error.value_or(0.0);
  lr.data_error = v.key_data_error;
  lr.decode_flops =
      rotary_decode_flops(c.heads, c.key_heads, c.head_dim, v.values(), c.head_dim / 2);
  lr.seconds = v.seconds;
  lr.value_error = v.relative_error;
  lr.value_data_error = v.data_error;
  lr.value_params_before = v.params_before;
  lr.value_params_after = v.params_after;
  return lr;
}

/// The original keys kept whole, for a cache stored in fewer bytes: k_proj as key.* (the
/// weight (G d, D) and its bias), its report row (no error, 2 H d flops per cached token).
RotaryLayerReport whole_layer(const LayerWriter& w, const io::SafetensorsFile& file,
                              const RotaryNames& n, const RotaryConfig& c) {
  const RotaryLayer<double> l = load_rotary_layer<double>(file, n, c);
  const index_t dim = c.hidden_size, gd = c.key_heads * c.head_dim;
  // the latent D' x G d: k_proj's weight transposed, its bias as row D
  Matrix<double> latent(dim + (n.key_bias ? 1 : 0), gd);
  for (index_t j = 0; j < gd; ++j) {
    for (index_t i = 0; i < dim; ++i) latent(i, j) = l.key_weight(i, j);
    if (n.key_bias) latent(dim, j) = l.key_bias[static_cast<std::size_t>(j)];
  }
  w.add_latent("k_proj.weight", "key", latent, dim, n.key_bias);
  w.replace("k_proj.weight");
  if (n.key_bias) w.replace("k_proj.bias");
  RotaryLayerReport lr;
  lr.index = n.index;
  lr.prefix = n.prefix;
  lr.key_values = gd;
  lr.decode_flops = 2 * c.heads * c.head_dim;
  lr.params_before = lr.params_after = gd * (dim + (n.key_bias ? 1 : 0));
  return lr;
}

/// The options with kv_cache counting the stored bytes of `cache_widening` numbers per
/// number of the model's: w f for f < 1/w; whole (returned true) at f = 1/w (not joint);
/// f > 1/w refused.
bool storage_sizes(RotaryCheckpointOptions& o, index_t widening) {
  if (widening == 1 || !o.kv_cache || !(*o.kv_cache > 0 && *o.kv_cache <= 1)) return false;
  const double f = *o.kv_cache, w = static_cast<double>(widening);
  if (f * w > 1) {
    throw InvalidOption("kv_cache", tenfold::detail::number_string(f) + " with a " + o.cache_dtype +
                                        " cache: that cache holds at most 1/" +
                                        std::to_string(widening) +
                                        " of this model's cache bytes (that fraction keeps "
                                        "every key and value); give at most " +
                                        tenfold::detail::number_string(1 / w));
  }
  o.kv_cache = f * w;
  return f * w == 1 && !o.joint;
}

/// The checkpoint's cache_widening: its first q_proj's dtype is the model's precision.
index_t checkpoint_widening(const io::SafetensorsFile& file, const std::vector<RotaryNames>& layers,
                            const std::string& cache_dtype) {
  const std::string stored = file.at(layers.front().prefix + "q_proj.weight").dtype;
  const std::map<std::string, std::string> names = {
      {"F64", "float64"}, {"F32", "float32"}, {"BF16", "bfloat16"}, {"F16", "float16"}};
  const auto name = names.find(stored);
  return cache_widening(cache_dtype, name == names.end() ? stored : name->second);
}

}  // namespace

bool keeps_whole(const std::filesystem::path& input, const RotaryCheckpointOptions& options) {
  if (!is_rotary_checkpoint(input)) {
    throw IoError("'" + config_path(input).string() +
                  "' does not name a rotary model_type (llama, qwen2, mistral)");
  }
  const io::SafetensorsFile file(input);
  RotaryCheckpointOptions o = options;
  return storage_sizes(o, checkpoint_widening(file, find_rotary_layers(file), o.cache_dtype));
}

RotaryCheckpointReport compress_rotary_checkpoint(
    const std::filesystem::path& input, const std::filesystem::path& output,
    const RotaryCheckpointOptions& options,
    const std::function<void(const RotaryLayerReport&)>& on_layer) {
  const auto start = std::chrono::steady_clock::now();
  detail::CheckpointWriter writer(output, {{input, "the input checkpoint"},
                                           {config_path(input), "the config.json beside the input"},
                                           {options.calibration, "the calibration file"}});
  if (!is_rotary_checkpoint(input)) {
    throw IoError("'" + config_path(input).string() +
                  "' does not name a rotary model_type (llama, qwen2, mistral)");
  }
  RotaryCheckpointReport rep;
  rep.config = read_rotary_config(input);
  const RotaryConfig& c = rep.config;
  const io::SafetensorsFile file(input);
  const std::vector<RotaryNames> layers = find_rotary_layers(file);
  rep.cache_widening = checkpoint_widening(file, layers, options.cache_dtype);
  RotaryCheckpointOptions o = options;
  rep.whole = storage_sizes(o, rep.cache_widening);
  if (rep.whole && (o.values || o.rotary.key_values != 0)) {
    throw InvalidOption("kv_cache", "sets both the key and the value size: give it alone");
  }
  RotaryOptions ro = o.rotary;
  ro.inv_freq = c.inv_freq;
  rep.bands = ro.bands;  // joint: d/2 (resolve_sizes)
  rep.original_key_values = c.key_heads * c.head_dim;
  const index_t half = c.head_dim / 2;
  if (rep.whole) {
    ro.bands = rep.bands = 1;
    ro.key_values = rep.key_values = rep.original_key_values;
  } else if (ro.bands < 1 || half % ro.bands) {
    throw InvalidOption("bands", "must be a positive divisor of the " + std::to_string(half) +
                                     " frequency pairs of a head, got " + std::to_string(ro.bands));
  }
  const std::optional<index_t> values = rep.whole ? std::nullopt : resolve_sizes(o, ro, rep);
  const RotaryNames& first = layers.front();
  const bool biased = first.query_bias || first.key_bias, value_biased = first.value_bias;
  // One moment per layer, of [x; 1] when any side has a bias; each side takes its block.
  const std::vector<InputMoments> moments =
      read_moments(o.calibration, layers, biased || value_biased, rep);

  nlohmann::json sizes = nlohmann::json::array(), value_sizes = nlohmann::json::array();
  std::vector<double> errors, data_errors, value_errors, value_data_errors;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const RotaryNames& n = layers[i];
    if ((n.query_bias || n.key_bias) != biased || n.value_bias != value_biased) {
      throw IoError("layer " + std::to_string(n.index) + " (" + n.prefix + ") differs from layer " +
                    std::to_string(first.index) + " in having query/key or value biases");
    }
    const LayerWriter w{writer, n.prefix, o.float64};
    if (rep.whole) {
      const RotaryLayerReport lr = whole_layer(w, file, n, c);
      sizes.push_back(lr.key_values);
      errors.push_back(0.0);
      rep.layers.push_back(lr);
      if (on_layer) on_layer(lr);
      continue;
    }
    if (o.joint) {
      const RotaryLayerReport lr =
          joint_layer(w, file, n, c, *values, o, moments.empty() ? nullptr : &moments[i]);
      sizes.push_back(lr.key_values);
      value_sizes.push_back(lr.value_values);
      errors.push_back(lr.relative_error);
      value_errors.push_back(*lr.value_error);
      if (lr.data_error) data_errors.push_back(*lr.data_error);
      if (lr.value_data_error) value_data_errors.push_back(*lr.value_data_error);
      rep.layers.push_back(lr);
      if (on_layer) on_layer(lr);
      continue;
    }
    const RotaryLayer<double> layer = load_rotary_layer<double>(file, n, c);
    std::optional<InputMoments> key_moments;
    if (!moments.empty()) key_moments = side_moments(moments[i], c.hidden_size, biased);
    const RotaryKeys keys =
        in_layer(n, [&] { return rotary_keys(layer, ro, key_moments ? &*key_moments : nullptr); });
    write_keys(w, keys, c, ro.bands, biased, n.key_bias);
    RotaryLayerReport lr;
    lr.index = n.index;
    lr.prefix = n.prefix;
    lr.key_values = keys.key_values();
    lr.ranks = keys.ranks;
    lr.relative_error = keys.relative_error;
    lr.data_error = keys.data_error;
    lr.decode_flops = keys.decode_flops;
    lr.seconds = keys.seconds;
    lr.params_before = keys.params_before;
    lr.params_after = keys.params_after;
    sizes.push_back(keys.key_values());
    errors.push_back(keys.relative_error);
    if (keys.data_error) data_errors.push_back(*keys.data_error);

    if (values) {
      // The values see the key-side tokens x (the key moment when the file has one).
      std::optional<Matrix<double>> s;
      if (!moments.empty()) {
        const InputMoments m = side_moments(moments[i], c.hidden_size, value_biased);
        s = m.key.rows() > 0 ? m.key : m.query;
      }
      const ValueLayer<double> value_layer = load_value_layer<double>(file, n, c);
      const ValueLatent v = in_layer(n, [&] {
        return value_latent(value_layer, ValueOptions{.values = *values, .damping = ro.damping},
                            s ? &*s : nullptr);
      });
      write_values(w, v, c, value_biased);
      lr.seconds += v.seconds;
      lr.value_values = v.values();
      lr.value_error = v.relative_error;
      lr.value_data_error = v.data_error;
      lr.value_params_before = v.params_before;
      lr.value_params_after = v.params_after;
      value_sizes.push_back(v.values());
      value_errors.push_back(v.relative_error);
      if (v.data_error) value_data_errors.push_back(*v.data_error);
    }
    rep.layers.push_back(lr);
    if (on_layer) on_layer(lr);
  }

  std::map<std::string, std::string> meta;
  nlohmann::json entry = {
      {"family", c.family}, {"key_values", one_or_all(sizes)}, {"bands", rep.bands}};
  if (o.joint) entry["joint"] = true;
  if (rep.whole) entry["whole"] = true;
  if (!o.cache_dtype.empty()) entry["cache_dtype"] = o.cache_dtype;
  if (values) {
    entry["value_values"] = one_or_all(value_sizes);
    meta["tenfold.value_relative_errors"] = nlohmann::json(value_errors).dump();
    if (!moments.empty()) {
      meta["tenfold.calibration.value_relative_errors"] = nlohmann::json(value_data_errors).dump();
    }
  }
  meta["tenfold.rotary"] = entry.dump();
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
