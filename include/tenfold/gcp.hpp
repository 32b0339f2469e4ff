// Generalized CP (GCP, Hong, Kolda and Duersch, "Generalized canonical polyadic tensor
// decomposition", SIAM Review 62(1), 2020): CP under an elementwise loss other than
// least squares, fitted by L-BFGS on the factors. The gradient of sum_i f(x_i, m_i) with
// respect to factor n is the MTTKRP of the tensor Y of derivatives df/dm at every
// entry, so it reuses the dense MTTKRP.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "tenfold/cp.hpp"
#include "tenfold/export.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold {

/// The elementwise loss f(x, m) of GCP, for a model value m at each entry.
enum class GcpLoss {
  gaussian,   ///< (x - m)^2: least squares
  poisson,    ///< exp(m) - x m: Poisson counts with log link (the rate is exp(m)); x >= 0
  bernoulli,  ///< log(1 + exp(m)) - x m: binary data with logit link; x in {0, 1}
};

/// "gaussian", "poisson" or "bernoulli".
TENFOLD_API std::string_view to_string(GcpLoss loss);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API GcpLoss parse_gcp_loss(std::string_view name);

/// What the per-iteration callback of gcp sees.
struct TENFOLD_API GcpProgress {
  int iteration = 0;           ///< 1-based
  double objective = 0.0;      ///< sum_i f(x_i, m_i)
  double gradient_norm = 0.0;  ///< 2-norm of the gradient over all factor entries
  double seconds = 0.0;
};

/// Options of gcp.
struct TENFOLD_API GcpOptions {
  index_t rank = 1;  ///< number of components R >= 1
  GcpLoss loss = GcpLoss::gaussian;
  int max_iters = 1000;  ///< L-BFGS iterations, >= 1
  /// Stop when the gradient norm falls below gtol times its norm at the start (>= 0).
  double gtol = 1e-6;
  /// Stop when the objective changes by less than ftol (1 + |objective|) (>= 0).
  double ftol = 1e-10;
  int memory = 5;  ///< L-BFGS correction pairs kept, >= 1
  /// Seed of the start: entries normal with standard deviation (1 / R)^(1/N) / 2, so
  /// that model values start near zero (the start of every loss and link here).
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
  int iterations = 0;
  bool converged = false;  ///< stop == CpStop::converged
  CpStop stop = CpStop::max_iters;
  double objective = 0.0;                 ///< sum_i f(x_i, m_i) of the model
  std::vector<double> objective_history;  ///< after each iteration
  double seconds = 0.0;
};

/// GCP of a dense tensor (order >= 2, finite entries; poisson: x >= 0; bernoulli:
/// x in {0, 1}, else InvalidArgument naming the first entry that is not). Each
/// evaluation forms the model and the derivative tensor (two tensors of x's size, whose
/// memory is checked first) and N MTTKRPs. The start is `initial_factors` or random.
template <class T>
TENFOLD_API GcpResult<T> gcp(TensorView<const T> x, const GcpOptions& options,
                             CpStart<T> initial_factors = {});

template <class T>
GcpResult<T> gcp(const Tensor<T>& x, const GcpOptions& options, CpStart<T> initial_factors = {}) {
  return gcp(x.view(), options, initial_factors);
}

}  // namespace tenfold
