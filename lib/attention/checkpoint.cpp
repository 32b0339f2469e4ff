#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

bool is_float_dtype(const std::string& dtype) {
  return dtype == "F64" || dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

index_t numel(const std::vector<index_t>& shape) { return checked_numel(shape); }

std::string shape_text(const std::vector<index_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

void check_heads(const std::string& name, index_t dk, index_t heads) {
  if (heads < 1 || dk % heads != 0) {
    throw DimensionMismatch("query width " + std::to_string(dk) + " of '" + name +
                            "' is not divisible by " + std::to_string(heads) + " heads");
  }
}

// GPT-2's fused c_attn: a Conv1D weight (in, 3 out) = [W_Q^T | W_K^T | W_V^T] and a
// bias (3 out); returns {D, H d}.
std::pair<index_t, index_t> check_fused_shapes(const io::SafetensorsFile& file,
                                               const LayerNames& names, index_t heads) {
  const io::SafetensorsEntry& w = file.at(names.query_weight);
  if (w.shape.size() != 2 || !is_float_dtype(w.dtype) || w.shape[1] % 3 != 0) {
    throw IoError("'" + w.name + "' is not a fused (in, 3 out) floating-point weight (shape " +
                  shape_text(w.shape) + ", dtype " + w.dtype + ")");
  }
  const index_t d_in = w.shape[0], dk = w.shape[1] / 3;
  check_heads(w.name, dk, heads);
  if (!names.query_bias.empty()) {
    const io::SafetensorsEntry& b = file.at(names.query_bias);
    if (b.shape != std::vector<index_t>{3 * dk} || !is_float_dtype(b.dtype)) {
      throw DimensionMismatch("bias '" + b.name + "' has shape " + shape_text(b.shape) +
                              ", expected (" + std::to_string(3 * dk) + ")");
    }
  }
  return {d_in, dk};
}

// Checks the shapes of a layer's tensors against each other and the head count,
// from the header alone; returns {D, H d}.
std::pair<index_t, index_t> check_layer_shapes(const io::SafetensorsFile& file,
                                               const LayerNames& names, index_t heads) {
  if (names.fused_qkv) return check_fused_shapes(file, names, heads);
  const io::SafetensorsEntry& q = file.at(names.query_weight);
  const io::SafetensorsEntry& k = file.at(names.key_weight);
  if (q.shape.size() != 2 || !is_float_dtype(q.dtype)) {
    throw IoError("'" + q.name + "' is not a 2-D floating-point weight (shape " +
                  shape_text(q.shape) + ", dtype " + q.dtype + ")");
  }
  if (k.shape != q.shape || !is_float_dtype(k.dtype)) {
    throw DimensionMismatch("'" + k.name + "' has shape " + shape_text(k.shape) + " and dtype " +
                            k.dtype + ", but '" + q.name + "' has shape " + shape_text(q.shape));
  }
  const index_t dk = q.shape[0], d_in = q.shape[1];
  check_heads(q.name, dk, heads);
  for (const std::string& b : {names.query_bias, names.key_bias}) {
    if (b.empty()) continue;
    const io::SafetensorsEntry& e = file.at(b);
    if (e.shape != std::vector<index_t>{dk} || !is_float_dtype(e.dtype)) {
      throw DimensionMismatch("bias '" + b + "' has shape " + shape_text(e.shape) + ", expected (" +
                              std::to_string(dk) + ")");
    }
  }
  return {d_in, dk};
}

// Throws naming the tensor and the index of its first non-finite entry as the file
// shows it: [k] for a bias, [row, column] of the stored (out x in) weight, whose
// memory is the column-major in x out matrix (`in` = its rows; 0 for a bias).
template <class T>
void check_finite_tensor(const std::string& name, const std::vector<T>& values, index_t in) {
  for (std::size_t k = 0; k < values.size(); ++k) {
    if (std::isfinite(values[k])) continue;
    const auto i = static_cast<index_t>(k);
    const std::string where =
        in > 0 ? std::to_string(i / in) + ", " + std::to_string(i % in) : std::to_string(i);
    throw InvalidArgument("'" + name + "' has a non-finite entry (" +
                          (std::isnan(values[k]) ? "NaN" : "Inf") + ") at index [" + where + "]");
  }
}

index_t resolve_heads(const std::filesystem::path& input, const ModelConfig& config,
                      index_t heads) {
  if (heads < 0) throw InvalidArgument("heads must be >= 1, got " + std::to_string(heads));
  if (heads > 0 && config.heads > 0 && heads != config.heads) {
    throw InvalidArgument("heads = " + std::to_string(heads) + " disagrees with the " +
                          std::to_string(config.heads) + " attention heads of '" +
                          config_path(input).string() +
                          "'; give the model's head count, or leave it out to use the config");
  }
  if (heads == 0) heads = config.heads;
  if (heads == 0) {
    throw InvalidArgument(
        "the head count is unknown: pass --heads, or put a config.json with "
        "num_attention_heads (or n_heads) beside '" +
        input.string() + "'");
  }
  return heads;
}

// A checkpoint's layers with its config, head count and widths, validated from the
// header and config.json before any work.
struct Plan {
  std::vector<LayerNames> layers;
  ModelConfig config;
  index_t heads = 0, input_dim = 0, head_dim = 0;
};

Plan plan_checkpoint(const io::SafetensorsFile& file, const std::filesystem::path& input,
                     index_t heads) {
  Plan p;
  p.layers = find_layers(file);
  p.config = read_model_config(input);
  p.heads = resolve_heads(input, p.config, heads);
  for (const LayerNames& l : p.layers) {
    const auto [d_in, dk] = check_layer_shapes(file, l, p.heads);
    if (p.input_dim == 0) {
      p.input_dim = d_in;
      p.head_dim = dk / p.heads;
    } else if (d_in != p.input_dim || dk != p.heads * p.head_dim) {
      throw DimensionMismatch("layer " + std::to_string(l.index) +
                              " has a different width than layer " +
                              std::to_string(p.layers.front().index));
    }
  }
  if (p.config.hidden_size > 0 && p.config.hidden_size != p.input_dim) {
    throw IoError("'" + config_path(input).string() + "': hidden size " +
                  std::to_string(p.config.hidden_size) +
                  " (hidden_size, n_embd or dim) disagrees with the checkpoint, whose attention "
                  "layers take inputs of width " +
                  std::to_string(p.input_dim) + " ('" + p.layers.front().query_weight + "')");
  }
  return p;
}

// The layer as its model scores it: s_h = s (x^T W_Q^h + b_Q^h)(...) with s = 1/sqrt(d)
// everywhere but in GPT-2, whose config may drop the 1/sqrt(d) or add 1/(layer + 1).
// The collaborative form folds 1/sqrt(d), so the query side is scaled by s sqrt(d).
template <class T>
QueryKeyLayer<T> load_scored_layer(const io::SafetensorsFile& file, const Plan& p,
                                   const LayerNames& l) {
  QueryKeyLayer<T> layer = load_layer<T>(file, l, p.heads);
  if (!l.fused_qkv) return layer;
  double factor = p.config.scale_attn_weights ? 1.0 : std::sqrt(static_cast<double>(p.head_dim));
  if (p.config.scale_attn_by_inverse_layer_idx) factor /= l.index + 1.0;
  if (factor == 1.0) return layer;
  for (T& w : layer.query_weight.values()) w = static_cast<T>(w * factor);
  for (T& b : layer.query_bias) b = static_cast<T>(b * factor);
  return layer;
}

template <class T>
std::vector<std::byte> as_bytes(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The collaborative tensors of one layer, in the output dtype U, with their
// row-major shapes: mixing (H, R), query (R, D), key (R, D), content (H, D).
template <class U, class T>
std::vector<std::pair<std::vector<U>, std::vector<index_t>>> collab_tensors(
    const CollaborativeLayer<T>& c) {
  const index_t h = c.heads(), r = c.rank(), d = c.input_dim();
  std::vector<U> mixing(static_cast<std::size_t>(h * r));
  // Row-major (H, R) is the transpose of the column-major H x R mixing.
  for (index_t i = 0; i < h; ++i)
    for (index_t j = 0; j < r; ++j)
      mixing[static_cast<std::size_t>(i * r + j)] = static_cast<U>(c.mixing(i, j));
  // Column-major D x R (D x H) is row-major (R, D) ((H, D)) as it stands.
  auto same = [](const Matrix<T>& m) {
    return std::vector<U>(m.values().begin(), m.values().end());
  };
  std::vector<U> content = c.content.size() > 0
                               ? same(c.content)
                               : std::vector<U>(static_cast<std::size_t>(h * d), U(0));
  return {{mixing, {h, r}}, {same(c.query), {r, d}}, {same(c.key), {r, d}}, {content, {h, d}}};
}

// Columns [first, first + count) of a row-major (rows, cols) tensor, bit for bit.
std::vector<std::byte> column_slice(const io::SafetensorsFile& file, const std::string& name,
                                    index_t first, index_t count) {
  const io::SafetensorsEntry& e = file.at(name);
  const std::vector<std::byte> all = file.read_bytes(name);
  const index_t rows = e.shape.size() == 2 ? e.shape[0] : 1;
  const index_t cols = e.shape.back();
  const std::size_t elem = all.size() / static_cast<std::size_t>(rows * cols);
  std::vector<std::byte> out;
  out.reserve(static_cast<std::size_t>(rows * count) * elem);
  for (index_t r = 0; r < rows; ++r) {
    const auto* row = all.data() + static_cast<std::size_t>(r * cols + first) * elem;
    out.insert(out.end(), row, row + static_cast<std::size_t>(count) * elem);
  }
  return out;
}

template <class T>
CheckpointReport compress_typed(const std::filesystem::path& input,
                                const std::filesystem::path& output, const CheckpointOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const io::SafetensorsFile file(input);
  const Plan plan = plan_checkpoint(file, input, o.heads);
  const std::vector<LayerNames>& layers = plan.layers;
  CheckpointReport rep;
  rep.heads = plan.heads;
  rep.input_dim = plan.input_dim;
  rep.head_dim = plan.head_dim;
  rep.shared_dim = o.compress.rank;
  const index_t full = rep.heads * rep.head_dim;
  if (o.compress.rank < 1 || o.compress.rank > full) {
    throw InvalidArgument("shared dimension " + std::to_string(o.compress.rank) +
                          " is outside [1, " + std::to_string(full) + "] (H d = " +
                          std::to_string(rep.heads) + " x " + std::to_string(rep.head_dim) + ")");
  }

  // Calibration moments of every layer, validated before any work.
  std::vector<InputMoments> moments;
  if (!o.calibration.empty()) {
    const CalibrationFile calib(o.calibration);
    std::vector<std::string> prefixes;
    for (const LayerNames& l : layers) prefixes.push_back(l.prefix);
    calib.check_prefixes(prefixes);
    for (const LayerNames& l : layers)
      moments.push_back(calib.moments(l.prefix, l.index, rep.input_dim));
    rep.calibration_tokens = calib.tokens();
    rep.calibration_source = calib.source();
  }

  // Compress layer by layer; keep the new tensors in the output dtype.
  std::set<std::string> replaced;
  std::map<std::string, std::vector<std::pair<std::string, std::vector<std::byte>>>> inserted;
  std::map<std::string, std::vector<std::vector<index_t>>> inserted_shapes;
  std::map<std::string, std::string> value_dtypes;  // fused layers' value slices keep their dtype
  const std::string out_dtype = o.float64 ? "F64" : "F32";
  // The callback sees each layer's sweeps with the layer's index and the checkpoint's
  // time, then the finished layer; a stop anywhere leaves no checkpoint to write.
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  int running = 0;
  CompressOptions co = o.compress;
  if (o.compress.callback) {
    co.callback = [&](CompressProgress p) {
      p.layer = running;
      p.seconds = elapsed();
      return o.compress.callback(p);
    };
  }
  const auto cancelled = [&](const LayerNames& l) {
    return Cancelled("compressing the checkpoint stopped by its callback at layer " +
                     std::to_string(l.index) + " (" + l.prefix + "): nothing written");
  };
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerNames& l = layers[i];
    running = l.index;
    const QueryKeyLayer<T> layer = load_scored_layer<T>(file, plan, l);
    const CompressResult<T> res = [&] {
      if (moments.empty()) return compress(layer, co);
      try {
        return compress(layer, co, moments[i]);
      } catch (const NumericalError& e) {
        throw NumericalError("layer " + std::to_string(l.index) + " (" + l.prefix +
                             "): " + e.what());
      }
    }();
    if (res.stopped) throw cancelled(l);
    LayerReport lr{l.index,       l.prefix,    res.relative_error, res.data_error,  res.iterations,
                   res.converged, res.seconds, res.params_before,  res.params_after};
    rep.layers.push_back(lr);
    if (o.on_layer) o.on_layer(lr);
    if (o.compress.callback &&
        !o.compress.callback(CompressProgress{l.index, true, o.compress.init, res.iterations,
                                              res.relative_error, elapsed()})) {
      throw cancelled(l);
    }
    for (const std::string& n : {l.query_weight, l.query_bias, l.key_weight, l.key_bias})
      if (!n.empty()) replaced.insert(n);
    const char* suffixes[4] = {"collab.mixing", "collab.query.weight", "collab.key.weight",
                               "collab.content_bias.weight"};
    auto& slot = inserted[l.query_weight];
    auto& shapes = inserted_shapes[l.query_weight];
    const auto add = [&](auto tensors) {
      for (std::size_t i = 0; i < 4; ++i) {
        slot.emplace_back(l.prefix + suffixes[i], as_bytes(tensors[i].first));
        shapes.push_back(tensors[i].second);
      }
    };
    if (o.float64) {
      add(collab_tensors<double>(res.layer));
    } else {
      add(collab_tensors<float>(res.layer));
    }
    if (l.fused_qkv) {
      // The value third of the fused c_attn stays as it was: P + "value.{weight,bias}".
      const index_t dk = rep.heads * rep.head_dim;
      const io::SafetensorsEntry& w = file.at(l.query_weight);
      slot.emplace_back(l.prefix + "value.weight", column_slice(file, l.query_weight, 2 * dk, dk));
      shapes.push_back({w.shape[0], dk});
      value_dtypes[l.prefix + "value.weight"] = w.dtype;
      if (!l.query_bias.empty()) {
        slot.emplace_back(l.prefix + "value.bias", column_slice(file, l.query_bias, 2 * dk, dk));
        shapes.push_back({dk});
        value_dtypes[l.prefix + "value.bias"] = file.at(l.query_bias).dtype;
      }
    }
  }

  // Output: the input's tensors in order, the new ones where each layer's query
  // weight stood, everything else copied bit for bit.
  std::vector<std::vector<std::byte>> kept;
  kept.reserve(file.tensors().size());
  std::vector<io::SafetensorsTensor> out;
  for (const io::SafetensorsEntry& e : file.tensors()) {
    if (is_float_dtype(e.dtype)) rep.total_params_before += numel(e.shape);
    if (auto it = inserted.find(e.name); it != inserted.end()) {
      const auto& shapes = inserted_shapes[e.name];
      for (std::size_t i = 0; i < it->second.size(); ++i) {
        const std::string& name = it->second[i].first;
        const auto v = value_dtypes.find(name);
        out.push_back({name, v == value_dtypes.end() ? out_dtype : v->second, shapes[i],
                       it->second[i].second});
        rep.total_params_after += numel(shapes[i]);
      }
    }
    if (replaced.count(e.name)) continue;
    kept.push_back(file.read_bytes(e.name));
    out.push_back({e.name, e.dtype, e.shape, kept.back()});
    if (is_float_dtype(e.dtype)) rep.total_params_after += numel(e.shape);
  }
  std::map<std::string, std::string> meta = file.metadata();
  nlohmann::json errors = nlohmann::json::array();
  for (const LayerReport& l : rep.layers) errors.push_back(l.relative_error);
  meta["tenfold.shared_dim"] = std::to_string(rep.shared_dim);
  meta["tenfold.heads"] = std::to_string(rep.heads);
  meta["tenfold.head_dim"] = std::to_string(rep.head_dim);
  meta["tenfold.scale_convention"] = "scale folded into mixing and content_bias";
  meta["tenfold.relative_errors"] = errors.dump();
  meta["tenfold.objective"] = moments.empty() ? "weight" : "data";
  if (!moments.empty()) {
    nlohmann::json data_errors = nlohmann::json::array();
    for (const LayerReport& l : rep.layers) data_errors.push_back(*l.data_error);
    meta["tenfold.calibration.relative_errors"] = data_errors.dump();
    meta["tenfold.calibration.file"] = o.calibration.filename().string();
    meta["tenfold.calibration.tokens"] = std::to_string(rep.calibration_tokens);
    meta["tenfold.calibration.source"] = rep.calibration_source;
    meta["tenfold.calibration.damping"] = nlohmann::json(o.compress.damping).dump();
  }
  io::save_safetensors(output, out, meta);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return rep;
}

}  // namespace

CalibrationFile::CalibrationFile(const std::filesystem::path& path) : file_(path) {
  const std::string where = "calibration file '" + path.string() + "'";
  const auto& meta = file_.metadata();
  const auto tokens = meta.find("tenfold.calibration.tokens");
  if (tokens == meta.end()) {
    throw IoError(where + " has no tenfold.calibration.tokens metadata (the token count)");
  }
  std::size_t used = 0;
  try {
    tokens_ = std::stoll(tokens->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != tokens->second.size() || tokens_ < 1) {
    throw IoError(where + ": tenfold.calibration.tokens is '" + tokens->second +
                  "', expected a positive integer");
  }
  if (const auto src = meta.find("tenfold.calibration.source"); src != meta.end()) {
    source_ = src->second;
  }
}

namespace {

bool is_moment_name(const std::string& name, std::string& prefix) {
  for (const char* suffix : {"key_input_moment", "input_moment"}) {
    const std::string s(suffix);
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      prefix = name.substr(0, name.size() - s.size());
      return true;
    }
  }
  return false;
}

}  // namespace

void CalibrationFile::check_prefixes(const std::vector<std::string>& prefixes) const {
  const std::set<std::string> known(prefixes.begin(), prefixes.end());
  for (const io::SafetensorsEntry& e : file_.tensors()) {
    std::string prefix;
    if (!is_moment_name(e.name, prefix) || !known.count(prefix)) {
      throw IoError("calibration tensor '" + e.name +
                    "' belongs to no attention layer of the checkpoint (expected <P>input_moment "
                    "or <P>key_input_moment for a layer prefix P such as '" +
                    prefixes.front() + "')");
    }
  }
  for (const std::string& p : prefixes) {
    if (!file_.find(p + "input_moment")) {
      throw IoError("the calibration file has no '" + p + "input_moment' for that layer");
    }
  }
}

InputMoments CalibrationFile::moments(const std::string& prefix, int layer,
                                      index_t input_dim) const {
  const auto read = [&](const std::string& name) {
    const io::SafetensorsEntry& e = file_.at(name);
    const std::string what =
        "calibration tensor '" + name + "' (layer " + std::to_string(layer) + ")";
    if (e.dtype != "F32" && e.dtype != "F64") {
      throw IoError(what + " has dtype " + e.dtype + ", expected F32 or F64");
    }
    if (e.shape != std::vector<index_t>{input_dim, input_dim}) {
      throw DimensionMismatch(what + " has shape " + shape_text(e.shape) + ", expected (" +
                              std::to_string(input_dim) + ", " + std::to_string(input_dim) + ")");
    }
    Matrix<double> m = file_.read_matrix<double>(name);
    validate_moment(m, input_dim, what,
                    e.dtype == "F32" ? std::numeric_limits<float>::epsilon()
                                     : std::numeric_limits<double>::epsilon());
    return m;
  };
  InputMoments mo;
  mo.query = read(prefix + "input_moment");
  if (file_.find(prefix + "key_input_moment")) mo.key = read(prefix + "key_input_moment");
  return mo;
}

namespace {

// One spelling of an attention layer: `layer` matches the layer prefix P, capturing
// the model prefix and the layer number(s); P is built from them and `middle`.
struct LayerPattern {
  std::string layer;   // regex of P
  std::string middle;  // P = capture 1 + middle with the numbers substituted
  std::string q, k;    // module names of the query and key projections after P
  bool fused = false;
  std::regex query;  // P + q + "weight"
  std::regex any;    // P + (q or k) + ("weight" or "bias")

  static std::string escaped(const std::string& module) {
    std::string out;
    for (const char c : module) out += c == '.' ? std::string(R"(\.)") : std::string(1, c);
    return out;
  }
  LayerPattern(std::string layer_re, std::string mid, std::string q_name, std::string k_name,
               bool is_fused = false)
      : layer(std::move(layer_re)),
        middle(std::move(mid)),
        q(std::move(q_name)),
        k(std::move(k_name)),
        fused(is_fused),
        query(layer + escaped(q) + "weight$"),
        any(layer + "(?:" + escaped(q) + "|" + escaped(k) + ")(?:weight|bias)$") {}
};

const std::vector<LayerPattern>& layer_patterns() {
  static const std::vector<LayerPattern> patterns = {
      {R"(^(.*)encoder\.layer\.(\d+)\.attention\.self\.)", "encoder.layer.#.attention.self.",
       "query.", "key."},
      {R"(^(.*)transformer\.layer\.(\d+)\.attention\.)", "transformer.layer.#.attention.", "q_lin.",
       "k_lin."},
      {R"(^(.*)albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.)",
       "albert_layer_groups.#.albert_layers.#.attention.", "query.", "key."},
      {R"(^(.*)encoder\.layer\.(\d+)\.attention\.attention\.)",
       "encoder.layer.#.attention.attention.", "query.", "key."},
      {R"(^(.*)encoder\.layer\.(\d+)\.attention\.)", "encoder.layer.#.attention.", "q_proj.",
       "k_proj."},
      {R"(^(.*)h\.(\d+)\.attn\.)", "h.#.attn.", "c_attn.", "c_attn.", true},
  };
  return patterns;
}

int layer_number(const std::string& digits, const std::string& tensor) {
  int n = 0;
  const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (err != std::errc() || end != digits.data() + digits.size()) {
    throw IoError("layer index " + digits + " of '" + tensor + "' is too large (at most " +
                  std::to_string(std::numeric_limits<int>::max()) + ")");
  }
  return n;
}

// P of a tensor a pattern matched (m), and the layer number(s) it holds.
std::string layer_prefix(const std::smatch& m, const LayerPattern& p, const std::string& tensor,
                         std::vector<int>& numbers) {
  // P = model prefix + middle with each '#' replaced by the next captured number.
  std::string prefix = m[1].str();
  std::size_t group = 2;
  for (const char c : p.middle) {
    if (c != '#') {
      prefix += c;
      continue;
    }
    prefix += m[group].str();
    numbers.push_back(layer_number(m[group++].str(), tensor));
  }
  return prefix;
}

}  // namespace

std::vector<LayerNames> find_layers(const io::SafetensorsFile& file) {
  std::vector<std::pair<std::vector<int>, LayerNames>> found;
  std::set<std::string> claimed;  // the query/key tensors of the layers found
  const auto optional = [&](const std::string& name) {
    return file.find(name) ? name : std::string();
  };
  for (const io::SafetensorsEntry& e : file.tensors()) {
    for (const LayerPattern& p : layer_patterns()) {
      std::smatch m;
      if (!std::regex_match(e.name, m, p.query)) continue;
      LayerNames l;
      std::vector<int> numbers;
      l.prefix = layer_prefix(m, p, e.name, numbers);
      l.fused_qkv = p.fused;
      l.query_weight = e.name;
      l.key_weight = l.prefix + p.k + "weight";
      if (!file.find(l.key_weight)) {
        throw IoError("layer " + std::to_string(numbers.front()) + " has '" + e.name +
                      "' but no '" + l.key_weight + "'");
      }
      l.query_bias = optional(l.prefix + p.q + "bias");
      l.key_bias = optional(l.prefix + p.k + "bias");
      claimed.insert({l.query_weight, l.key_weight, l.query_bias, l.key_bias});
      found.emplace_back(numbers, std::move(l));
      break;
    }
  }
  // A key weight or a query/key bias without its query weight: that layer would be
  // left as it was, and the output be no collaborative checkpoint.
  for (const io::SafetensorsEntry& e : file.tensors()) {
    if (claimed.count(e.name)) continue;
    for (const LayerPattern& p : layer_patterns()) {
      std::smatch m;
      if (!std::regex_match(e.name, m, p.any)) continue;
      std::vector<int> numbers;
      const std::string prefix = layer_prefix(m, p, e.name, numbers);
      throw IoError("layer " + std::to_string(numbers.front()) + " has '" + e.name + "' but no '" +
                    prefix + p.q + "weight'");
    }
  }
  if (found.empty()) {
    throw IoError(
        "no attention layers found (expected BERT-style '...encoder.layer.<n>."
        "attention.self.query.weight', DistilBERT-style '...transformer.layer.<n>."
        "attention.q_lin.weight', ALBERT-style '...albert_layer_groups.<g>.albert_layers.<i>."
        "attention.query.weight', ViT/DeiT-style '...encoder.layer.<n>.attention.attention."
        "query.weight' or '...encoder.layer.<n>.attention.q_proj.weight', or GPT-2-style "
        "'...h.<n>.attn.c_attn.weight' tensors)");
  }
  // Layer order: by number (ALBERT: group, then layer in the group); ALBERT's layers
  // are numbered in that order, the others keep their own number.
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<LayerNames> layers;
  for (auto& [numbers, l] : found) {
    l.index = numbers.size() == 1 ? numbers.front() : static_cast<int>(layers.size());
    layers.push_back(std::move(l));
  }
  return layers;
}

std::filesystem::path config_path(const std::filesystem::path& checkpoint) {
  return checkpoint.parent_path() / "config.json";
}

namespace {

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

}  // namespace

ModelConfig read_model_config(const std::filesystem::path& checkpoint) {
  const std::filesystem::path config = config_path(checkpoint);
  ModelConfig c;
  std::ifstream in(config);
  if (!in) return c;
  const std::string where = "'" + config.string() + "'";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(where + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) return c;
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

namespace {

// GPT-2's fused c_attn: the row-major (D, 3 H d) Conv1D weight W holds W[i, j] = the
// weight from input i to output j, which is entry (i, j) of the column-major
// D x (H d) matrices the layer takes: the query third is columns [0, H d), the key
// third [H d, 2 H d). The query bias is the first third of the fused bias.
template <class T>
void load_fused(const io::SafetensorsFile& file, const LayerNames& names, index_t d_in, index_t dk,
                QueryKeyLayer<T>& l) {
  const Tensor<T> w = file.read<T>(names.query_weight);  // column-major 3 H d x D
  const std::vector<T>& v = w.values();
  check_finite_tensor(names.query_weight, v, 3 * dk);
  l.query_weight = Matrix<T>(d_in, dk);
  l.key_weight = Matrix<T>(d_in, dk);
  for (index_t i = 0; i < d_in; ++i) {
    for (index_t j = 0; j < dk; ++j) {
      l.query_weight(i, j) = v[static_cast<std::size_t>(i * 3 * dk + j)];
      l.key_weight(i, j) = v[static_cast<std::size_t>(i * 3 * dk + dk + j)];
    }
  }
  if (!names.query_bias.empty()) {
    const std::vector<T> b = file.read<T>(names.query_bias).values();
    check_finite_tensor(names.query_bias, b, 0);
    l.query_bias.assign(b.begin(), b.begin() + dk);
    l.key_bias.assign(b.begin() + dk, b.begin() + 2 * dk);
  }
}

}  // namespace

template <class T>
QueryKeyLayer<T> load_layer(const io::SafetensorsFile& file, const LayerNames& names,
                            index_t heads) {
  const auto [d_in, dk] = check_layer_shapes(file, names, heads);
  QueryKeyLayer<T> l;
  l.heads = heads;
  l.head_dim = dk / heads;
  if (names.fused_qkv) {
    load_fused(file, names, d_in, dk, l);
    l.validate();
    return l;
  }
  // (H d, D) row-major weights are the column-major D x (H d) matrices [W^1 ... W^H].
  l.query_weight = file.read_matrix<T>(names.query_weight);
  l.key_weight = file.read_matrix<T>(names.key_weight);
  check_finite_tensor(names.query_weight, l.query_weight.values(), d_in);
  check_finite_tensor(names.key_weight, l.key_weight.values(), d_in);
  if (!names.query_bias.empty()) {
    l.query_bias = file.read<T>(names.query_bias).values();
    check_finite_tensor(names.query_bias, l.query_bias, 0);
  }
  if (!names.key_bias.empty()) {
    l.key_bias = file.read<T>(names.key_bias).values();
    check_finite_tensor(names.key_bias, l.key_bias, 0);
  }
  l.validate();
  return l;
}

CheckpointReport compress_checkpoint(const std::filesystem::path& input,
                                     const std::filesystem::path& output,
                                     const CheckpointOptions& options) {
  // Every file read is an input, compared by identity (links included).
  std::error_code ec;
  const std::pair<std::filesystem::path, const char*> inputs[] = {
      {input, "the input checkpoint"},
      {config_path(input), "the config.json read beside the input"},
      {options.calibration, "the calibration file"}};
  for (const auto& [path, what] : inputs) {
    if (!path.empty() && std::filesystem::exists(output, ec) &&
        std::filesystem::equivalent(path, output, ec)) {
      throw IoError("output '" + output.string() + "' is " + what + "; choose another output");
    }
  }
  return options.float64 ? compress_typed<double>(input, output, options)
                         : compress_typed<float>(input, output, options);
}

std::vector<LayerRedundancy> analyze_checkpoint(
    const std::filesystem::path& input, index_t heads,
    const std::function<bool(const LayerRedundancy&)>& progress) {
  const io::SafetensorsFile file(input);
  const Plan plan = plan_checkpoint(file, input, heads);
  std::vector<LayerRedundancy> out;
  for (const LayerNames& l : plan.layers) {
    out.push_back({l.index, l.prefix, redundancy(load_scored_layer<double>(file, plan, l))});
    if (progress && !progress(out.back())) {
      throw Cancelled("analysing the checkpoint stopped by its callback after layer " +
                      std::to_string(l.index) + " (" + l.prefix + ")");
    }
  }
  return out;
}

namespace {

/// Rotary model types the conversion supports, and those it refuses with the reason.
const std::vector<std::string> rotary_families = {"llama", "qwen2", "mistral"};
const std::vector<std::string> qk_norm_families = {"qwen3", "qwen3_moe", "qwen3_next",  "olmo2",
                                                   "olmoe", "gemma3",    "gemma3_text", "cohere2"};

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

double config_number(const nlohmann::json& j, const std::string& where, const char* key,
                     double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number() || !std::isfinite(j[key].get<double>()) || j[key].get<double>() <= 0) {
    throw IoError(where + ": " + key + " is " + j[key].dump() + ", not a positive number");
  }
  return j[key].get<double>();
}

}  // namespace

bool is_rotary_checkpoint(const std::filesystem::path& checkpoint) {
  const nlohmann::json j = read_config_json(checkpoint);
  if (!j.contains("model_type") || !j["model_type"].is_string()) return false;
  const std::string type = j["model_type"].get<std::string>();
  const std::string where = "'" + config_path(checkpoint).string() + "'";
  const auto in = [&](const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), type) != v.end();
  };
  if (in(rotary_families)) return true;
  if (in(qk_norm_families)) {
    throw IoError(where + ": model_type " + type +
                  " normalises every query and key head (q_norm, k_norm: an RMSNorm) before the "
                  "rotation, so a key is not a linear function of the token and no shared linear "
                  "key projection reproduces it; rotary conversion supports llama, qwen2, mistral");
  }
  if (j.contains("rope_theta") || j.contains("rope_scaling") || j.contains("rope_parameters")) {
    throw IoError(where + ": rotary model_type " + type +
                  " is not supported; rotary conversion supports llama, qwen2, mistral");
  }
  return false;
}

RotaryConfig read_rotary_config(const std::filesystem::path& checkpoint) {
  const nlohmann::json j = read_config_json(checkpoint);
  const std::string where = "'" + config_path(checkpoint).string() + "'";
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
    l.index = layer_number(m[2], e.name);
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
  RotaryLayer<T> l;
  l.heads = c.heads;
  l.key_heads = c.key_heads;
  l.head_dim = c.head_dim;
  const std::string q = n.prefix + "q_proj.", k = n.prefix + "k_proj.";
  for (const auto& [name, rows] : {std::pair{q + "weight", c.heads * c.head_dim},
                                   std::pair{k + "weight", c.key_heads * c.head_dim}}) {
    const io::SafetensorsEntry& e = file.at(name);
    if (e.shape != std::vector<index_t>{rows, c.hidden_size}) {
      throw DimensionMismatch("'" + name + "' has shape " + shape_text(e.shape) + ", expected (" +
                              std::to_string(rows) + ", " + std::to_string(c.hidden_size) +
                              ") from config.json");
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
  return as_bytes(v);
}

}  // namespace

RotaryCheckpointReport compress_rotary_checkpoint(
    const std::filesystem::path& input, const std::filesystem::path& output,
    const RotaryCheckpointOptions& o,
    const std::function<void(const RotaryLayerReport&)>& on_layer) {
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  for (const auto& [path, what] :
       {std::pair{input, "the input checkpoint"},
        std::pair{config_path(input), "the config.json beside the input"},
        std::pair{o.calibration, "the calibration file"}}) {
    if (!path.empty() && std::filesystem::exists(output, ec) &&
        std::filesystem::equivalent(path, output, ec)) {
      throw IoError("output '" + output.string() + "' is " + what + "; choose another output");
    }
  }
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
  if (ro.bands < 2 || half % ro.bands) {
    throw InvalidArgument("bands must be a divisor of the " + std::to_string(half) +
                          " frequency pairs of a head and at least 2 (bands 1, complex "
                          "per-frequency keys, is tenfold.torch's), got " +
                          std::to_string(ro.bands));
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
    std::vector<std::string> prefixes;
    for (const RotaryNames& l : layers) prefixes.push_back(l.prefix);
    calib.check_prefixes(prefixes);
    const io::SafetensorsFile raw(o.calibration);
    for (const RotaryNames& l : layers) {
      const auto& shape = raw.at(l.prefix + "input_moment").shape;
      if (biased && shape == std::vector<index_t>{c.hidden_size, c.hidden_size}) {
        throw IoError("calibration tensor '" + l.prefix + "input_moment' is " + shape_text(shape) +
                      "; the layers have query/key biases, so the rotary objective needs the "
                      "moment of [x; 1], (" +
                      std::to_string(dim) + ", " + std::to_string(dim) +
                      ") (tenfold.torch.write_calibration writes it)");
      }
      moments.push_back(calib.moments(l.prefix, l.index, dim));
    }
    rep.calibration_tokens = calib.tokens();
    rep.calibration_source = calib.source();
  }

  const std::string out_dtype = o.float64 ? "F64" : "F32";
  std::set<std::string> replaced;
  std::map<std::string, std::vector<io::SafetensorsTensor>> inserted;
  std::vector<std::vector<std::byte>> buffers;
  buffers.reserve(5 * layers.size());
  nlohmann::json sizes = nlohmann::json::array(), errors = nlohmann::json::array(),
                 data_errors = nlohmann::json::array();
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
      keys = rotary_band_keys(layer, ro, moments.empty() ? nullptr : &moments[i]);
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

    const index_t cv = keys.key_values(), gd = c.key_heads * c.head_dim;
    auto& slot = inserted[n.prefix + "k_proj.weight"];
    const auto add = [&](const std::string& name, const std::string& dtype,
                         std::vector<index_t> shape, std::vector<std::byte> bytes) {
      buffers.push_back(std::move(bytes));
      slot.push_back({n.prefix + name, dtype, std::move(shape), buffers.back()});
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
    add("expand", out_dtype, {gd, cv}, matrix(keys.expand, gd, false));
    add("inv_freq", "F32", {half}, as_bytes(inv_freq));
    add("attention_scaling", "F32", {}, as_bytes(std::vector<float>{one}));
    replaced.insert(n.prefix + "k_proj.weight");
    if (n.key_bias) replaced.insert(n.prefix + "k_proj.bias");
  }

  // Output: the input's tensors in order, the new ones where each k_proj.weight stood.
  std::vector<std::vector<std::byte>> kept;
  kept.reserve(file.tensors().size());
  std::vector<io::SafetensorsTensor> out;
  for (const io::SafetensorsEntry& e : file.tensors()) {
    if (is_float_dtype(e.dtype)) rep.total_params_before += numel(e.shape);
    if (auto it = inserted.find(e.name); it != inserted.end()) {
      for (const io::SafetensorsTensor& t : it->second) {
        out.push_back(t);
        rep.total_params_after += numel(t.shape);
      }
    }
    if (replaced.count(e.name)) continue;
    kept.push_back(file.read_bytes(e.name));
    out.push_back({e.name, e.dtype, e.shape, kept.back()});
    if (is_float_dtype(e.dtype)) rep.total_params_after += numel(e.shape);
  }
  std::map<std::string, std::string> meta = file.metadata();
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
  meta["tenfold.relative_errors"] = errors.dump();
  meta["tenfold.objective"] = moments.empty() ? "weight" : "data";
  if (!moments.empty()) {
    meta["tenfold.calibration.relative_errors"] = data_errors.dump();
    meta["tenfold.calibration.file"] = o.calibration.filename().string();
    meta["tenfold.calibration.tokens"] = std::to_string(rep.calibration_tokens);
    meta["tenfold.calibration.source"] = rep.calibration_source;
    meta["tenfold.calibration.damping"] = nlohmann::json(ro.damping).dump();
  }
  io::save_safetensors(output, out, meta);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return rep;
}

template QueryKeyLayer<float> load_layer<float>(const io::SafetensorsFile&, const LayerNames&,
                                                index_t);
template QueryKeyLayer<double> load_layer<double>(const io::SafetensorsFile&, const LayerNames&,
                                                  index_t);

}  // namespace tenfold::attention
