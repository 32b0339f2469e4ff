// Projected L-BFGS (lib/cp/lbfgs.hpp).
#include "cp/lbfgs.hpp"

#include <algorithm>
#include <cmath>
#include <deque>

#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// || u - max(u - g, l) ||
double projected_gradient_norm(const std::vector<double>& u, const std::vector<double>& g,
                               double lower) {
  double s = 0.0;
  for (std::size_t i = 0; i < u.size(); ++i) {
    const double p = u[i] - std::max(u[i] - g[i], lower);
    s += p * p;
  }
  return std::sqrt(s);
}

}  // namespace

LbfgsOutcome minimize_lbfgs(const LbfgsFunction& fun, std::vector<double>& u,
                            const LbfgsSettings& o, const LbfgsCallback& callback,
                            Clock::time_point start) {
  const double lower = o.lower;
  for (double& v : u) v = std::max(v, lower);
  std::vector<double> g, g_new, u_new(u.size()), d;
  double f = fun(u, g);
  if (!std::isfinite(f)) {
    throw NumericalError("the GCP objective is not finite at the start; scale the start down");
  }
  const double pg0 = projected_gradient_norm(u, g, lower);
  std::vector<char> active(u.size());
  std::deque<std::vector<double>> s_hist, y_hist;
  LbfgsOutcome out;
  for (int iter = 1; iter <= o.max_iters; ++iter) {
    for (std::size_t i = 0; i < u.size(); ++i) active[i] = u[i] <= lower && g[i] > 0.0;
    // d = -H g on the free variables by the two-loop recursion, H_0 = (s^T y / y^T y) I
    d = g;
    for (std::size_t i = 0; i < d.size(); ++i)
      if (active[i]) d[i] = 0.0;
    const double free_norm = std::sqrt(dot(d, d));
    std::vector<double> alpha(s_hist.size());
    for (std::size_t k = s_hist.size(); k-- > 0;) {
      alpha[k] = dot(s_hist[k], d) / dot(y_hist[k], s_hist[k]);
      for (std::size_t i = 0; i < d.size(); ++i) d[i] -= alpha[k] * y_hist[k][i];
    }
    const double gamma =
        s_hist.empty() ? 1.0 / std::max(1.0, free_norm)
                       : dot(s_hist.back(), y_hist.back()) / dot(y_hist.back(), y_hist.back());
    for (double& v : d) v *= gamma;
    for (std::size_t k = 0; k < s_hist.size(); ++k) {
      const double beta = dot(y_hist[k], d) / dot(y_hist[k], s_hist[k]);
      for (std::size_t i = 0; i < d.size(); ++i) d[i] += (alpha[k] - beta) * s_hist[k][i];
    }
    // Free variables only, and none pushed further below the bound.
    for (std::size_t i = 0; i < d.size(); ++i) {
      d[i] = active[i] ? 0.0 : -d[i];
      if (u[i] <= lower && d[i] < 0.0) d[i] = 0.0;
    }
    // The quasi-Newton direction when it descends, else (or when its search fails)
    // projected steepest descent with the history dropped.
    bool steepest = !(dot(g, d) < 0.0);
    double f_new = 0.0;
    bool moved = false;
    for (;;) {
      if (steepest) {
        s_hist.clear();
        y_hist.clear();
        for (std::size_t i = 0; i < d.size(); ++i)
          d[i] = active[i] ? 0.0 : -g[i] / std::max(1.0, free_norm);
      }
      // Projected Armijo backtracking from the full step.
      double step = 1.0;
      for (int tries = 0; tries < 60 && !moved; ++tries, step *= 0.5) {
        for (std::size_t i = 0; i < u.size(); ++i) u_new[i] = std::max(u[i] + step * d[i], lower);
        double decrease = 0.0;
        for (std::size_t i = 0; i < u.size(); ++i) decrease += g[i] * (u_new[i] - u[i]);
        if (!(decrease < 0.0)) break;  // the projected step went nowhere
        f_new = fun(u_new, g_new);
        moved = std::isfinite(f_new) && f_new <= f + 1e-4 * decrease;
      }
      if (moved || steepest || s_hist.empty()) break;
      steepest = true;
    }
    out.iterations = iter;
    if (!moved) {  // no decrease along a descent direction: a (numerical) stationary point
      out.stop = CpStop::converged;
      out.history.push_back(f);
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
    out.history.push_back(f);
    const double pg = projected_gradient_norm(u, g, lower);
    const double elapsed = seconds_since(start);
    const bool go_on = !callback || callback(iter, f, pg, elapsed);
    const auto stop = stop_after_iteration(
        pg <= o.gtol * pg0 || change <= o.ftol * (1.0 + std::abs(f)), go_on, o.time_limit, elapsed);
    out.stop = stop.value_or(CpStop::max_iters);
    if (stop) break;
  }
  out.objective = f;
  return out;
}

}  // namespace tenfold::detail
