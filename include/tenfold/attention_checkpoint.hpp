// Checkpoint-level attention compression: finds the query/key side of every
// attention layer in a BERT-family (BERT, RoBERTa, MiniLM), DistilBERT, ALBERT,
// ViT/DeiT or GPT-2 safetensors checkpoint, compresses each into collaborative form, and writes a
// checkpoint where everything else is copied through bit for bit; and rotary checkpoints
// (Llama, Qwen2, Mistral) into band latents. This header holds what a user calls; the
// parts the conversions are built from (layer finding and loading, the config.json and
// calibration file readers) are private to the library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tenfold/attention.hpp"
#include "tenfold/export.hpp"

namespace tenfold::attention {

/// The config.json the checkpoint functions read: the one beside `checkpoint`.
TENFOLD_API std::filesystem::path config_path(const std::filesystem::path& checkpoint);

/// What happened to one layer.
struct TENFOLD_API LayerReport {
  int index = 0;
  std::string prefix;
  double relative_error = 0.0;  ///< weight space, ||T - T~|| / ||T||
  /// Data-aware compression only: the data-space error under the calibration moments.
  std::optional<double> data_error;
  int iterations = 0;
  bool converged = false;
  double seconds = 0.0;
  index_t params_before = 0;
  index_t params_after = 0;
};

/// Options of compress_checkpoint.
struct TENFOLD_API CheckpointOptions {
  /// rank = shared dimension R. Its callback sees every layer's ALS sweeps and each
  /// finished layer (CompressProgress::layer, layer_done); a false throws Cancelled
  /// and nothing is written.
  CompressOptions compress;
  /// 0: from config.json beside the input; a head count that disagrees with that
  /// file is refused (InvalidArgument).
  index_t heads = 0;
  bool float64 = false;  ///< compute and write the new tensors in float64 (else float32)
  /// Calibration statistics for data-aware compression with compress.damping: a
  /// safetensors file with P + "input_moment" (D x D, the mean of x x^T over the tokens
  /// the layer with prefix P sees), optionally P + "key_input_moment", and metadata
  /// tenfold.calibration.tokens (docs/attention.md); empty: the weight-space objective.
  std::filesystem::path calibration;
  /// Called after each layer (progress).
  std::function<void(const LayerReport&)> on_layer;
};

/// Result of compress_checkpoint.
struct TENFOLD_API CheckpointReport {
  index_t heads = 0, head_dim = 0, input_dim = 0, shared_dim = 0;
  std::vector<LayerReport> layers;
  double seconds = 0.0;
  index_t total_params_before = 0;  ///< every floating-point element of the input
  index_t total_params_after = 0;
  std::int64_t calibration_tokens = 0;  ///< data-aware only (0 otherwise)
  std::string calibration_source;       ///< data-aware only
};

/// Compresses every attention layer of `input` and writes `output` atomically. For
/// each layer with prefix P, the query/key weights and biases are replaced by
/// P + "collab.mixing" (H x R), P + "collab.query.weight" (R x D),
/// P + "collab.key.weight" (R x D) and P + "collab.content_bias.weight" (H x D); a
/// fused GPT-2 c_attn is replaced by those and its value third, P + "value.weight"
/// (D, H d) in the same Conv1D (in, out) layout and P + "value.bias", bit for bit;
/// the header metadata records shared_dim, heads, head_dim, the scale convention, the
/// objective and the per-layer errors (tenfold.relative_errors: weight space;
/// data-aware, with tenfold.calibration.{file,tokens,source,damping}:
/// tenfold.calibration.relative_errors, data space). The layer's own score scale is
/// what is folded: 1/sqrt(d), or for GPT-2 what its config.json says
/// (scale_attn_weights, scale_attn_by_inverse_layer_idx). config.json's
/// hidden_size must be the layers' input width. Everything is validated before
/// anything is written; the inputs (checkpoint, config.json, calibration file) are
/// never modified, and `output` may be none of them. Throws IoError / InvalidArgument
/// naming the problem.
TENFOLD_API CheckpointReport compress_checkpoint(const std::filesystem::path& input,
                                                 const std::filesystem::path& output,
                                                 const CheckpointOptions& options);

/// Redundancy curves of every layer (heads as in CheckpointOptions::heads).
struct TENFOLD_API LayerRedundancy {
  int index = 0;
  std::string prefix;
  Redundancy redundancy;
};
/// `progress`, when given, is called after each layer's curves (each costs three
/// D x D eigensolvers); a false throws Cancelled.
TENFOLD_API std::vector<LayerRedundancy> analyze_checkpoint(
    const std::filesystem::path& input, index_t heads,
    const std::function<bool(const LayerRedundancy&)>& progress = {});

// ---------------------------------------------------------------------------
// Rotary checkpoints (Llama, Qwen2, Mistral): band latents (rotary_band_keys) for
// every layer, written so that tenfold.torch.load_compressed loads them.

/// What the config.json beside a rotary checkpoint says.
struct TENFOLD_API RotaryConfig {
  std::string family;       ///< model_type: "llama", "qwen2" or "mistral"
  index_t heads = 0;        ///< num_attention_heads
  index_t key_heads = 0;    ///< num_key_value_heads (default: heads)
  index_t head_dim = 0;     ///< head_dim (default: hidden_size / heads)
  index_t hidden_size = 0;  ///< hidden_size
  std::string rope_type;    ///< "default" or "linear"
  /// theta_j = 1 / rope_theta^(2 j / d) (divided by the linear factor), in float32
  /// arithmetic as transformers computes its inv_freq, then widened.
  std::vector<double> inv_freq;
};

/// The model families (config model_type) whose rotary attention converts, each with
/// the name of its attention class in transformers, and the rotary families refused
/// because they normalise queries and keys per head (QK-norm). One list for the
/// program and tenfold.torch.
struct TENFOLD_API RotaryFamilies {
  std::vector<std::pair<std::string, std::string>> converted;  ///< model_type, attention class
  std::vector<std::string> qk_norm;
};
TENFOLD_API const RotaryFamilies& rotary_families();

/// The model_type of the config.json beside `checkpoint` ("" when there is none):
/// true for the rotary families above. Throws IoError in one line, naming the reason,
/// for rotary models this conversion refuses: QK-norm families (Qwen3, OLMo 2, Gemma 3,
/// ...), other rotary model types.
TENFOLD_API bool is_rotary_checkpoint(const std::filesystem::path& checkpoint);

/// Options of compress_rotary_checkpoint.
struct TENFOLD_API RotaryCheckpointOptions {
  /// bands, key_values (0: full), context, damping; inv_freq is taken from the config.
  RotaryOptions rotary;
  bool float64 = false;  ///< write the new tensors in float64 (else float32)
  /// The latent value cache (value_latent, include/tenfold/kv_cache.hpp): C_v latent values
  /// per token and layer (1 ... G d), 0 for "full" (the smallest exact size); none: the
  /// values are unchanged.
  std::optional<index_t> values;
  /// One budget instead of rotary.key_values and values (which must then be left at 0 and
  /// none): the fraction of the original key and value cache per token, split by
  /// kv_cache_split.
  std::optional<double> kv_cache;
  /// One latent for keys and values (ValueOptions::joint, docs/kv-cache.md): rotary.key_values
  /// (0: full) or all of kv_cache's 2 f G d values per token and layer are that latent;
  /// `values` must be none and rotary.bands 1 (the keys are rebuilt from the whole latent,
  /// written as bands = d/2).
  bool joint = false;
  /// Joint only: weigh each key head by its queries' coherence (the model's frequencies,
  /// rotary.context) and the keys' side by this emphasis (ValueOptions::key_emphasis;
  /// tenfold.torch's key_weighting = a); none: keys and values at equal energy.
  std::optional<double> key_emphasis;
  /// How the converted model stores its cache (tenfold.torch.store_cache), recorded in
  /// tenfold.rotary: "" (the model's own precision), "bfloat16" (float32 checkpoints) or
  /// "float8_e4m3fn" (float32, bfloat16 and float16 checkpoints; the precision is q_proj's
  /// dtype). kv_cache then counts the stored bytes: with w stored numbers in the bytes of one
  /// of the model's, kv_cache = 1/w keeps every key and value whole (k_proj written as key.*,
  /// nothing solved, rotary options unused; with joint, the latent at full size), f < 1/w is
  /// the conversion of w f, f > 1/w is refused.
  std::string cache_dtype;
  /// Calibration statistics (as CheckpointOptions::calibration): P + "input_moment" of E[x' x'^T],
  /// with x' = [x; 1] ((D+1) x (D+1)) when the layers have query, key or value biases, else x
  /// (D x D). The keys and the values both see the layer's input x.
  std::filesystem::path calibration;
};

/// What happened to one rotary layer.
struct TENFOLD_API RotaryLayerReport {
  int index = 0;
  std::string prefix;
  index_t key_values = 0;       ///< C, latent values cached per token
  std::vector<index_t> ranks;   ///< per band
  double relative_error = 0.0;  ///< RotaryKeys::relative_error
  std::optional<double> data_error;
  std::int64_t decode_flops = 0;
  double seconds = 0.0;
  index_t params_before = 0, params_after = 0;
  /// With latent values: C_v, ValueLatent::relative_error and data_error, and the v_proj
  /// and o_proj parameters before and after (value_values 0 and no errors without).
  index_t value_values = 0;
  std::optional<double> value_error, value_data_error;
  index_t value_params_before = 0, value_params_after = 0;
};

/// Result of compress_rotary_checkpoint.
struct TENFOLD_API RotaryCheckpointReport {
  RotaryConfig config;
  index_t bands = 0;
  index_t original_key_values = 0;  ///< G d (also the original value values)
  bool values = false;              ///< whether the values were replaced by latent values
  /// The sizes asked for (kv_cache split, or as given): key values (0: full) and, with
  /// values, latent values (0: full).
  index_t key_values = 0, value_values = 0;
  /// cache_dtype's stored numbers per number of the model's precision (1: none), and
  /// whether every key and value was kept whole (then bands 1, key_values G d).
  index_t cache_widening = 1;
  bool whole = false;
  std::vector<RotaryLayerReport> layers;
  double seconds = 0.0;
  index_t total_params_before = 0, total_params_after = 0;
  std::int64_t calibration_tokens = 0;
  std::string calibration_source;
};

/// Whether compress_rotary_checkpoint(input, ..., options) keeps every key and value whole
/// (options.kv_cache = 1/w with a cache_dtype, not joint). Throws as the conversion does for
/// the checkpoint, its config and cache_dtype.
TENFOLD_API bool keeps_whole(const std::filesystem::path& input,
                             const RotaryCheckpointOptions& options);

/// Converts every layer "<M>layers.<n>.self_attn." of a rotary checkpoint and writes
/// `output` atomically. For each layer with prefix P, k_proj.weight and k_proj.bias are
/// replaced (where k_proj.weight stood) by P + "key.weight" (C, D), P + "key.bias" (C,
/// when the layer has a query or key bias), P + "expand" (G d, C), P + "inv_freq"
/// (d/2, F32) and P + "attention_scaling" (scalar F32) (bands == 1: P + "mixing" (G, C/2,
/// 2) and P + "frequency" (C/2, I64) instead of expand and the rotation); with values,
/// v_proj.weight and v_proj.bias by P + "value.weight" (C_v, D) and P + "value.bias" (C_v,
/// when v_proj has a bias), and o_proj.weight by the folded P + "o_proj.weight" (E, H C_v):
/// the tensors of tenfold.torch's RotarySharedKeyAttention (kept whole: k_proj as P +
/// "key.weight" and "key.bias"). Everything else is copied bit
/// for bit. Metadata: tenfold.rotary (JSON: family, key_values, bands and, with values,
/// value_values, joint, whole and cache_dtype, as tenfold.torch's config entry),
/// tenfold.rotary.context, tenfold.heads,
/// tenfold.key_heads, tenfold.head_dim, tenfold.objective, tenfold.relative_errors (the
/// keys'), with values tenfold.value_relative_errors, and, data-aware,
/// tenfold.calibration.* as compress_checkpoint (with values also
/// tenfold.calibration.value_relative_errors). Inputs are never modified; everything is
/// validated before anything is written. Throws IoError / InvalidArgument naming the
/// problem (InvalidOption naming bands, values, kv_cache or cache_dtype).
TENFOLD_API RotaryCheckpointReport
compress_rotary_checkpoint(const std::filesystem::path& input, const std::filesystem::path& output,
                           const RotaryCheckpointOptions& options,
                           const std::function<void(const RotaryLayerReport&)>& on_layer = {});

}  // namespace tenfold::attention
