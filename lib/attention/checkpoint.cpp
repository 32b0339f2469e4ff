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

// Checks the shapes of a layer's tensors against each other and the head count,
// from the header alone; returns {D, H d}.
std::pair<index_t, index_t> check_layer_shapes(const io::SafetensorsFile& file,
                                               const LayerNames& names, index_t heads) {
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
  if (heads < 1 || dk % heads != 0) {
    throw DimensionMismatch("query width " + std::to_string(dk) + " of '" + q.name +
                            "' is not divisible by " + std::to_string(heads) + " heads");
  }
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
  const std::string out_dtype = o.float64 ? "F64" : "F32";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerNames& l = layers[i];
    const QueryKeyLayer<T> layer = load_layer<T>(file, l, rep.heads);
    const CompressResult<T> res = [&] {
      if (moments.empty()) return compress(layer, o.compress);
      try {
        return compress(layer, o.compress, moments[i]);
      } catch (const NumericalError& e) {
        throw NumericalError("layer " + std::to_string(l.index) + " (" + l.prefix +
                             "): " + e.what());
      }
    }();
    LayerReport lr{l.index,       l.prefix,    res.relative_error, res.data_error,  res.iterations,
                   res.converged, res.seconds, res.params_before,  res.params_after};
    rep.layers.push_back(lr);
    if (o.on_layer) o.on_layer(lr);
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
        out.push_back({it->second[i].first, out_dtype, shapes[i], it->second[i].second});
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

std::vector<LayerNames> find_layers(const io::SafetensorsFile& file) {
  static const std::regex bert(R"(^(.*)encoder\.layer\.(\d+)\.attention\.self\.query\.weight$)");
  static const std::regex distil(R"(^(.*)transformer\.layer\.(\d+)\.attention\.q_lin\.weight$)");
  std::vector<LayerNames> layers;
  const auto optional = [&](const std::string& name) {
    return file.find(name) ? name : std::string();
  };
  for (const io::SafetensorsEntry& e : file.tensors()) {
    std::smatch m;
    LayerNames l;
    std::string q, k;
    if (std::regex_match(e.name, m, bert)) {
      l.prefix = m[1].str() + "encoder.layer." + m[2].str() + ".attention.self.";
      q = "query.";
      k = "key.";
    } else if (std::regex_match(e.name, m, distil)) {
      l.prefix = m[1].str() + "transformer.layer." + m[2].str() + ".attention.";
      q = "q_lin.";
      k = "k_lin.";
    } else {
      continue;
    }
    const std::string digits = m[2].str();
    const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), l.index);
    if (err != std::errc() || end != digits.data() + digits.size()) {
      throw IoError("layer index " + digits + " of '" + e.name + "' is too large (at most " +
                    std::to_string(std::numeric_limits<int>::max()) + ")");
    }
    l.query_weight = e.name;
    l.key_weight = l.prefix + k + "weight";
    if (!file.find(l.key_weight)) {
      throw IoError("layer " + std::to_string(l.index) + " has '" + e.name + "' but no '" +
                    l.key_weight + "'");
    }
    l.query_bias = optional(l.prefix + q + "bias");
    l.key_bias = optional(l.prefix + k + "bias");
    layers.push_back(std::move(l));
  }
  if (layers.empty()) {
    throw IoError(
        "no attention layers found (expected BERT-style '...encoder.layer.<n>."
        "attention.self.query.weight' or DistilBERT-style '...transformer.layer.<n>."
        "attention.q_lin.weight' tensors)");
  }
  std::stable_sort(layers.begin(), layers.end(),
                   [](const LayerNames& a, const LayerNames& b) { return a.index < b.index; });
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
  for (const char* key : {"num_attention_heads", "n_heads"}) {
    if (!j.is_object() || !j.contains(key)) continue;
    const auto& v = j[key];
    if (!v.is_number_integer() || v.get<long long>() < 1) {
      throw IoError("'" + config.string() + "': " + key + " is not a positive integer");
    }
    return static_cast<index_t>(v.get<long long>());
  }
  return 0;
}

template <class T>
QueryKeyLayer<T> load_layer(const io::SafetensorsFile& file, const LayerNames& names,
                            index_t heads) {
  const auto [d_in, dk] = check_layer_shapes(file, names, heads);
  QueryKeyLayer<T> l;
  l.heads = heads;
  l.head_dim = dk / heads;
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

std::vector<LayerRedundancy> analyze_checkpoint(const std::filesystem::path& input, index_t heads) {
  const io::SafetensorsFile file(input);
  const std::vector<LayerNames> layers = find_layers(file);
  heads = resolve_heads(input, heads);
  std::vector<LayerRedundancy> out;
  for (const LayerNames& l : layers) {
    out.push_back({l.index, l.prefix, redundancy(load_layer<double>(file, l, heads))});
  }
  return out;
}

template QueryKeyLayer<float> load_layer<float>(const io::SafetensorsFile&, const LayerNames&,
                                                index_t);
template QueryKeyLayer<double> load_layer<double>(const io::SafetensorsFile&, const LayerNames&,
                                                  index_t);

}  // namespace tenfold::attention
