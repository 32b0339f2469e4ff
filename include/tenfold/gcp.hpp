// Generalized CP (GCP, Hong, Kolda and Duersch, "Generalized canonical polyadic tensor
// decomposition", SIAM Review 62(1), 2020): CP under an elementwise loss other than
// least squares. Dense tensors are fitted by L-BFGS on the factors (with the bound
// U >= 0 for the losses whose model must be nonnegative); the gradient of
// sum_i f(x_i, m_i) with respect to factor n is the MTTKRP of the tensor Y of
// derivatives df/dm at every entry, so it reuses the dense MTTKRP. Sparse tensors are
// fitted by Adam on stratified samples of their nonzeros and zeros (the Tensor Toolbox's
// and GenTen's stochastic GCP), never densified.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "tenfold/cp.hpp"
#include "tenfold/export.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold {

/// The elementwise loss f(x, m) of GCP, for a model value m at each entry.
enum class GcpLoss {
  gaussian,   ///< (x - m)^2: least squares
  poisson,    ///< exp(m) - x m: Poisson counts with log link (the rate is exp(m)); x >= 0
  bernoulli,  ///< log(1 + exp(m)) - x m: binary data with logit link; x in {0, 1}
  /// x / (m + e) + log(m + e), e = 1e-10: positive continuous data (gamma, identity
  /// link); x >= 0, the factors are kept >= 0
  gamma,
  /// 2 log(m + e) + (pi / 4) (x / (m + e))^2, e = 1e-10: amplitudes (Rayleigh, identity
  /// link); x >= 0, the factors are kept >= 0
  rayleigh,
  /// (x - m)^2 where |x - m| < delta, else 2 delta |x - m| - delta^2: least squares
  /// robust to outliers (GcpOptions::huber_delta)
  huber,
};

/// "gaussian", "poisson", "bernoulli", "gamma", "rayleigh" or "huber".
TENFOLD_API std::string_view to_string(GcpLoss loss);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API GcpLoss parse_gcp_loss(std::string_view name);
/// Whether the loss's model must be nonnegative (gamma, rayleigh): the factors are then
/// bounded below by zero.
TENFOLD_API bool gcp_loss_is_bounded(GcpLoss loss);
/// What the loss needs that the data value v is not ("nonnegative counts", "binary data
/// (0 or 1)", "nonnegative data"), or nullptr when the loss can model v.
TENFOLD_API const char* gcp_value_requirement(GcpLoss loss, double v);

/// Stochastic GCP of a sparse tensor (the Tensor Toolbox's gcp_opt with a sparse tensor
/// and Adam): every iteration estimates the gradient from a fresh stratified sample,
/// `gradient_nonzeros` of the nonzeros and `gradient_zeros` of the zeros (uniform,
/// with replacement, each weighted by its stratum's size over its sample's); every
/// epoch of `epoch_iters` iterations estimates the objective on a sample drawn once
/// (`function_nonzeros` and `function_zeros`). An epoch whose estimate rises is undone
/// and the rate multiplied by `decay`; the run stops after `max_fails` + 1 such epochs,
/// or after GcpOptions::max_iters epochs. A count of 0 takes the Toolbox's default:
/// gradient max(1000, 3 nnz / max_iters), function max(nnz / 100, 10^5) (each at most
/// nnz, and zeros at most the nonzeros' count and the number of zeros).
struct TENFOLD_API GcpSampling {
  index_t gradient_nonzeros = 0;
  index_t gradient_zeros = 0;
  index_t function_nonzeros = 0;
  index_t function_zeros = 0;
  int epoch_iters = 1000;  ///< >= 1
  double rate = 1e-3;      ///< Adam's step, > 0
  double decay = 0.1;      ///< in (0, 1]
  int max_fails = 1;       ///< >= 0
};

/// What the per-iteration callback of gcp sees.
struct TENFOLD_API GcpProgress {
  int iteration = 0;       ///< 1-based (epochs for a sparse tensor)
  double objective = 0.0;  ///< sum_i f(x_i, m_i) (its sampled estimate for a sparse tensor)
  /// 2-norm of the projected gradient over all factor entries (0 for a sparse tensor)
  double gradient_norm = 0.0;
  double seconds = 0.0;
};

/// Options of gcp.
struct TENFOLD_API GcpOptions {
  index_t rank = 1;  ///< number of components R >= 1
  GcpLoss loss = GcpLoss::gaussian;
  int max_iters = 1000;  ///< L-BFGS iterations, >= 1
  /// Stop when the projected gradient norm falls below gtol times its start value (>= 0).
  double gtol = 1e-6;
  /// Stop when the objective changes by less than ftol (1 + |objective|) (>= 0).
  double ftol = 1e-10;
  int memory = 5;             ///< L-BFGS correction pairs kept, >= 1
  double huber_delta = 0.25;  ///< the huber loss's threshold, > 0 (the Toolbox's 'huber (0.25)')
  GcpSampling sampling;       ///< sparse tensors only
  /// Seed of the start (and of the samples of a sparse tensor). Unbounded losses:
  /// entries normal with standard deviation (1 / R)^(1/N) / 2, so that model values
  /// start near zero. Gamma and rayleigh: entries uniform in [s / 2, 3 s / 2) with s
  /// chosen so that the model's mean is the data's.
  std::uint64_t seed = 0;
  double time_limit = 0.0;  ///< seconds; 0 means none
  /// Called after every iteration; return false to stop early.
  std::function<bool(const GcpProgress&)> callback;
};

/// Result of gcp.
template <class T>
struct TENFOLD_API GcpResult {
  /// The model M of the link scale (for poisson the log-rates, for bernoulli the
  /// log-odds), unit 2-norm columns and weights sorted descending.
  KTensor<T> model;
  int iterations = 0;      ///< L-BFGS iterations; epochs for a sparse tensor
  bool converged = false;  ///< stop == CpStop::converged
  CpStop stop = CpStop::max_iters;
  /// sum_i f(x_i, m_i) of the model over the (observed) entries; for a sparse tensor its
  /// estimate on the function sample
  double objective = 0.0;
  std::vector<double> objective_history;  ///< after each iteration
  double seconds = 0.0;
};

/// GCP of a dense tensor (order >= 2, finite entries; poisson, gamma, rayleigh: x >= 0;
/// bernoulli: x in {0, 1}, else InvalidArgument naming the first entry that is not). Each
/// evaluation forms the model and the derivative tensor (two tensors of x's size, whose
/// memory is checked first) and N MTTKRPs. The start is `initial_factors` or random.
template <class T>
TENFOLD_API GcpResult<T> gcp(TensorView<const T> x, const GcpOptions& options,
                             CpStart<T> initial_factors = {});

template <class T>
GcpResult<T> gcp(const Tensor<T>& x, const GcpOptions& options, CpStart<T> initial_factors = {}) {
  return gcp(x.view(), options, initial_factors);
}

/// GCP of a dense tensor with missing entries: `observed` has x's shape and an entry
/// counts where it is non-zero (a missing entry may hold anything, NaN included). The
/// objective and its gradient run over the observed entries only.
template <class T>
TENFOLD_API GcpResult<T> gcp(TensorView<const T> x, TensorView<const std::uint8_t> observed,
                             const GcpOptions& options, CpStart<T> initial_factors = {});

template <class T>
GcpResult<T> gcp(const Tensor<T>& x, TensorView<const std::uint8_t> observed,
                 const GcpOptions& options, CpStart<T> initial_factors = {}) {
  return gcp(x.view(), observed, options, initial_factors);
}

/// Stochastic GCP of a sparse tensor (GcpSampling; order >= 2, the data checks of the
/// dense call on the nonzeros; at least one nonzero). Memory: the tensor, the factors
/// and Adam's two moments, and the samples; nothing of the tensor's dense size.
template <class T>
TENFOLD_API GcpResult<T> gcp(const SparseTensor<T>& x, const GcpOptions& options,
                             CpStart<T> initial_factors = {});

}  // namespace tenfold
