// The two forms of shared rotary keys behind rotary_keys() (rotary.cpp), over one
// prepared problem: complex keys shared per frequency pair (bands = 1,
// rotary_frequencies.cpp) and real band latents rebuilt before the rotation (bands > 1,
// rotary_bands.cpp). docs/rope.md derives both.
#pragma once

#include <complex>
#include <vector>

#include "core/compute.hpp"
#include "tenfold/attention.hpp"

namespace tenfold::attention::detail {

/// One layer in double, checked, ready for either form.
struct RotaryProblem {
  index_t heads = 0, key_heads = 0, head_dim = 0;
  /// D' x H d and D' x G d: the weights with the biases (or zeros) as row D when the
  /// layer is biased (D' = D + 1), else D' = D.
  Matrix<double> wq, wk;
  /// E[x' x'^T] of the query-side and key-side inputs (the key side may point at the
  /// query's); null for the weight-only objective.
  const Matrix<double>* query_moment = nullptr;
  const Matrix<double>* key_moment = nullptr;
  /// L with L L^T = S_K + damping tr(S_K) / D' I; 0 x 0: no whitening ("full", or no
  /// moments).
  Matrix<double> chol;
  /// "full": the smallest exact size (plain SVD of the keys, every sigma above
  /// kRankTol of the largest kept).
  bool full = false;

  index_t dim() const { return wk.rows(); }
  bool whiten() const { return chol.rows() > 0; }
};

/// Singular values below this fraction of the layer's largest are zero ("full").
inline constexpr double kRankTol = 1e-6;

/// How many components each band (row of `sigma`, descending singular values) keeps:
/// "full" every sigma above kRankTol of the largest; `given` (one count per band, each
/// 0 ... sigma.cols()) as given; else the `budget` largest over all bands (ties in
/// row-major order). `unit` names a component in messages.
std::vector<index_t> choose_ranks(const Matrix<double>& sigma, bool full,
                                  const std::vector<index_t>& given, index_t budget,
                                  const char* unit);

/// Left singular vectors (rows x k, k = min(rows, cols), unit columns, zero where
/// sigma = 0) and singular values (descending) of X, real or complex, from the
/// Hermitian eigensolver of the smaller Gram.
template <class S>
std::pair<Matrix<S>, std::vector<double>> left_singular(const Matrix<S>& x);

/// A(theta_j - theta_k) and A(theta_j + theta_k) (d/2 x d/2 each, column-major) for the
/// frequencies theta (d/2 of them): A(omega) the mean of e^{i omega Delta} over the offsets
/// Delta of the causal pairs of a `context`-token sequence.
struct OffsetPhases {
  std::vector<std::complex<double>> minus, plus;
};
OffsetPhases offset_phases(const std::vector<double>& inv_freq, index_t context);

/// Throws unless every frequency is finite, there are `half` of them when `counted`, and
/// context >= 1: what offset_phases reads.
void check_offsets(const std::vector<double>& inv_freq, index_t context, index_t half,
                   bool counted);

/// P_g (d x d) for every key head g: sum over its query heads of E[v v^T], v the query
/// (W_Q^h, columns of `wq` D' x H d, under `moment` or I) turned by the offset of a causal
/// pair: what an error in key head g's coordinates costs in the scores, averaged over
/// the offsets.
std::vector<Matrix<double>> query_coherence(tenfold::detail::Compute<double>& c,
                                            const Matrix<double>& wq, const Matrix<double>* moment,
                                            index_t heads, index_t key_heads, index_t d,
                                            const OffsetPhases& phases);

/// bands = 1: R complex keys per token, kappa_r(y) = e_r^T [y; 1], each serving one
/// frequency pair j(r); key head g's pair j is sum_r c_{g,r} kappa_r.
RotaryKeys frequency_keys(tenfold::detail::Compute<double>& c, const RotaryProblem& p,
                          const RotaryOptions& o);

/// bands = b > 1: per band of b adjacent pairs, a real latent rebuilt into the band's
/// 2 G b key coordinates and rotated after the rebuild.
RotaryKeys band_keys(tenfold::detail::Compute<double>& c, const RotaryProblem& p,
                     const RotaryOptions& o);

}  // namespace tenfold::attention::detail
