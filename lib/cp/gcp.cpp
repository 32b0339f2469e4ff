// GCP by L-BFGS (include/tenfold/gcp.hpp). The variables are the factors U_0..U_{N-1}
// (weights one). Per evaluation:
//   M = [[U_0, ..., U_{N-1}]]                      (the model, formed densely)
//   F = sum_i f(x_i, m_i),  Y_i = df/dm (x_i, m_i)  (in double)
//   dF/dU_n = Y_(n) (U_{N-1} (.) ... U_{n+1} (.) U_{n-1} ... (.) U_0) = MTTKRP(Y, n)
// and L-BFGS (two-loop recursion, Armijo backtracking) moves all factors at once.
#include "tenfold/gcp.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <string>

#include "core/dense_mttkrp.hpp"
#include "core/format.hpp"
#include "core/instantiate.hpp"
#include "core/memory.hpp"
#include "core/names.hpp"
#include "core/random.hpp"
#include "cp/cp_als.hpp"
#include "cp/gcp_objective.hpp"
#include "cp/stop.hpp"
#include "tenfold/error.hpp"

namespace tenfold {
namespace {

constexpr detail::Named<GcpLoss> gcp_losses[] = {{GcpLoss::gaussian, "gaussian"},
                                                 {GcpLoss::poisson, "poisson"},
                                                 {GcpLoss::bernoulli, "bernoulli"}};

// "(i_0, i_1, ...)" of a column-major linear index.
std::string entry_name(const std::vector<index_t>& dims, index_t linear) {
  std::string s = "(";
  for (std::size_t n = 0; n < dims.size(); ++n) {
    s += (n > 0 ? ", " : "") + std::to_string(linear % dims[n]);
    linear /= dims[n];
  }
  return s + ")";
}

template <class T>
void validate_data(TensorView<const T> x, GcpLoss loss) {
  check_finite(x, "tensor");
  for (index_t i = 0; i < x.numel(); ++i) {
    const T v = x[i];
    if (loss == GcpLoss::poisson && v < T(0)) {
      throw InvalidArgument("GCP with the poisson loss needs nonnegative counts; the entry at " +
                            entry_name(x.dims(), i) + " is " + std::to_string(double{v}));
    }
    if (loss == GcpLoss::bernoulli && v != T(0) && v != T(1)) {
      throw InvalidArgument(
          "GCP with the bernoulli loss needs binary data (0 or 1); the entry at " +
          entry_name(x.dims(), i) + " is " + std::to_string(double{v}));
    }
  }
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

std::string_view to_string(GcpLoss loss) { return detail::name_of<GcpLoss>(gcp_losses, loss); }

GcpLoss parse_gcp_loss(std::string_view name) {
  return detail::parse_named<GcpLoss>(gcp_losses, name, "loss");
}

template <class T>
GcpResult<T> gcp(TensorView<const T> x, const GcpOptions& o, CpStart<T> initial_factors) {
  const auto start = detail::Clock::now();
  detail::validate_dense_shape(x.dims(), "GCP");
  if (o.rank < 1) throw InvalidArgument("rank must be at least 1, got " + std::to_string(o.rank));
  if (o.max_iters < 1) {
    throw InvalidArgument("max_iters must be at least 1, got " + std::to_string(o.max_iters));
  }
  if (!(o.gtol >= 0.0) || !(o.ftol >= 0.0)) {
    throw InvalidArgument("gtol and ftol must be >= 0, got " + std::to_string(o.gtol) + " and " +
                          std::to_string(o.ftol));
  }
  if (o.memory < 1)
    throw InvalidArgument("memory must be at least 1, got " + std::to_string(o.memory));
  validate_data(x, o.loss);
  const int order = x.order();
  const index_t r = o.rank;
  auto c = detail::make_compute<T>(Backend::cpu);
  // The model, the derivative tensor and the MTTKRP's workspace; the L-BFGS pairs.
  double unknowns = 0.0;
  for (index_t d : x.dims()) unknowns += static_cast<double>(d) * static_cast<double>(r);
  detail::require_memory(*c,
                         3.0 * static_cast<double>(x.numel()) +
                             (2.0 * o.memory + 6.0) * unknowns * sizeof(double) / sizeof(T),
                         "GCP at rank " + std::to_string(r));

  // The start, packed mode by mode.
  std::vector<double> u;
  if (!initial_factors.empty()) {
    if (initial_factors.size() != static_cast<std::size_t>(order)) {
      throw DimensionMismatch("the start needs " + std::to_string(order) +
                              " initial factors, got " + std::to_string(initial_factors.size()));
    }
    for (int n = 0; n < order; ++n) {
      const Matrix<T>& f = initial_factors[static_cast<std::size_t>(n)];
      if (f.rows() != x.dim(n) || f.cols() != r) {
        throw DimensionMismatch("initial factor " + std::to_string(n) + " is " +
                                std::to_string(f.rows()) + "x" + std::to_string(f.cols()) +
                                ", expected " + std::to_string(x.dim(n)) + "x" + std::to_string(r));
      }
      check_finite(TensorView<const T>(f.data(), {f.rows(), f.cols()}),
                   ("initial factor " + std::to_string(n)).c_str());
      u.insert(u.end(), f.values().begin(), f.values().end());
    }
  } else {
    detail::Rng rng(o.seed);
    const double scale = 0.5 * std::pow(1.0 / static_cast<double>(r), 1.0 / order);
    u.resize(static_cast<std::size_t>(unknowns));
    for (double& v : u) v = scale * rng.normal();
  }

  detail::GcpObjective<T> objective(*c, x, o.loss, r);
  std::vector<double> g, g_new, u_new, d;
  double f = objective.evaluate(u, g);
  if (!std::isfinite(f)) {
    throw NumericalError("the GCP objective overflows at the start; scale the start down");
  }
  const double g0 = std::sqrt(dot(g, g));
  std::deque<std::vector<double>> s_hist, y_hist;
  GcpResult<T> res;
  for (int iter = 1; iter <= o.max_iters; ++iter) {
    // d = -H g by the two-loop recursion, H_0 = (s^T y / y^T y) I
    d = g;
    std::vector<double> alpha(s_hist.size());
    for (std::size_t k = s_hist.size(); k-- > 0;) {
      alpha[k] = dot(s_hist[k], d) / dot(y_hist[k], s_hist[k]);
      for (std::size_t i = 0; i < d.size(); ++i) d[i] -= alpha[k] * y_hist[k][i];
    }
    const double gamma =
        s_hist.empty() ? 1.0 / std::max(1.0, std::sqrt(dot(g, g)))
                       : dot(s_hist.back(), y_hist.back()) / dot(y_hist.back(), y_hist.back());
    for (double& v : d) v *= gamma;
    for (std::size_t k = 0; k < s_hist.size(); ++k) {
      const double beta = dot(y_hist[k], d) / dot(y_hist[k], s_hist[k]);
      for (std::size_t i = 0; i < d.size(); ++i) d[i] += (alpha[k] - beta) * s_hist[k][i];
    }
    for (double& v : d) v = -v;
    double slope = dot(g, d);
    if (!(slope < 0.0)) {  // not a descent direction: steepest descent, history dropped
      s_hist.clear();
      y_hist.clear();
      for (std::size_t i = 0; i < d.size(); ++i) d[i] = -g[i] / std::max(1.0, std::sqrt(dot(g, g)));
      slope = dot(g, d);
    }
    // Armijo backtracking from the full step: F(u + a d) <= F(u) + 1e-4 a g^T d
    double step = 1.0, f_new = 0.0;
    bool moved = false;
    for (int tries = 0; tries < 60; ++tries, step *= 0.5) {
      u_new = u;
      for (std::size_t i = 0; i < u.size(); ++i) u_new[i] += step * d[i];
      f_new = objective.evaluate(u_new, g_new);
      if (std::isfinite(f_new) && f_new <= f + 1e-4 * step * slope) {
        moved = true;
        break;
      }
    }
    res.iterations = iter;
    if (!moved) {  // no decrease along a descent direction: a (numerical) stationary point
      res.stop = CpStop::converged;
      res.objective_history.push_back(f);
      break;
    }
    // The correction pair, kept when its curvature is positive.
    std::vector<double> s(u.size()), y(u.size());
    for (std::size_t i = 0; i < u.size(); ++i) {
      s[i] = u_new[i] - u[i];
      y[i] = g_new[i] - g[i];
    }
    if (dot(s, y) > 1e-12 * std::sqrt(dot(s, s) * dot(y, y))) {
      s_hist.push_back(std::move(s));
      y_hist.push_back(std::move(y));
      if (static_cast<int>(s_hist.size()) > o.memory) {
        s_hist.pop_front();
        y_hist.pop_front();
      }
    }
    const double change = std::abs(f - f_new);
    u.swap(u_new);
    g.swap(g_new);
    f = f_new;
    res.objective_history.push_back(f);
    const double gnorm = std::sqrt(dot(g, g));
    const double elapsed = detail::seconds_since(start);
    const bool go_on = !o.callback || o.callback(GcpProgress{iter, f, gnorm, elapsed});
    const auto stop =
        detail::stop_after_iteration(gnorm <= o.gtol * g0 || change <= o.ftol * (1.0 + std::abs(f)),
                                     go_on, o.time_limit, elapsed);
    res.stop = stop.value_or(CpStop::max_iters);
    if (stop) break;
  }
  res.converged = res.stop == CpStop::converged;
  res.objective = f;
  res.model = KTensor<T>(std::vector<T>(static_cast<std::size_t>(r), T(1)), objective.factors(u));
  detail::arrange(res.model);
  res.seconds = detail::seconds_since(start);
  return res;
}

#define TENFOLD_INSTANTIATE_GCP(T) \
  template GcpResult<T> gcp<T>(TensorView<const T>, const GcpOptions&, CpStart<T>);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_GCP)

}  // namespace tenfold
