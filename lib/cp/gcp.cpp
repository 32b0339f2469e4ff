// GCP of a dense tensor by L-BFGS (include/tenfold/gcp.hpp). The variables are the
// factors U_0..U_{N-1} (weights one). Per evaluation:
//   M = [[U_0, ..., U_{N-1}]]                      (the model, formed densely)
//   F = sum_i w_i f(x_i, m_i),  Y_i = w_i df/dm (x_i, m_i)  (in double; w the mask or 1)
//   dF/dU_n = Y_(n) (U_{N-1} (.) ... U_{n+1} (.) U_{n-1} ... (.) U_0) = MTTKRP(Y, n)
// and projected L-BFGS (lib/cp/lbfgs.hpp) moves all factors at once, with U >= 0 for the
// gamma and rayleigh losses.
#include "tenfold/gcp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/format.hpp"
#include "core/instantiate.hpp"
#include "core/memory.hpp"
#include "core/names.hpp"
#include "core/random.hpp"
#include "cp/cp_als.hpp"
#include "cp/gcp_objective.hpp"
#include "cp/gcp_setup.hpp"
#include "cp/lbfgs.hpp"
#include "tenfold/error.hpp"

namespace tenfold {
namespace {

constexpr detail::Named<GcpLoss> gcp_losses[] = {
    {GcpLoss::gaussian, "gaussian"},   {GcpLoss::poisson, "poisson"},
    {GcpLoss::bernoulli, "bernoulli"}, {GcpLoss::gamma, "gamma"},
    {GcpLoss::rayleigh, "rayleigh"},   {GcpLoss::huber, "huber"}};

// "(i_0, i_1, ...)" of a column-major linear index.
std::string entry_name(const std::vector<index_t>& dims, index_t linear) {
  std::string s = "(";
  for (std::size_t n = 0; n < dims.size(); ++n) {
    s += (n > 0 ? ", " : "") + std::to_string(linear % dims[n]);
    linear /= dims[n];
  }
  return s + ")";
}

// The observed entries are finite and the loss can model them; returns their mean.
template <class T>
double validate_data(TensorView<const T> x, TensorView<const std::uint8_t> observed, GcpLoss loss) {
  const bool masked = observed.data() != nullptr;
  double sum = 0.0;
  index_t count = 0;
  for (index_t i = 0; i < x.numel(); ++i) {
    if (masked && observed[i] == 0) continue;
    const double v = static_cast<double>(x[i]);
    if (!std::isfinite(v)) {
      throw InvalidArgument(std::string("tensor has a non-finite entry (") +
                            (std::isnan(v) ? "NaN" : "Inf") + ") at " + entry_name(x.dims(), i) +
                            (masked ? " that the mask marks observed" : ""));
    }
    if (const char* why = gcp_value_requirement(loss, v))
      detail::refuse_gcp_value(loss, why, entry_name(x.dims(), i), v);
    sum += v;
    ++count;
  }
  if (count == 0) throw InvalidArgument("the mask marks no entry observed");
  return sum / static_cast<double>(count);
}

template <class T>
GcpResult<T> gcp_dense(TensorView<const T> x, TensorView<const std::uint8_t> observed,
                       const GcpOptions& o, CpStart<T> initial_factors) {
  const auto start = detail::Clock::now();
  detail::validate_dense_shape(x.dims(), "GCP");
  detail::validate_gcp_options(o);
  detail::check_cp_rank(o.rank, x.dims());
  if (observed.data() != nullptr && observed.dims() != x.dims()) {
    throw DimensionMismatch("the mask is " + detail::shape_string(observed.dims()) +
                            " but the tensor is " + detail::shape_string(x.dims()));
  }
  const double mean = validate_data(x, observed, o.loss);
  const index_t r = o.rank;
  auto c = detail::make_compute<T>(Backend::cpu);
  // The model, the derivative tensor and the MTTKRP's workspace; the L-BFGS pairs.
  double unknowns = 0.0;
  for (index_t d : x.dims()) unknowns += static_cast<double>(d) * static_cast<double>(r);
  detail::require_memory(*c,
                         3.0 * static_cast<double>(x.numel()) +
                             (2.0 * o.memory + 6.0) * unknowns * sizeof(double) / sizeof(T),
                         "GCP at rank " + std::to_string(r));
  std::vector<double> u = detail::gcp_start<T>(x.dims(), o, mean, initial_factors);

  detail::GcpObjective<T> objective(*c, x, observed, o.loss, o.huber_delta, r);
  detail::LbfgsSettings settings;
  settings.max_iters = o.max_iters;
  settings.gtol = o.gtol;
  settings.ftol = o.ftol;
  settings.memory = o.memory;
  settings.time_limit = o.time_limit;
  if (gcp_loss_is_bounded(o.loss)) settings.lower = 0.0;
  detail::LbfgsCallback progress;
  if (o.callback) {
    progress = [&](int iter, double f, double pg, double elapsed) {
      return o.callback(GcpProgress{iter, f, pg, elapsed});
    };
  }
  const detail::LbfgsOutcome out =
      detail::minimize_lbfgs([&](const std::vector<double>& w,
                                 std::vector<double>& g) { return objective.evaluate(w, g); },
                             u, settings, progress, start);
  GcpResult<T> res;
  res.iterations = out.iterations;
  res.stop = out.stop;
  res.converged = res.stop == CpStop::converged;
  res.objective = out.objective;
  res.objective_history = out.history;
  res.model = detail::gcp_model<T>(x.dims(), r, u);
  detail::arrange(res.model);
  res.seconds = detail::seconds_since(start);
  return res;
}

}  // namespace

std::string_view to_string(GcpLoss loss) { return detail::name_of<GcpLoss>(gcp_losses, loss); }

GcpLoss parse_gcp_loss(std::string_view name) {
  return detail::parse_named<GcpLoss>(gcp_losses, name, "loss");
}

bool gcp_loss_is_bounded(GcpLoss loss) {
  return loss == GcpLoss::gamma || loss == GcpLoss::rayleigh;
}

const char* gcp_value_requirement(GcpLoss loss, double v) {
  switch (loss) {
    case GcpLoss::poisson:
      return v < 0.0 ? "nonnegative counts" : nullptr;
    case GcpLoss::bernoulli:
      return v != 0.0 && v != 1.0 ? "binary data (0 or 1)" : nullptr;
    case GcpLoss::gamma:
    case GcpLoss::rayleigh:
      return v < 0.0 ? "nonnegative data" : nullptr;
    case GcpLoss::gaussian:
    case GcpLoss::huber:
      break;
  }
  return nullptr;
}

template <class T>
GcpResult<T> gcp(TensorView<const T> x, const GcpOptions& o, CpStart<T> initial_factors) {
  return gcp_dense(x, TensorView<const std::uint8_t>(), o, initial_factors);
}

template <class T>
GcpResult<T> gcp(TensorView<const T> x, TensorView<const std::uint8_t> observed,
                 const GcpOptions& o, CpStart<T> initial_factors) {
  if (observed.data() == nullptr) throw InvalidArgument("the mask is empty");
  return gcp_dense(x, observed, o, initial_factors);
}

#define TENFOLD_INSTANTIATE_GCP(T)                                                  \
  template GcpResult<T> gcp<T>(TensorView<const T>, const GcpOptions&, CpStart<T>); \
  template GcpResult<T> gcp<T>(TensorView<const T>, TensorView<const std::uint8_t>, \
                               const GcpOptions&, CpStart<T>);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_GCP)

}  // namespace tenfold
