// Attention adapter: the query/key side of multi-head attention and its
// collaborative form (Cordonnier, Loukas and Jaggi, arXiv 2006.16362).
//
// Head h's score between a query token x and a key token y (both of width D) is
//   s_h(x, y) = (x^T W_Q^h + b_Q^h^T)(W_K^h^T y + b_K^h) / sqrt(d).
// Softmax over keys ignores the terms constant along a query's row, so b_K never
// matters and the content term b_Q^h^T W_K^h^T y is kept exactly. The context part
// is the H x D x D tensor T[h] = W_Q^h W_K^h^T / sqrt(d), which a CP decomposition of
// rank R turns into a shared pair W~_Q, W~_K (D x R) and one mixing vector m_h per head:
//   s~_h(x, y) = context_scale * x^T W~_Q diag(m_h) W~_K^T y + v_h^T y.
// See docs/attention.md for the conventions and the algorithms.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "tenfold/backend.hpp"
#include "tenfold/export.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::attention {

/// One layer's query/key side: H heads of width d over inputs of width D.
///
/// Weights are D x (H d) column-major matrices, which is the same memory as the
/// row-major (out x in) = (H d) x D weight of a PyTorch nn.Linear: column j is
/// output unit j, and head h owns columns h d ... (h+1) d - 1 (its W_Q^h, D x d).
/// A PyTorch buffer can be moved in as `Matrix<T>(D, H * d, std::move(buffer))`.
template <class T>
struct TENFOLD_API QueryKeyLayer {
  index_t heads = 0;          ///< H >= 1
  index_t head_dim = 0;       ///< d >= 1
  Matrix<T> query_weight;     ///< D x (H d): [W_Q^1 ... W_Q^H]
  Matrix<T> key_weight;       ///< D x (H d): [W_K^1 ... W_K^H]
  std::vector<T> query_bias;  ///< H d entries, or empty when the layer has none
  std::vector<T> key_bias;    ///< H d entries, or empty (never changes a probability)

  index_t input_dim() const { return query_weight.rows(); }  ///< D
  index_t key_dim() const { return heads * head_dim; }       ///< D_k = H d

  /// Throws InvalidArgument / DimensionMismatch unless the sizes above hold and
  /// every entry is finite.
  void validate() const;
};

/// The collaborative form of a layer's query/key side, with R shared dimensions.
template <class T>
struct TENFOLD_API CollaborativeLayer {
  Matrix<T> mixing;   ///< H x R: row h is m_h
  Matrix<T> query;    ///< D x R: W~_Q
  Matrix<T> key;      ///< D x R: W~_K
  Matrix<T> content;  ///< D x H: column h is v_h = W_K^h b_Q^h / sqrt(d); 0 x 0 without query bias
  /// Factor on the context term x^T W~_Q diag(m_h) W~_K^T y (never on the content
  /// term). exact() and compress() fold 1/sqrt(d) into the mixing and set 1; a model
  /// trained with the reference implementation's convention has 1/sqrt(R / H).
  double context_scale = 1.0;

  index_t heads() const { return mixing.rows(); }     ///< H
  index_t rank() const { return mixing.cols(); }      ///< R
  index_t input_dim() const { return query.rows(); }  ///< D

  /// Throws InvalidArgument / DimensionMismatch unless the shapes agree, R >= 1,
  /// and every entry (and context_scale) is finite.
  void validate() const;
};

/// The layer's QK tensor T[h] = W_Q^h W_K^h^T / sqrt(d) (H x D x D) in CP form with
/// H d components: head indicator, columns of W_Q, columns of W_K, weights 1/sqrt(d).
template <class T>
TENFOLD_API KTensor<T> qk_tensor(const QueryKeyLayer<T>& layer);

/// The full-rank collaborative form (R = H d): no iterations, scores exact. Mixing
/// is the head indicator times 1/sqrt(d), W~_Q = [W_Q^1 ... W_Q^H], W~_K likewise.
template <class T>
TENFOLD_API CollaborativeLayer<T> exact(const QueryKeyLayer<T>& layer);

/// How compress() starts the ALS iteration.
enum class Init {
  /// Both starts below that come from the exact form's structure (heads, nvecs) run
  /// a few sweeps (10, or max_iters if fewer) and the one with the lower error goes
  /// on: per-head redundancy favours `heads`, directions shared across heads `nvecs`.
  /// When `heads` converges (tol) within those sweeps, nvecs is not tried.
  structured,
  /// Each head's product W_Q^h W_K^h^T is split into its singular triplets and the R
  /// largest over all heads are kept: before the first sweep, the best rank-R model
  /// in which no component is shared between heads; exact at R = H d.
  heads,
  /// Leading left/right singular vectors of the stacked P = [P_1 | ... | P_H] (the
  /// Tensor Toolbox's nvecs on the QK tensor's two D-sized modes).
  nvecs,
  random,  ///< uniform [0, 1) factors from `seed` (the reference recipe's start)
};

/// "structured", "heads", "nvecs" or "random".
TENFOLD_API std::string_view to_string(Init init);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API Init parse_init(std::string_view name);

/// What the progress callback of compress() and compress_checkpoint() sees.
struct TENFOLD_API CompressProgress {
  /// compress_checkpoint: the layer's index (LayerNames::index); compress: -1.
  int layer = -1;
  /// false: after an ALS sweep; true (compress_checkpoint only): after the layer is
  /// done, with its sweeps and exact weight-space error.
  bool layer_done = false;
  /// The start the running ALS came from: heads, nvecs or random (Init::structured
  /// runs heads, maybe nvecs, then goes on from the better one); layer_done: the
  /// options' init.
  Init start = Init::heads;
  int iteration = 0;  ///< the layer's ALS sweeps so far, every start's trial included
  /// ||T - T~|| / ||T|| (in the whitened space for data-aware compression) after the
  /// sweep, from the ALS's running fit; layer_done: CompressResult::relative_error.
  double relative_error = 0.0;
  double seconds = 0.0;  ///< wall time since the start of the call
};
/// Options of compress().
struct TENFOLD_API CompressOptions {
  index_t rank = 0;     ///< R, in [1, H d]
  double tol = 1e-6;    ///< stop when the relative error changes by less than this (>= 0)
  int max_iters = 100;  ///< ALS iterations (sweeps), >= 1
  Init init = Init::structured;
  std::uint64_t seed = 0;  ///< Init::random (and filler columns when rank(T) < R)
  Backend backend = Backend::cpu;
  /// Data-aware compression only: each input moment S is replaced by
  /// S + damping tr(S) / D I before it is factored (>= 0; larger values move the
  /// objective towards the weight-space one).
  double damping = 0.3;
  /// Called after every ALS sweep (and by compress_checkpoint after every layer);
  /// return false to stop. compress() then returns the model of the last sweep (with
  /// Init::structured the better trial so far) with stopped = true and converged =
  /// false; compress_checkpoint() throws Cancelled and writes nothing. Exceptions from
  /// the callback propagate.
  std::function<bool(const CompressProgress&)> callback;
};

/// Second moments S = E[x x^T] (D x D, symmetric positive semi-definite) of a layer's
/// input tokens, for the data-aware objective of compress():
///   sum_h E[(x^T (T_h - T~_h) y)^2],  x from the query side, y from the key side.
struct TENFOLD_API InputMoments {
  Matrix<double> query;  ///< over the tokens the queries are computed from
  Matrix<double> key;    ///< over the key-side tokens; 0 x 0: the same as `query` (self-attention)
};

/// Throws InvalidArgument naming `what` unless `moment` is input_dim x input_dim,
/// finite, symmetric and positive semi-definite, and not zero. Symmetry and the
/// smallest eigenvalue are judged to 4 D eps max|S_ii|, with `eps` the unit
/// round-off of the precision the moment was computed or stored in.
TENFOLD_API void validate_moment(const Matrix<double>& moment, index_t input_dim,
                                 std::string_view what, double eps);

/// Result of compress().
template <class T>
struct TENFOLD_API CompressResult {
  CollaborativeLayer<T> layer;
  /// ||T - T~|| / ||T|| of the QK tensors, computed exactly (in double) from the
  /// factors after the iteration, not from the iteration's running fit.
  double relative_error = 0.0;
  /// Data-aware compression only: the data-space error
  /// sqrt(sum_h E[(x^T (T_h - T~_h) y)^2] / sum_h E[(x^T T_h y)^2]) under the given
  /// (undamped) moments, computed exactly like `relative_error`.
  std::optional<double> data_error;
  /// ALS sweeps behind the returned model (with Init::structured: the trial of the
  /// start that was kept plus the rest; the other trial shows only in `seconds`).
  int iterations = 0;
  bool converged = false;     ///< stopped on tol rather than max_iters
  bool stopped = false;       ///< the callback returned false (converged is then false)
  double seconds = 0.0;       ///< wall time of the whole call
  index_t params_before = 0;  ///< query/key weights and biases: 2 D H d (+ H d per bias)
  index_t params_after = 0;   ///< H R + 2 D R (+ H D content vectors with a query bias)
};

/// CP of rank R of the layer's QK tensor by ALS over its Kruskal form (the
/// H x D x D tensor is never formed), content vectors kept exactly. At R = H d the
/// exact form is returned without iterating (iterations = 0); below it R may not
/// exceed max_cp_rank({H, D, D}) = min(H D, D^2) (InvalidArgument). The host memory
/// the call needs is estimated first (MemoryError when it cannot fit).
template <class T>
TENFOLD_API CompressResult<T> compress(const QueryKeyLayer<T>& layer,
                                       const CompressOptions& options);

/// Data-aware compression: the same CP on the whitened operand (L_Q^T W_Q^h, L_K^T W_K^h)
/// with L L^T the Cholesky factor of each damped moment, every start made in the
/// whitened space, then W~_Q = L_Q^{-T} A, W~_K = L_K^{-T} B. This minimises
/// sum_h E[(x^T (T_h - T~_h) y)^2] under the damped moments. When both moments are
/// multiples of the identity that objective is the weight-space one times a constant,
/// and the weight-only computation runs unchanged. Content vectors stay exact.
template <class T>
TENFOLD_API CompressResult<T> compress(const QueryKeyLayer<T>& layer,
                                       const CompressOptions& options, const InputMoments& moments);

/// The data-space relative error of `collab` under the moments (see
/// CompressResult::data_error), in double, without forming the QK tensors.
template <class T>
TENFOLD_API double qk_data_error(const QueryKeyLayer<T>& layer, const CollaborativeLayer<T>& collab,
                                 const InputMoments& moments);

/// ||T - T~|| / ||T|| between the layer's QK tensor and the collaborative one
/// (context_scale included), accumulated in double without forming either tensor
/// (below 1e-3, where norms cancel, from one D x D head slice of T - T~ at a time).
template <class T>
TENFOLD_API double qk_error(const QueryKeyLayer<T>& layer, const CollaborativeLayer<T>& collab);

/// Score matrices of every head. Tokens are columns: `queries` is D x n_q and
/// `keys` is D x n_k (the memory of PyTorch's row-major (n, D) hidden states). The
/// result has shape (n_k, n_q, H) with S(j, i, h) = s_h(query i, key j), the memory
/// of PyTorch's row-major (H, n_q, n_k) scores: softmax runs over mode 0.
template <class T>
TENFOLD_API Tensor<T> scores(const QueryKeyLayer<T>& layer, const Matrix<T>& queries,
                             const Matrix<T>& keys);

/// The same for the collaborative form.
template <class T>
TENFOLD_API Tensor<T> scores(const CollaborativeLayer<T>& layer, const Matrix<T>& queries,
                             const Matrix<T>& keys);

/// Explained-variance curve of a matrix from the eigenvalues of its Gram.
struct TENFOLD_API EnergyCurve {
  std::vector<double> energy;               ///< squared singular values, descending
  std::vector<double> cumulative;           ///< cumulative[k] = (energy[0] + ... + energy[k]) / sum
  index_t dim90 = 0, dim95 = 0, dim99 = 0;  ///< dimension_for(0.90 / 0.95 / 0.99)

  /// Smallest k with cumulative[k - 1] >= fraction (0 for an all-zero matrix).
  index_t dimension_for(double fraction) const;
};

/// Redundancy of a layer's heads (the paper's motivation).
struct TENFOLD_API Redundancy {
  EnergyCurve
      products;  ///< P = [P_1 | ... | P_H], P_h = W_Q^h W_K^h^T (D x H D), via its D x D Gram
  EnergyCurve queries;  ///< the concatenated W_Q (D x H d)
  EnergyCurve keys;     ///< the concatenated W_K (D x H d)
};

/// Explained-variance curves, computed in double from D x D Grams (P is never formed).
template <class T>
TENFOLD_API Redundancy redundancy(const QueryKeyLayer<T>& layer);

// ---------------------------------------------------------------------------
// Rotary (RoPE) attention with grouped keys: shared keys (docs/rope.md).
//
// Query head h (key head g(h) = h / (H / G)) scores position m against position n by
//   s_h(m, n) = scale * q_h(x)^T Rot((m - n) theta) k_g(y),
// the rotation turning each frequency pair j of a head by (m - n) theta_j. Two forms
// share the keys of all key heads, each with one SVD per band and the budget spent on
// the largest singular values over all bands; queries are unchanged:
// - bands = 1: per pair j, R_j complex keys kappa_r(y) = e_r^T [y; 1] with
//   k_{g,j} ~ sum_r c_{g,r} kappa_r; a complex factor commutes with the rotation, so
//   the cache holds the rotated kappa_r (2 values each) and every query head meets them
//   through its mixed queries. Weighted by each pair's query energy.
// - bands = b > 1: within a band of b adjacent pairs the 2 G b key coordinates of all
//   key heads are rebuilt from k_B real latent values per token, cached unrotated and
//   rotated after the rebuild: k_g(y) ~ E_{g,B} rho_B(y), rho_B(y) = Lambda_B^T [y; 1].
//   Weighted by the offset-averaged query coherence of the heads of group g.
// Both are whitened by the input moment when one is given. This is the computation of
// tenfold.torch's compress_model for Llama, Qwen2 and Mistral models.

/// One rotary layer's query/key side: H query heads sharing G key heads (H a multiple
/// of G: GQA; G = 1: MQA; G = H: MHA), head width d (even), input width D. Weights are
/// column-major, as QueryKeyLayer: column j of query_weight (D x H d) is output unit j
/// of the PyTorch (H d, D) q_proj weight; key_weight is D x G d.
template <class T>
struct TENFOLD_API RotaryLayer {
  index_t heads = 0;          ///< H >= 1, a multiple of key_heads
  index_t key_heads = 0;      ///< G >= 1
  index_t head_dim = 0;       ///< d, even
  Matrix<T> query_weight;     ///< D x (H d)
  Matrix<T> key_weight;       ///< D x (G d)
  std::vector<T> query_bias;  ///< H d entries, or empty
  std::vector<T> key_bias;    ///< G d entries, or empty

  index_t input_dim() const { return query_weight.rows(); }  ///< D
  /// True when either side has a bias: the conversion then works on [x; 1] (D + 1).
  bool biased() const { return !query_bias.empty() || !key_bias.empty(); }
  /// Throws InvalidArgument / DimensionMismatch unless the sizes above hold and every
  /// entry is finite.
  void validate() const;
};

/// Which coordinates of a head form frequency pair j.
enum class RopePairing {
  /// (j, j + d/2), the Llama / Hugging Face layout (rotate_half); the only one supported.
  half_split,
};

/// Options of rotary_keys().
struct TENFOLD_API RotaryOptions {
  index_t bands = 8;  ///< b: adjacent frequency pairs per band, a divisor of d/2
  /// C: values cached per token (<= G d; even for bands = 1, two per complex key); 0 with
  /// no `ranks`: "full", the smallest exact size.
  index_t key_values = 0;
  /// Components per band given instead of a budget (d/2/b entries): complex keys per
  /// pair (0 ... min(D', G)) for bands = 1, latent values (0 ... min(D', 2 G b)) else.
  std::vector<index_t> ranks;
  /// theta_j, the d/2 frequencies of the model's RoPE (inv_freq, after any static
  /// scaling); bands > 1 only: they enter the objective through the offsets' phases.
  std::vector<double> inv_freq;
  index_t context = 2048;  ///< the objective averages the offsets of a causal sequence this long
  /// With moments: the key-side moment S is whitened as S + damping tr(S) / D' I.
  double damping = 0.01;
  RopePairing pairing = RopePairing::half_split;
};

/// One layer's shared keys. D' = D + 1 when the layer is biased() (the last row then
/// holds the latent's bias), else D; C = key_values().
struct TENFOLD_API RotaryKeys {
  index_t bands = 0;  ///< b
  /// D' x C: column c maps [y; 1] to cached value c (the rows of tenfold.torch's
  /// key.weight, with key.bias in row D when biased). bands = 1: the real parts of the
  /// R = C/2 complex keys e_r, then their imaginary parts.
  Matrix<double> latent;
  /// (G d) x C: the key coordinates rebuilt from the cached values (zero outside each
  /// value's band), in the heads' layout (tenfold.torch's expand for bands > 1).
  Matrix<double> expand;
  /// bands = 1: G x C, the mixing c_{g,r} (real parts in column r, imaginary in R + r),
  /// and the frequency pair j(r) of each complex key (R entries, ascending); empty else.
  Matrix<double> mixing;
  std::vector<index_t> frequency;
  /// Components per band, in band order (d/2/b entries): complex keys per pair for
  /// bands = 1, latent values else.
  std::vector<index_t> ranks;
  /// (d/2/b) x min(D', G) (bands = 1) or min(D', 2 G b): sigma of each band's weighted,
  /// whitened keys, descending (zero for "full", which takes the plain SVD).
  Matrix<double> singular_values;
  /// Square root of the objective's relative value, weight-only (queries' coherence
  /// without moments, unwhitened keys).
  double relative_error = 0.0;
  /// The same on the given (undamped) moments; absent without moments.
  std::optional<double> data_error;
  std::int64_t decode_flops = 0;  ///< rotary_decode_flops() of the result
  index_t params_before = 0;      ///< q_proj and k_proj weights and biases
  /// q_proj, the latent (with bias) and the mixing (G C) or the 2 G b C rebuild entries
  index_t params_after = 0;
  double seconds = 0.0;

  index_t key_values() const { return expand.cols(); }  ///< C
};

/// Flops (a multiply-add counts two) of the scores of one new token against one cached
/// token in one layer: 2 H C for bands = 1 (mixed queries against the cached rotated
/// keys); for bands > 1 the rebuild 4 G b C, the rotation 3 G d and 2 H d.
TENFOLD_API std::int64_t rotary_decode_flops(index_t heads, index_t key_heads, index_t head_dim,
                                             index_t key_values, index_t bands);

/// The shared keys of one layer, computed in double. `moments` (optional: nullptr for
/// the weight-only objective) gives E[x' x'^T] of the layer's inputs x' = [x; 1]
/// (D' x D'; key = query or empty), each checked by validate_moment to float32
/// round-off. Throws InvalidArgument / DimensionMismatch naming
/// the option, NumericalError when the damped key moment is singular.
template <class T>
TENFOLD_API RotaryKeys rotary_keys(const RotaryLayer<T>& layer, const RotaryOptions& options,
                                   const InputMoments* moments = nullptr);

}  // namespace tenfold::attention
