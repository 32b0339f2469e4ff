// Collaborative-form checkpoints: compress_checkpoint plans a checkpoint (its layers,
// head count and widths, validated from the header and config.json before any work),
// compresses every layer's query/key side at the layer's own score scale, optionally
// against calibration moments, and hands the collaborative tensors (and a fused GPT-2
// layer's value third, bit for bit) to the checkpoint writer; analyze_checkpoint gives
// the redundancy curves of the same layers. Layer finding and loading are in
// checkpoint_layers.cpp, the config in model_config.cpp, the output in checkpoint_writer.cpp.
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "attention/checkpoint_parts.hpp"
#include "attention/checkpoint_writer.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

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
    const auto [d_in, dk] = detail::check_layer_shapes(file, l, p.heads);
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
CheckpointReport compress_typed(const std::filesystem::path& input, const CheckpointOptions& o,
                                detail::CheckpointWriter& writer) {
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
    std::vector<std::pair<std::string, int>> names;
    for (const LayerNames& l : layers) names.emplace_back(l.prefix, l.index);
    moments = calib.layer_moments(names, rep.input_dim);
    rep.calibration_tokens = calib.tokens();
    rep.calibration_source = calib.source();
  }

  // Compress layer by layer; keep the new tensors in the output dtype.
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
    // The new tensors stand where the layer's query weight stood.
    for (const std::string& n : {l.query_weight, l.query_bias, l.key_weight, l.key_bias})
      if (!n.empty()) writer.replace(n);
    const char* suffixes[4] = {"collab.mixing", "collab.query.weight", "collab.key.weight",
                               "collab.content_bias.weight"};
    const auto add = [&](auto tensors) {
      for (std::size_t i = 0; i < 4; ++i) {
        writer.insert(l.query_weight, l.prefix + suffixes[i], out_dtype, tensors[i].second,
                      detail::as_bytes(tensors[i].first));
      }
    };
    if (o.float64) {
      add(collab_tensors<double>(res.layer));
    } else {
      add(collab_tensors<float>(res.layer));
    }
    if (l.fused_qkv) {
      // The value third of the fused c_attn stays as it was: P + "value.{weight,bias}",
      // in its own dtype.
      const index_t dk = rep.heads * rep.head_dim;
      const io::SafetensorsEntry& w = file.at(l.query_weight);
      writer.insert(l.query_weight, l.prefix + "value.weight", w.dtype, {w.shape[0], dk},
                    column_slice(file, l.query_weight, 2 * dk, dk));
      if (!l.query_bias.empty()) {
        writer.insert(l.query_weight, l.prefix + "value.bias", file.at(l.query_bias).dtype, {dk},
                      column_slice(file, l.query_bias, 2 * dk, dk));
      }
    }
  }

  std::map<std::string, std::string> meta;
  meta["tenfold.shared_dim"] = std::to_string(rep.shared_dim);
  meta["tenfold.heads"] = std::to_string(rep.heads);
  meta["tenfold.head_dim"] = std::to_string(rep.head_dim);
  meta["tenfold.scale_convention"] = "scale folded into mixing and content_bias";
  std::vector<double> errors;
  for (const LayerReport& l : rep.layers) errors.push_back(l.relative_error);
  detail::CalibrationRecord calibration{
      o.calibration, rep.calibration_tokens, rep.calibration_source, o.compress.damping, {}};
  if (!moments.empty())
    for (const LayerReport& l : rep.layers) calibration.data_errors.push_back(*l.data_error);
  writer.write(rep, start, file, meta, errors, moments.empty() ? nullptr : &calibration);
  return rep;
}

}  // namespace

CheckpointReport compress_checkpoint(const std::filesystem::path& input,
                                     const std::filesystem::path& output,
                                     const CheckpointOptions& options) {
  detail::CheckpointWriter writer(output,
                                  {{input, "the input checkpoint"},
                                   {config_path(input), "the config.json read beside the input"},
                                   {options.calibration, "the calibration file"}});
  return options.float64 ? compress_typed<double>(input, options, writer)
                         : compress_typed<float>(input, options, writer);
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

}  // namespace tenfold::attention
