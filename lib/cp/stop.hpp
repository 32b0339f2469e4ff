// Why an iterative CP solver stops after an iteration, shared by its loops.
#pragma once

#include <optional>

#include "tenfold/cp.hpp"

namespace tenfold::detail {

/// The stop after an iteration, in order of precedence: converged, the callback's
/// false (go_on), the time limit (> 0) reached; none to go on.
inline std::optional<CpStop> stop_after_iteration(bool converged, bool go_on, double time_limit,
                                                  double elapsed) {
  if (converged) return CpStop::converged;
  if (!go_on) return CpStop::callback;
  if (time_limit > 0.0 && elapsed >= time_limit) return CpStop::time_limit;
  return std::nullopt;
}

}  // namespace tenfold::detail
