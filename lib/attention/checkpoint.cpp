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

index_t resolve_heads(const std::filesystem::path& input, index_t heads) {
  if (heads < 0) throw InvalidArgument("heads must be >= 1, got " + std::to_string(heads));
  const index_t configured = heads_from_config(input);
  if (heads > 0 && configured > 0 && heads != configured) {
    throw InvalidArgument("heads = " + std::to_string(heads) + " disagrees with the " +
                          std::to_string(configured) + " attention heads of '" +
                          (input.parent_path() / "config.json").string() +
                          "'; give the model's head count, or leave it out to use the config");
  }
  if (heads == 0) heads = configured;
  if (heads == 0) {
    throw InvalidArgument(
        "the head count is unknown: pass --heads, or put a config.json with "
        "num_attention_heads (or n_heads) beside '" +
        input.string() + "'");
  }
  return heads;
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
  const std::vector<LayerNames> layers = find_layers(file);
  CheckpointReport rep;
  rep.heads = resolve_heads(input, o.heads);
  rep.shared_dim = o.compress.rank;
  // Validate every layer from the header before any work.
  for (const LayerNames& l : layers) {
    const auto [d_in, dk] = check_layer_shapes(file, l, rep.heads);
    if (rep.input_dim == 0) {
      rep.input_dim = d_in;
      rep.head_dim = dk / rep.heads;
    } else if (d_in != rep.input_dim || dk != rep.heads * rep.head_dim) {
      throw DimensionMismatch("layer " + std::to_string(l.index) +
                              " has a different width than layer " +
                              std::to_string(layers.front().index));
    }
  }
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
    const QueryKeyLayer<T> layer = load_layer<T>(file, l, rep.heads);
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

// One spelling of an attention layer's query weight: the regex captures the model
// prefix and the layer number(s); the layer prefix P is built from them.
struct LayerPattern {
  std::regex query;
  std::string middle;  // P = capture 1 + middle with the numbers substituted
  std::string q, k;    // module names of the query and key projections after P
  bool fused = false;
};

const std::vector<LayerPattern>& layer_patterns() {
  static const std::vector<LayerPattern> patterns = {
      {std::regex(R"(^(.*)encoder\.layer\.(\d+)\.attention\.self\.query\.weight$)"),
       "encoder.layer.#.attention.self.", "query.", "key."},
      {std::regex(R"(^(.*)transformer\.layer\.(\d+)\.attention\.q_lin\.weight$)"),
       "transformer.layer.#.attention.", "q_lin.", "k_lin."},
      {std::regex(
           R"(^(.*)albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.query\.weight$)"),
       "albert_layer_groups.#.albert_layers.#.attention.", "query.", "key."},
      {std::regex(R"(^(.*)encoder\.layer\.(\d+)\.attention\.attention\.query\.weight$)"),
       "encoder.layer.#.attention.attention.", "query.", "key."},
      {std::regex(R"(^(.*)encoder\.layer\.(\d+)\.attention\.q_proj\.weight$)"),
       "encoder.layer.#.attention.", "q_proj.", "k_proj."},
      {std::regex(R"(^(.*)h\.(\d+)\.attn\.c_attn\.weight$)"), "h.#.attn.", "c_attn.", "c_attn.",
       true},
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

}  // namespace

std::vector<LayerNames> find_layers(const io::SafetensorsFile& file) {
  std::vector<std::pair<std::vector<int>, LayerNames>> found;
  const auto optional = [&](const std::string& name) {
    return file.find(name) ? name : std::string();
  };
  for (const io::SafetensorsEntry& e : file.tensors()) {
    for (const LayerPattern& p : layer_patterns()) {
      std::smatch m;
      if (!std::regex_match(e.name, m, p.query)) continue;
      // P = model prefix + middle with each '#' replaced by the next captured number.
      LayerNames l;
      std::vector<int> numbers;
      l.prefix = m[1].str();
      std::size_t group = 2;
      for (const char c : p.middle) {
        if (c != '#') {
          l.prefix += c;
          continue;
        }
        l.prefix += m[group].str();
        numbers.push_back(layer_number(m[group++].str(), e.name));
      }
      l.fused_qkv = p.fused;
      l.query_weight = e.name;
      l.key_weight = l.prefix + p.k + "weight";
      if (!file.find(l.key_weight)) {
        throw IoError("layer " + std::to_string(numbers.front()) + " has '" + e.name +
                      "' but no '" + l.key_weight + "'");
      }
      l.query_bias = optional(l.prefix + p.q + "bias");
      l.key_bias = optional(l.prefix + p.k + "bias");
      found.emplace_back(numbers, std::move(l));
      break;
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

index_t heads_from_config(const std::filesystem::path& checkpoint) {
  const std::filesystem::path config = checkpoint.parent_path() / "config.json";
  std::ifstream in(config);
  if (!in) return 0;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw IoError("'" + config.string() + "' is not valid JSON: " + e.what());
  }
  for (const char* key : {"num_attention_heads", "n_heads", "n_head"}) {
    if (!j.is_object() || !j.contains(key)) continue;
    const auto& v = j[key];
    if (!v.is_number_integer() || v.get<long long>() < 1) {
      throw IoError("'" + config.string() + "': " + key + " is not a positive integer");
    }
    return static_cast<index_t>(v.get<long long>());
  }
  return 0;
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
  std::error_code ec;
  if (std::filesystem::exists(output, ec) && std::filesystem::equivalent(input, output, ec)) {
    throw IoError("output '" + output.string() + "' is the input checkpoint");
  }
  return options.float64 ? compress_typed<double>(input, output, options)
                         : compress_typed<float>(input, output, options);
}

std::vector<LayerRedundancy> analyze_checkpoint(
    const std::filesystem::path& input, index_t heads,
    const std::function<bool(const LayerRedundancy&)>& progress) {
  const io::SafetensorsFile file(input);
  const std::vector<LayerNames> layers = find_layers(file);
  heads = resolve_heads(input, heads);
  std::vector<LayerRedundancy> out;
  for (const LayerNames& l : layers) {
    out.push_back({l.index, l.prefix, redundancy(load_layer<double>(file, l, heads))});
    if (progress && !progress(out.back())) {
      throw Cancelled("analysing the checkpoint stopped by its callback after layer " +
                      std::to_string(l.index) + " (" + l.prefix + ")");
    }
  }
  return out;
}

template QueryKeyLayer<float> load_layer<float>(const io::SafetensorsFile&, const LayerNames&,
                                                index_t);
template QueryKeyLayer<double> load_layer<double>(const io::SafetensorsFile&, const LayerNames&,
                                                  index_t);

}  // namespace tenfold::attention
