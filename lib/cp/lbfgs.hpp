// L-BFGS with an optional lower bound on every variable (projected L-BFGS), for GCP
// (lib/cp/gcp.cpp). Per iteration, with the bound l (-inf when none):
//   A = { i : u_i = l and g_i > 0 }                      (the active set: held at the bound)
//   d = -H g on the free variables, d_A = 0               (two-loop recursion)
//   u+ = max(u + a d, l), a halved from 1 until the projected Armijo condition
//        F(u+) <= F(u) + 1e-4 g^T (u+ - u)
// and the correction pair (u+ - u, g+ - g) is kept when its curvature is positive. The
// stationarity measure is the projected gradient || u - max(u - g, l) ||, which is ||g||
// without a bound.
#pragma once

#include <functional>
#include <limits>
#include <vector>

#include "cp/cp_als.hpp"
#include "cp/stop.hpp"
#include "tenfold/cp.hpp"

namespace tenfold::detail {

struct LbfgsSettings {
  int max_iters = 1000;
  double gtol = 1e-6;  ///< relative to the projected gradient norm at the start
  double ftol = 1e-10;
  int memory = 5;
  double lower =
      -std::numeric_limits<double>::infinity();  ///< the bound on every variable; -inf: none
  double time_limit = 0.0;
};

struct LbfgsOutcome {
  int iterations = 0;
  CpStop stop = CpStop::max_iters;
  double objective = 0.0;
  std::vector<double> history;  ///< the objective after each iteration
};

// F(u) with grad = dF/du; non-finite F means "outside the domain" (the step is shortened).
using LbfgsFunction =
    std::function<double(const std::vector<double>& u, std::vector<double>& grad)>;
// After each iteration: (iteration, objective, projected gradient norm, seconds); false stops.
using LbfgsCallback = std::function<bool(int, double, double, double)>;

// Minimises F from u (projected onto the bound first); u is left at the last iterate.
// Throws NumericalError when F is not finite at the (projected) start.
LbfgsOutcome minimize_lbfgs(const LbfgsFunction& f, std::vector<double>& u,
                            const LbfgsSettings& settings, const LbfgsCallback& callback,
                            Clock::time_point start);

}  // namespace tenfold::detail
