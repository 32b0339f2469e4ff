// The parts the checkpoint conversions (tenfold/attention_checkpoint.hpp) are built
// from, private to the library and its tests: the names of a checkpoint's attention
// layers and how one layer is loaded and checked (checkpoint_layers.cpp), what the
// config.json beside a checkpoint says (model_config.cpp), and the calibration
// statistics file of data-aware compression (calibration_file.cpp). The detail
// namespace holds the small checks these files and the conversions share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tenfold/attention.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/safetensors.hpp"

namespace tenfold::attention {

/// Tensor names of one layer's query/key side. `prefix` is the attention prefix P
/// (BERT: "...encoder.layer.<n>.attention.self.", DistilBERT:
/// "...transformer.layer.<n>.attention.", ALBERT:
/// "...albert_layer_groups.<g>.albert_layers.<i>.attention.", ViT/DeiT:
/// "...encoder.layer.<n>.attention.attention." or, with q_proj/k_proj names,
/// "...encoder.layer.<n>.attention.", GPT-2: "...h.<n>.attn."); biases are empty
/// names when absent. `fused_qkv` (GPT-2): query_weight = key_weight names one Conv1D
/// weight of shape (in, 3 out) holding [q | k | v], query_bias = key_bias its bias.
struct LayerNames {
  int index = 0;
  std::string prefix;
  std::string query_weight, query_bias, key_weight, key_bias;
  bool fused_qkv = false;
};

/// The attention layers of a checkpoint, by layer index. Throws IoError when none
/// is found or a layer misses its query or key weight (also when a layer has a key
/// weight or a query/key bias but no query weight).
std::vector<LayerNames> find_layers(const io::SafetensorsFile& file);

/// What the checkpoint functions take from the config.json beside a checkpoint.
struct ModelConfig {
  index_t heads = 0;        ///< num_attention_heads = n_heads = n_head (0: none given)
  index_t hidden_size = 0;  ///< hidden_size = n_embd = dim (0: none given)
  /// GPT-2 (fused c_attn layers only): scores divided by sqrt(d) (false: not scaled),
  /// and also by layer index + 1.
  bool scale_attn_weights = true;
  bool scale_attn_by_inverse_layer_idx = false;
};

/// Reads config_path(checkpoint); the defaults when there is no such file. Throws
/// IoError naming the file and the keys on malformed JSON, a value of the wrong type,
/// or two spellings of the same setting that disagree (num_attention_heads 4, n_head 8).
ModelConfig read_model_config(const std::filesystem::path& checkpoint);

/// Head count from the config.json beside `checkpoint` (read_model_config); 0 when
/// there is no such file or key.
index_t heads_from_config(const std::filesystem::path& checkpoint);

/// Reads and checks the rotary config beside `checkpoint`: refuses partial rotary
/// embeddings, RoPE types other than default and linear (length-dependent ones:
/// dynamic, longrope; and llama3 / yarn, which the program does not compute), naming
/// the key and the reason.
RotaryConfig read_rotary_config(const std::filesystem::path& checkpoint);

/// Loads one layer; throws IoError / DimensionMismatch when shapes disagree or
/// `heads` does not divide the query width, InvalidArgument naming the tensor and
/// its index as stored ([row, column] of the (out x in) weight) for a NaN or Inf.
template <class T>
QueryKeyLayer<T> load_layer(const io::SafetensorsFile& file, const LayerNames& names,
                            index_t heads);

/// A calibration statistics file: safetensors holding, for each attention layer with
/// prefix P, P + "input_moment" (D x D, F32 or F64): the mean of x x^T over the
/// calibration tokens the layer's queries see (padding excluded), and optionally
/// P + "key_input_moment" when its keys see other tokens; metadata
/// "tenfold.calibration.tokens" (the token count, a positive integer) and optionally
/// "tenfold.calibration.source" (free text).
class CalibrationFile {
 public:
  /// Opens the file and checks its metadata. Throws IoError naming the problem.
  explicit CalibrationFile(const std::filesystem::path& path);

  std::int64_t tokens() const { return tokens_; }
  const std::string& source() const { return source_; }
  /// Throws IoError naming the first moment whose prefix is not in `prefixes`, or the
  /// first prefix without an input moment.
  void check_prefixes(const std::vector<std::string>& prefixes) const;
  /// The layer's moments, validated (D x D, finite, symmetric and positive
  /// semi-definite to the round-off of the stored dtype): IoError / InvalidArgument
  /// naming the tensor and `layer`.
  InputMoments moments(const std::string& prefix, int layer, index_t input_dim) const;
  /// check_prefixes of the layers' prefixes, `check` (when given) of each layer's
  /// prefix and stored moment shape, then moments() of each layer (prefix, index), in
  /// order.
  std::vector<InputMoments> layer_moments(
      const std::vector<std::pair<std::string, int>>& layers, index_t input_dim,
      const std::function<void(const std::string&, const std::vector<index_t>&)>& check = {}) const;

 private:
  io::SafetensorsFile file_;
  std::int64_t tokens_ = 0;
  std::string source_;
};

namespace detail {

/// The safetensors dtypes counted as weights (parameters) and accepted as layers.
inline bool is_float_dtype(const std::string& dtype) {
  return dtype == "F64" || dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

/// "(a, b, c)", for messages.
inline std::string shape_text(const std::vector<index_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

/// The layer number `digits` of tensor `tensor`; IoError when it does not fit an int.
int layer_number(const std::string& digits, const std::string& tensor);

/// Checks the shapes of a layer's tensors against each other and the head count,
/// from the header alone; returns {D, H d}.
std::pair<index_t, index_t> check_layer_shapes(const io::SafetensorsFile& file,
                                               const LayerNames& names, index_t heads);

/// Throws naming the tensor and the index of its first non-finite entry as the file
/// shows it: [k] for a bias, [row, column] of the stored (out x in) weight, whose
/// memory is the column-major in x out matrix (`in` = its rows; 0 for a bias).
template <class T>
void check_finite_tensor(const std::string& name, const std::vector<T>& values, index_t in);

}  // namespace detail
}  // namespace tenfold::attention
