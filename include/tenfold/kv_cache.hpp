// The value half of the KV cache: a latent value cache for attention layers with grouped
// keys and values (docs/kv-cache.md).
//
// Head h (value head g(h) = h / (H / G)) outputs o_h = sum_n a_{h,n} v_g(x_n), and o_proj
// maps the heads' outputs to y = sum_h W_O^h o_h. Values are not rotated, so they can come
// from C_v latent values per token shared by all value heads, c(x) = A [x; 1], with
// v_g ~ B_g c and each head's up-projection folded into o_proj: y = sum_h (W_O^h B_g(h))
// sum_n a_{h,n} c_n. The cache holds c (C_v values per token instead of G d).
//
// Objective: the layer's output error, sum_g E || F_g^T (v_g - B_g c) ||^2 with
// F_g F_g^T = sum_{h in g} W_O^h^T W_O^h (what o_proj does with each head's output; the
// heads of a group are counted apart, an upper bound on their joint error), over the
// inputs' second moment S (L L^T = S + damping tr(S) / D' I) or, weight-only, S = I. Its
// minimiser is one SVD: with X = L^T W_V blockdiag(F_g) = U Sigma V^T, A = U_k^T L^{-1}
// and B = W_V^T L U_k (the values' projection on the kept latent).
//
// Joint (ValueOptions::joint): one latent for keys and values, cached once. Keys and values
// are read from the same token, so in the whitened space of x their rows share most
// directions: X = L^T [W_K / n_K, W_V blockdiag(F_g) / n_V] (each side scaled to unit
// whitened energy, n = its Frobenius norm), the same SVD, and the keys rebuilt as
// B_K c = W_K^T L U_k c before the rotation, at read time. With the layer's query weight,
// each key head's columns are weighted by the root of P_g, the queries' coherence averaged
// over the offsets of a `context`-token sequence (the objective of rotary bands, one band
// of all d/2 pairs: what a key error costs in the scores), and the keys' side by
// key_emphasis: X = L^T [a W_K blockdiag(P_g^(1/2)) / n_K, W_V blockdiag(F_g) / n_V].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tenfold/attention.hpp"
#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::attention {

/// One attention layer's value/output side: H query heads sharing G value heads (H a
/// multiple of G), head width d, input width D, output width E. Column-major as
/// RotaryLayer: value_weight (D x G d) is PyTorch's (G d, D) v_proj weight,
/// output_weight (H d x E) its (E, H d) o_proj weight.
template <class T>
struct TENFOLD_API ValueLayer {
  index_t heads = 0;          ///< H >= 1, a multiple of key_heads
  index_t key_heads = 0;      ///< G >= 1 (value heads)
  index_t head_dim = 0;       ///< d >= 1
  Matrix<T> value_weight;     ///< D x (G d)
  std::vector<T> value_bias;  ///< G d entries, or empty
  Matrix<T> output_weight;    ///< (H d) x E
  Matrix<T> key_weight;       ///< D x (G d), PyTorch's k_proj weight: read by the joint latent only
  std::vector<T> key_bias;    ///< G d entries, or empty (joint only)
  /// D x (H d), PyTorch's q_proj weight, or empty (joint only: weights the keys by the queries)
  Matrix<T> query_weight;
  std::vector<T> query_bias;  ///< H d entries, or empty (read with query_weight)

  index_t input_dim() const { return value_weight.rows(); }  ///< D
  /// Throws InvalidArgument / DimensionMismatch unless the sizes above hold and every
  /// entry is finite.
  void validate() const;
};

/// Options of value_latent().
struct TENFOLD_API ValueOptions {
  /// C_v: latent values cached per token (1 ... G d; joint: 1 ... 2 G d); 0: "full", the
  /// smallest exact size (singular values above 1e-6 of the largest).
  index_t values = 0;
  /// With moments: S is whitened as S + damping tr(S) / D' I.
  double damping = 0.01;
  /// One latent for keys and values (the layer's key_weight and key_bias): the cache holds
  /// C_v values per token in all, the keys rebuilt from them (ValueLatent::key_expand).
  bool joint = false;
  /// Joint: the weight a of the keys' side against the values' (each first scaled to unit
  /// energy), finite and > 0. At half the cache of SmolLM2-135M, with query weights and
  /// calibration moments, a = 2.5 kept the lowest calibration loss (docs/kv-cache.md).
  double key_emphasis = 1.0;
  /// Joint with query_weight: the RoPE frequencies theta_j (d/2 of them) and the sequence
  /// length whose query-key offsets the coherence averages.
  std::vector<double> inv_freq;
  index_t context = 2048;
};

/// Whether a layer with C_v = `values` latent values folds the rebuild B into o_proj
/// (reading o_proj (E, H C_v)) rather than rebuilding each head's d values before the
/// original o_proj (E, H d): folded when that multiplies fewer weights per token,
/// H C_v E <= H C_v d + H d E, i.e. C_v (E - d) <= d E (E = `hidden`, d = `head_dim`).
/// SmolLM2-135M (d = 64, E = 576) folds up to 72 latent values.
inline bool value_expansion_folded(index_t values, index_t head_dim, index_t hidden) {
  return values * (hidden - head_dim) <= head_dim * hidden;
}

/// One layer's latent value cache. D' = D + 1 with a value bias (joint: a key or value
/// bias; the last row then holds the latent's bias), else D; C_v = values().
struct TENFOLD_API ValueLatent {
  Matrix<double> latent;  ///< D' x C_v: column c maps [x; 1] to latent value c
  /// (G d) x C_v: B, the values rebuilt from the latent. The layer applies it per head
  /// before the original o_proj unless value_expansion_folded().
  Matrix<double> expand;
  /// (H C_v) x E: the folded o_proj, rows h C_v ... (h + 1) C_v = (W_O^h B_g(h))^T
  /// (PyTorch's (E, H C_v) weight); o_proj's bias is unchanged.
  Matrix<double> output;
  /// sigma of X, descending, min(D', G d) of them (joint: min(D', 2 G d); zero for "full":
  /// the plain SVD of W_V blockdiag(F_g)).
  std::vector<double> singular_values;
  /// Square root of the objective's relative value, weight-only (S = I): the values' part.
  double relative_error = 0.0;
  /// The same on the given (undamped) moment; absent without one.
  std::optional<double> data_error;
  /// Joint only: (G d) x C_v, B_K, the keys (before the rotation) rebuilt from the latent;
  /// empty otherwise.
  Matrix<double> key_expand;
  /// Joint only: sqrt(E ||k - B_K c||^2 / E ||k||^2), weight-only and on the moment.
  std::optional<double> key_error, key_data_error;
  /// v_proj (weight and bias) and o_proj's weight; joint: k_proj's too
  index_t params_before = 0;
  /// The latent (with bias) and the folded o_proj weight, or B and the original o_proj
  /// weight (value_expansion_folded); joint: and B_K
  index_t params_after = 0;
  double seconds = 0.0;

  index_t values() const { return latent.cols(); }  ///< C_v
};

/// The latent value cache of one layer, computed in double. `moment` (optional: nullptr
/// for the weight-only objective) is E[x' x'^T] of the layer's inputs x' = [x; 1] (D' x D'),
/// checked by validate_moment to float32 round-off. Throws InvalidArgument /
/// DimensionMismatch naming the option, NumericalError when the damped moment is singular.
template <class T>
TENFOLD_API ValueLatent value_latent(const ValueLayer<T>& layer, const ValueOptions& options,
                                     const Matrix<double>* moment = nullptr);

/// The keys' share of a kv_cache budget (the rest: latent values): of 1/3, 1/2 and 2/3 at
/// half the cache of SmolLM2-135M, 1/3 kept the lowest perplexity (docs/kv-cache.md, "One
/// budget").
inline constexpr double kKvKeyShare = 1.0 / 3.0;

/// Values cached per token and layer for shared rotary keys and latent values.
struct TENFOLD_API KvCacheSplit {
  index_t key_values = 0;    ///< C: shared key values (even for bands == 1)
  index_t value_values = 0;  ///< C_v: latent values
};

/// The split of a budget `fraction` f of the original key and value cache per token and
/// layer, 2 G d values with `cache_values` = G d: round(2 f G d) values, of them
/// kKvKeyShare keys rounded (ties to even) to the key step (2 for bands == 1: a complex
/// key is two values; 1 else), the rest latent values; values above G d go to the keys
/// (rounded up to the step), and the keys are at most G d. f = 1 keeps both whole. Throws
/// InvalidOption "kv_cache" for f outside (0, 1] and for a budget that leaves fewer than
/// one key step or one latent value; "bands" below 1; InvalidArgument for G d < 1.
TENFOLD_API KvCacheSplit kv_cache_split(double fraction, index_t cache_values, index_t bands);

/// How many numbers of a cache stored in `cache_dtype` fit the bytes of one number of a
/// model that computes in `model_dtype` (PyTorch's names: "float32", "bfloat16", ...), so
/// that a kv_cache fraction counts stored bytes: 1 for "" (the model's own precision);
/// "bfloat16" serves float32 models (2), "float8_e4m3fn" float32 (4), bfloat16 and float16
/// ones (2). Throws InvalidOption "cache_dtype" for another dtype or a model it does not
/// serve. One rule for tenfold.torch's cache_dtype and the program's --cache-dtype.
TENFOLD_API index_t cache_widening(const std::string& cache_dtype, const std::string& model_dtype);

}  // namespace tenfold::attention
