// What dense and sparse GCP share (lib/cp/gcp.cpp, lib/sparse/sparse_gcp.cpp): the
// options' checks, the data each loss accepts, and the start.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/format.hpp"
#include "core/random.hpp"
#include "cp/start_check.hpp"
#include "tenfold/error.hpp"
#include "tenfold/gcp.hpp"

namespace tenfold::detail {

// Throws InvalidOption naming the first field of GcpOptions out of its range.
inline void validate_gcp_options(const GcpOptions& o) {
  const auto at_least = [](const char* name, long long v, long long low) {
    if (v < low) {
      throw InvalidOption(name,
                          "must be at least " + std::to_string(low) + ", got " + std::to_string(v));
    }
  };
  at_least("rank", o.rank, 1);
  at_least("max_iters", o.max_iters, 1);
  at_least("memory", o.memory, 1);
  if (!(o.gtol >= 0.0)) throw InvalidOption("gtol", "must be >= 0, got " + number_string(o.gtol));
  if (!(o.ftol >= 0.0)) throw InvalidOption("ftol", "must be >= 0, got " + number_string(o.ftol));
  if (o.loss == GcpLoss::huber && !(o.huber_delta > 0.0 && std::isfinite(o.huber_delta))) {
    throw InvalidOption("huber_delta", "must be positive, got " + number_string(o.huber_delta));
  }
  if (!(o.time_limit >= 0.0)) {
    throw InvalidOption("time_limit", "must be >= 0, got " + number_string(o.time_limit));
  }
}

// The same for GcpSampling (sparse tensors).
inline void validate_gcp_sampling(const GcpSampling& s) {
  const std::pair<const char*, index_t> counts[] = {{"gradient_nonzeros", s.gradient_nonzeros},
                                                    {"gradient_zeros", s.gradient_zeros},
                                                    {"function_nonzeros", s.function_nonzeros},
                                                    {"function_zeros", s.function_zeros}};
  for (const auto& [name, v] : counts)
    if (v < 0) throw InvalidOption(name, "must be >= 0, got " + std::to_string(v));
  if (s.epoch_iters < 1) {
    throw InvalidOption("epoch_iters", "must be at least 1, got " + std::to_string(s.epoch_iters));
  }
  if (!(s.rate > 0.0 && std::isfinite(s.rate)))
    throw InvalidOption("rate", "must be positive, got " + number_string(s.rate));
  if (!(s.decay > 0.0 && s.decay <= 1.0))
    throw InvalidOption("decay", "must be in (0, 1], got " + number_string(s.decay));
  if (s.max_fails < 0)
    throw InvalidOption("max_fails", "must be >= 0, got " + std::to_string(s.max_fails));
}

// Throws "GCP with the <loss> loss needs <what>; the entry at <where> is <v>".
inline void refuse_gcp_value(GcpLoss loss, const char* what, const std::string& where, double v) {
  throw InvalidArgument("GCP with the " + std::string(to_string(loss)) + " loss needs " + what +
                        "; the entry at " + where + " is " + number_string(v));
}

// The start packed mode by mode (column-major I_n x R each): `initial` checked against
// the dims, or random (GcpOptions::seed; `mean` is the data's mean, for the bounded
// losses' scale).
template <class T>
std::vector<double> gcp_start(const std::vector<index_t>& dims, const GcpOptions& o, double mean,
                              CpStart<T> initial) {
  const int order = static_cast<int>(dims.size());
  const index_t r = o.rank;
  std::vector<double> u;
  if (!initial.empty()) {
    if (initial.size() != dims.size()) {
      throw DimensionMismatch("the start needs " + std::to_string(order) +
                              " initial factors, got " + std::to_string(initial.size()));
    }
    for (int n = 0; n < order; ++n) {
      const Matrix<T>& f = initial[static_cast<std::size_t>(n)];
      if (f.rows() != dims[static_cast<std::size_t>(n)] || f.cols() != r) {
        throw DimensionMismatch("initial factor " + std::to_string(n) + " is " +
                                std::to_string(f.rows()) + "x" + std::to_string(f.cols()) +
                                ", expected " + std::to_string(dims[static_cast<std::size_t>(n)]) +
                                "x" + std::to_string(r));
      }
      check_finite(TensorView<const T>(f.data(), {f.rows(), f.cols()}),
                   ("initial factor " + std::to_string(n)).c_str());
      u.insert(u.end(), f.values().begin(), f.values().end());
    }
    const std::string solver = "GCP with the " + std::string(to_string(o.loss)) + " loss";
    if (gcp_loss_is_bounded(o.loss))
      require_nonnegative_start(initial, solver, "its factors are bounded below by zero");
    require_live_components(initial, 1, solver,
                            "its gradient vanishes where two of its factor columns are zero");
    return u;
  }
  std::size_t unknowns = 0;
  for (index_t d : dims) unknowns += static_cast<std::size_t>(d * r);
  u.resize(unknowns);
  Rng rng(o.seed);
  if (gcp_loss_is_bounded(o.loss)) {
    // E[m] = R s^N for factor entries uniform in [s / 2, 3 s / 2): s = (mean / R)^(1/N);
    // away from zero, where these losses' gradients grow as 1 / m^3
    const double target = mean > 0.0 ? mean : 1.0;
    const double s = std::pow(target / static_cast<double>(r), 1.0 / order);
    for (double& v : u) v = s * (0.5 + rng.uniform());
  } else {
    const double scale = 0.5 * std::pow(1.0 / static_cast<double>(r), 1.0 / order);
    for (double& v : u) v = scale * rng.normal();
  }
  return u;
}

// The factors of the packed u (weights one).
template <class T>
KTensor<T> gcp_model(const std::vector<index_t>& dims, index_t r, const std::vector<double>& u) {
  std::vector<Matrix<T>> f;
  std::size_t at = 0;
  for (index_t d : dims) {
    Matrix<T> a(d, r);
    for (T& v : a.values()) v = static_cast<T>(u[at++]);
    f.push_back(std::move(a));
  }
  return KTensor<T>(std::vector<T>(static_cast<std::size_t>(r), T(1)), std::move(f));
}

}  // namespace tenfold::detail
