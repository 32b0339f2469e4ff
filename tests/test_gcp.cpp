// GCP: the gradient against finite differences, planted models for each loss, and the
// data each loss refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cp/gcp_objective.hpp"
#include "expect_throw.hpp"
#include "tenfold/error.hpp"
#include "tenfold/gcp.hpp"

namespace tenfold {
namespace {

using test::expect_throw_with;

// A rank-R model on the link scale with factor entries uniform in (-s, s), s^N = scale
// (so |m| <= R scale: bounded rates and odds).
KTensor<double> planted_model(const std::vector<index_t>& dims, index_t r, double scale,
                              std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> z(-1.0, 1.0);
  KTensor<double> k;
  k.weights.assign(static_cast<std::size_t>(r), 1.0);
  const double s = std::pow(scale, 1.0 / static_cast<double>(dims.size()));
  for (index_t d : dims) {
    Matrix<double> f(d, r);
    for (double& v : f.values()) v = s * z(gen);
    k.factors.push_back(std::move(f));
  }
  return k;
}

TEST(Gcp, GradientMatchesFiniteDifferencesForEveryLoss) {
  const std::vector<index_t> dims = {4, 3, 5};
  const index_t r = 2;
  auto c = detail::make_compute<double>(Backend::cpu);
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  Tensor<double> x(dims);
  for (GcpLoss loss : {GcpLoss::gaussian, GcpLoss::poisson, GcpLoss::bernoulli}) {
    for (index_t i = 0; i < x.numel(); ++i)
      x[i] = loss == GcpLoss::gaussian ? u(gen) : static_cast<double>(gen() % 2);
    detail::GcpObjective<double> objective(*c, x.view(), loss, r);
    std::vector<double> w(static_cast<std::size_t>((4 + 3 + 5) * r)), g, unused;
    for (double& v : w) v = u(gen);
    objective.evaluate(w, g);
    // Central differences: error O(h^2) ~ 1e-8 relative to the scale of the terms.
    const double h = 1e-5;
    for (std::size_t k = 0; k < w.size(); ++k) {
      std::vector<double> plus = w, minus = w;
      plus[k] += h;
      minus[k] -= h;
      const double fd =
          (objective.evaluate(plus, unused) - objective.evaluate(minus, unused)) / (2 * h);
      EXPECT_NEAR(g[k], fd, 1e-6 * std::max(1.0, std::abs(fd))) << to_string(loss) << " " << k;
    }
  }
}

TEST(Gcp, GaussianLossFitsAnExactModel) {
  const KTensor<double> truth = planted_model({10, 9, 8}, 3, 1.0, 2);
  const Tensor<double> x = truth.full();
  GcpOptions o;
  o.rank = 3;
  o.max_iters = 2000;
  o.ftol = 0.0;
  o.gtol = 1e-9;
  const GcpResult<double> res = gcp(x, o);
  EXPECT_LT(res.objective, 1e-10 * std::pow(x.view().numel(), 1.0));
  EXPECT_GT(factor_match_score(res.model, truth), 0.99);
  // Armijo steps never raise the objective.
  for (std::size_t i = 1; i < res.objective_history.size(); ++i)
    EXPECT_LE(res.objective_history[i], res.objective_history[i - 1]);
}

// Counts x ~ Poisson(exp(m)) and bits x ~ Bernoulli(logistic(m)) of a planted model m:
// the fit finds m's components again.
TEST(Gcp, RecoversPlantedLogRatesAndLogOdds) {
  const std::vector<index_t> dims = {30, 25, 20};
  for (GcpLoss loss : {GcpLoss::poisson, GcpLoss::bernoulli}) {
    const KTensor<double> truth = planted_model(dims, 2, loss == GcpLoss::poisson ? 1.0 : 2.0, 3);
    const Tensor<double> m = truth.full();
    std::mt19937_64 gen(4);
    Tensor<double> x(dims);
    for (index_t i = 0; i < x.numel(); ++i) {
      x[i] = loss == GcpLoss::poisson
                 ? static_cast<double>(std::poisson_distribution<int>(std::exp(m[i]))(gen))
                 : static_cast<double>(std::bernoulli_distribution(1 / (1 + std::exp(-m[i])))(gen));
    }
    GcpOptions o;
    o.rank = 2;
    o.loss = loss;
    o.max_iters = 500;
    const GcpResult<double> res = gcp(x, o);
    EXPECT_GT(factor_match_score(res.model, truth), 0.9) << to_string(loss);
  }
}

TEST(Gcp, RefusesDataTheLossCannotModel) {
  Tensor<double> x({2, 3});
  x(1, 2) = -1.0;
  GcpOptions o;
  o.loss = GcpLoss::poisson;
  expect_throw_with<InvalidArgument>([&] { gcp(x, o); },
                                     "nonnegative counts; the entry at (1, 2) is -1");
  x(1, 2) = 0.5;
  o.loss = GcpLoss::bernoulli;
  expect_throw_with<InvalidArgument>([&] { gcp(x, o); },
                                     "binary data (0 or 1); the entry at (1, 2) is 0.5");
  expect_throw_with<InvalidArgument>(
      [] { parse_gcp_loss("huber"); },
      "unknown loss 'huber' (expected gaussian, poisson or bernoulli)");
}

}  // namespace
}  // namespace tenfold
