// GCP: the gradient against finite differences, planted models for each loss, and the
// data each loss refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "cp/gcp_objective.hpp"
#include "cp/lbfgs.hpp"
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

TEST(Gcp, GradientMatchesFiniteDifferencesForEveryLossWithAndWithoutMask) {
  const std::vector<index_t> dims = {4, 3, 5};
  const index_t r = 2;
  auto c = detail::make_compute<double>(Backend::cpu);
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> u(-0.5, 0.5), pos(0.3, 0.9);
  Tensor<double> x(dims);
  Tensor<std::uint8_t> observed(dims);
  for (index_t i = 0; i < observed.numel(); ++i) observed[i] = gen() % 3 != 0;
  for (GcpLoss loss : {GcpLoss::gaussian, GcpLoss::poisson, GcpLoss::bernoulli, GcpLoss::gamma,
                       GcpLoss::rayleigh, GcpLoss::huber}) {
    const bool bounded = gcp_loss_is_bounded(loss);
    for (index_t i = 0; i < x.numel(); ++i) {
      x[i] = loss == GcpLoss::gaussian || loss == GcpLoss::huber ? 3 * u(gen)
             : bounded                                           ? 2 * pos(gen)
                                                                 : static_cast<double>(gen() % 2);
    }
    for (bool masked : {false, true}) {
      const TensorView<const std::uint8_t> w =
          masked ? observed.view() : TensorView<const std::uint8_t>();
      detail::GcpObjective<double> objective(*c, x.view(), w, loss, 0.25, r);
      // Bounded losses need m > 0: positive factors.
      std::vector<double> v(static_cast<std::size_t>((4 + 3 + 5) * r)), g, unused;
      for (double& e : v) e = bounded ? pos(gen) : u(gen);
      objective.evaluate(v, g);
      // Central differences: error O(h^2) ~ 1e-8 relative to the scale of the terms.
      const double h = 1e-5;
      for (std::size_t k = 0; k < v.size(); ++k) {
        std::vector<double> plus = v, minus = v;
        plus[k] += h;
        minus[k] -= h;
        const double fd =
            (objective.evaluate(plus, unused) - objective.evaluate(minus, unused)) / (2 * h);
        EXPECT_NEAR(g[k], fd, 1e-6 * std::max(1.0, std::abs(fd)))
            << to_string(loss) << (masked ? " masked " : " ") << k;
      }
    }
  }
}

// The losses' values at points worked by hand.
TEST(Gcp, LossValuesAtKnownPoints) {
  const double pi = 3.14159265358979323846;
  const detail::LossAt gamma = detail::loss_at(GcpLoss::gamma, 2.0, 4.0, 0.25);
  EXPECT_NEAR(gamma.f, 0.5 + std::log(4.0), 1e-9);
  EXPECT_NEAR(gamma.d, 1.0 / 4 - 2.0 / 16, 1e-9);
  const detail::LossAt rayleigh = detail::loss_at(GcpLoss::rayleigh, 2.0, 4.0, 0.25);
  EXPECT_NEAR(rayleigh.f, 2 * std::log(4.0) + pi / 16, 1e-9);
  EXPECT_NEAR(rayleigh.d, 0.5 - pi / 2 * 4 / 64, 1e-9);
  // Quadratic inside the threshold, linear with slope 2 delta outside, continuous.
  EXPECT_DOUBLE_EQ(detail::loss_at(GcpLoss::huber, 1.0, 1.2, 0.25).f, 0.2 * 0.2);
  EXPECT_NEAR(detail::loss_at(GcpLoss::huber, 1.0, 3.0, 0.25).f, 2 * 0.25 * 2 - 0.0625, 1e-12);
  EXPECT_DOUBLE_EQ(detail::loss_at(GcpLoss::huber, 1.0, -3.0, 0.25).d, -0.5);
}

// The vectorised Bernoulli and Poisson losses of a block (loss_sum) and the scalar ones
// (loss_at) against a long-double reference, entry by entry, on random and extreme link
// values: relative error within 4 units of double rounding, also where the loss or its
// derivative is tiny (m near 0, and |m| up to 745, where e^-|m| is subnormal: there within
// one subnormal step). For binary x, f = softplus(m) or softplus(-m) and df/dm =
// logistic(m) or -logistic(-m).
TEST(Gcp, BernoulliAndPoissonLossesAreAccurateOverTheWholeRange) {
  using Ld = long double;
  const auto softplus = [](Ld a) {
    return std::max(a, Ld(0)) + std::log1p(std::exp(-std::abs(a)));
  };
  const auto logistic = [](Ld a) {
    return a >= 0 ? 1 / (1 + std::exp(-a)) : std::exp(a) / (1 + std::exp(a));
  };
  std::vector<double> ms = {0.0,     -0.0,   1e-300, -1e-300, 1e-17, -1e-17, 1e-9,  -1e-9, 0.3465,
                            -0.3466, 0.5,    -0.5,   1.0,     -1.0,  36.0,   -36.0, 40.5,  -40.5,
                            700.0,   -700.0, 708.5,  -708.5,  720.0, -720.0, 744.0, -744.0};
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> exponent(-20.0, std::log10(740.0));
  for (int i = 0; i < 2000; ++i)
    ms.push_back((i % 2 == 0 ? 1.0 : -1.0) * std::pow(10.0, exponent(gen)));
  const double tol = 4.0 * std::numeric_limits<double>::epsilon();
  // |got - want| / |want|, the error less one subnormal step counted
  const auto rel = [](double got, Ld want) {
    const Ld err =
        std::max(std::abs(got - want) - std::numeric_limits<double>::denorm_min(), Ld(0));
    return want == 0 ? err : err / std::abs(want);
  };
  for (double m : ms) {
    for (double x : {0.0, 1.0}) {
      const Ld f = x == 0.0 ? softplus(m) : softplus(-static_cast<Ld>(m));
      const Ld d = x == 0.0 ? logistic(m) : -logistic(-static_cast<Ld>(m));
      double y = 0.0;
      const double sum = detail::loss_sum(GcpLoss::bernoulli, 0.25, &x, &m, nullptr, 1, &y);
      EXPECT_LE(rel(sum, f), tol) << "bernoulli f at x = " << x << ", m = " << m;
      EXPECT_LE(rel(y, d), tol) << "bernoulli df/dm at x = " << x << ", m = " << m;
      const detail::LossAt l = detail::loss_at(GcpLoss::bernoulli, x, m, 0.25);
      EXPECT_LE(rel(l.f, f), tol) << "scalar bernoulli f at x = " << x << ", m = " << m;
      EXPECT_LE(rel(l.d, d), tol) << "scalar bernoulli df/dm at x = " << x << ", m = " << m;
    }
    if (m > 709.0) continue;  // e^m overflows
    // Poisson: e^m - x m, compared on e^m alone (x = 0), where rounding is not masked.
    const double zero = 0.0;
    double y = 0.0;
    const double e = detail::loss_sum(GcpLoss::poisson, 0.25, &zero, &m, nullptr, 1, &y);
    EXPECT_LE(rel(e, std::exp(static_cast<Ld>(m))), tol) << "poisson e^m at m = " << m;
    EXPECT_EQ(y, e);
  }
  // Overflow and underflow at the ends, NaN kept.
  double y = 0.0, zero = 0.0, big = 710.0, small = -800.0, nan = std::nan("");
  EXPECT_TRUE(std::isinf(detail::loss_sum(GcpLoss::poisson, 0.25, &zero, &big, nullptr, 1, &y)));
  EXPECT_EQ(detail::loss_sum(GcpLoss::poisson, 0.25, &zero, &small, nullptr, 1, &y), 0.0);
  EXPECT_TRUE(std::isnan(detail::loss_sum(GcpLoss::poisson, 0.25, &zero, &nan, nullptr, 1, &y)));
}

// loss_sum over a block with a mask: unobserved entries (NaN data there) count 0 and get a
// zero derivative; the observed ones match loss_at entry by entry and in sum, for every
// loss and both value types.
template <class T>
void check_block_sums() {
  const index_t n = 1000;
  std::mt19937_64 gen(9);
  std::uniform_real_distribution<double> u(0.05, 3.0);
  std::vector<T> x(static_cast<std::size_t>(n)), m(x.size()), y(x.size());
  std::vector<std::uint8_t> observed(x.size());
  for (GcpLoss loss : {GcpLoss::gaussian, GcpLoss::poisson, GcpLoss::bernoulli, GcpLoss::gamma,
                       GcpLoss::rayleigh, GcpLoss::huber}) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      observed[i] = i % 3 != 0;
      m[i] = static_cast<T>(loss == GcpLoss::gamma || loss == GcpLoss::rayleigh ? u(gen)
                                                                                : u(gen) - 1.5);
      x[i] = loss == GcpLoss::bernoulli ? T(i % 2) : static_cast<T>(std::floor(u(gen)));
      if (observed[i] == 0) x[i] = std::numeric_limits<T>::quiet_NaN();
    }
    const double sum =
        detail::loss_sum(loss, 0.25, x.data(), m.data(), observed.data(), n, y.data());
    double want = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (observed[i] == 0) {
        EXPECT_EQ(y[i], T(0));
        continue;
      }
      const detail::LossAt l = detail::loss_at(loss, x[i], m[i], 0.25);
      want += l.f;
      EXPECT_NEAR(y[i], l.d, 8 * std::numeric_limits<T>::epsilon() * (1 + std::abs(l.d)));
    }
    EXPECT_NEAR(sum, want, 1e-12 * (1 + std::abs(want))) << to_string(loss);
  }
}

TEST(Gcp, BlockLossSumsSkipUnobservedEntries) {
  check_block_sums<double>();
  check_block_sums<float>();
}

// min 1/2 u^T A u - b^T u subject to u >= 0, with A positive definite and b chosen so
// that u* (zeros in three places) satisfies the KKT conditions: A u* - b is zero where
// u* > 0 and positive where u* = 0. The minimiser is unique, so it is u*.
TEST(Gcp, ProjectedLbfgsSolvesABoundConstrainedQuadratic) {
  const std::size_t n = 8;
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> z(-1.0, 1.0);
  std::vector<double> a(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) a[i * n + j] = 0.2 * z(gen);
  std::vector<double> sym(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      sym[i * n + j] = a[i * n + j] + a[j * n + i] + (i == j ? 4.0 : 0.0);
  const std::vector<double> u_star = {1.0, 0.0, 2.0, 0.5, 0.0, 3.0, 0.0, 1.5};
  std::vector<double> b(n);
  for (std::size_t i = 0; i < n; ++i) {
    double au = 0.0;
    for (std::size_t j = 0; j < n; ++j) au += sym[i * n + j] * u_star[j];
    b[i] = au - (u_star[i] == 0.0 ? 1.0 + 0.5 * static_cast<double>(i) : 0.0);
  }
  const detail::LbfgsFunction quadratic = [&](const std::vector<double>& u,
                                              std::vector<double>& g) {
    g.assign(n, 0.0);
    double f = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) g[i] += sym[i * n + j] * u[j];
      f += 0.5 * u[i] * g[i] - b[i] * u[i];
      g[i] -= b[i];
    }
    return f;
  };
  detail::LbfgsSettings settings;
  settings.lower = 0.0;
  settings.gtol = 1e-12;
  settings.ftol = 0.0;
  std::vector<double> u(n, 1.0);
  const detail::LbfgsOutcome out =
      detail::minimize_lbfgs(quadratic, u, settings, {}, detail::Clock::now());
  EXPECT_EQ(out.stop, CpStop::converged);
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(u[i], u_star[i], 1e-7) << i;
  // Without the bound the minimiser is A^-1 b, which has negative entries here.
  settings.lower = -std::numeric_limits<double>::infinity();
  std::vector<double> free(n, 1.0);
  detail::minimize_lbfgs(quadratic, free, settings, {}, detail::Clock::now());
  EXPECT_LT(*std::min_element(free.begin(), free.end()), -1e-3);
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

// A rank-R model with factor entries uniform in (0.5, 1.5): positive means.
KTensor<double> positive_model(const std::vector<index_t>& dims, index_t r, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> z(0.5, 1.5);
  KTensor<double> k;
  k.weights.assign(static_cast<std::size_t>(r), 1.0);
  for (index_t d : dims) {
    Matrix<double> f(d, r);
    for (double& v : f.values()) v = z(gen);
    // Distinct components: one row block doubled per component.
    for (index_t i = 0; i < d; ++i) f(i, i * r / d) *= 3.0;
    k.factors.push_back(std::move(f));
  }
  return k;
}

// Gamma data (shape 4, mean m) and Rayleigh amplitudes (mean m) of a planted positive
// model m: the bounded fit stays nonnegative and finds m's components again.
TEST(Gcp, RecoversPlantedGammaAndRayleighMeans) {
  const std::vector<index_t> dims = {30, 25, 20};
  const KTensor<double> truth = positive_model(dims, 2, 6);
  const Tensor<double> m = truth.full();
  for (GcpLoss loss : {GcpLoss::gamma, GcpLoss::rayleigh}) {
    std::mt19937_64 gen(7);
    Tensor<double> x(dims);
    for (index_t i = 0; i < x.numel(); ++i) {
      if (loss == GcpLoss::gamma) {
        x[i] = std::gamma_distribution<double>(4.0, m[i] / 4.0)(gen);
      } else {  // sigma sqrt(-2 log U), mean sigma sqrt(pi / 2)
        const double sigma = m[i] * std::sqrt(2.0 / 3.14159265358979323846);
        x[i] = sigma * std::sqrt(-2.0 * std::log(1.0 - std::generate_canonical<double, 53>(gen)));
      }
    }
    GcpOptions o;
    o.rank = 2;
    o.loss = loss;
    o.max_iters = 500;
    const GcpResult<double> res = gcp(x, o);
    EXPECT_GT(factor_match_score(res.model, truth), 0.95) << to_string(loss);
    for (const Matrix<double>& f : res.model.factors)
      EXPECT_GE(*std::min_element(f.values().begin(), f.values().end()), 0.0);
  }
}

// Gaussian noise with 5% gross outliers: the huber fit finds the components, closer
// than least squares does.
TEST(Gcp, HuberLossResistsOutliers) {
  const std::vector<index_t> dims = {30, 25, 20};
  const KTensor<double> truth = planted_model(dims, 2, 1.0, 8);
  Tensor<double> x = truth.full();
  std::mt19937_64 gen(9);
  std::normal_distribution<double> noise(0.0, 0.02);
  for (index_t i = 0; i < x.numel(); ++i) x[i] += gen() % 20 == 0 ? 10.0 : noise(gen);
  GcpOptions o;
  o.rank = 2;
  o.max_iters = 500;
  o.loss = GcpLoss::huber;
  o.huber_delta = 0.1;
  const double huber = factor_match_score(gcp(x, o).model, truth);
  o.loss = GcpLoss::gaussian;
  const double gaussian = factor_match_score(gcp(x, o).model, truth);
  EXPECT_GT(huber, 0.95);
  EXPECT_GT(huber, gaussian);
}

// A third of the entries missing (NaN there): the masked fit recovers the exact model,
// and the objective counts the observed entries only.
TEST(Gcp, MaskLeavesMissingEntriesOut) {
  const KTensor<double> truth = planted_model({12, 10, 9}, 2, 1.0, 10);
  Tensor<double> x = truth.full();
  Tensor<std::uint8_t> observed(x.dims());
  std::mt19937_64 gen(11);
  for (index_t i = 0; i < x.numel(); ++i) {
    observed[i] = gen() % 3 != 0;
    if (observed[i] == 0) x[i] = std::numeric_limits<double>::quiet_NaN();
  }
  GcpOptions o;
  o.rank = 2;
  o.max_iters = 2000;
  o.ftol = 0.0;
  o.gtol = 1e-9;
  const GcpResult<double> res = gcp(x, observed.view(), o);
  EXPECT_LT(res.objective, 1e-8);
  EXPECT_GT(factor_match_score(res.model, truth), 0.99);
  expect_throw_with<InvalidArgument>([&] { gcp(x, o); },
                                     "tensor has a non-finite entry (NaN) at (");
  Tensor<std::uint8_t> wrong({12, 10, 8});
  expect_throw_with<DimensionMismatch>([&] { gcp(x, wrong.view(), o); },
                                       "the mask is (12, 10, 8) but the tensor is (12, 10, 9)");
  Tensor<std::uint8_t> none(x.dims());
  expect_throw_with<InvalidArgument>([&] { gcp(x, none.view(), o); },
                                     "the mask marks no entry observed");
}

// f(x, m) summed over every entry of a dense tensor, for the sparse fits' true objective.
double dense_objective(const Tensor<double>& x, const KTensor<double>& model, GcpLoss loss) {
  const Tensor<double> m = model.full();
  double f = 0.0;
  for (index_t i = 0; i < x.numel(); ++i) f += detail::loss_at(loss, x[i], m[i], 0.25).f;
  return f;
}

// Sparse bits x ~ Bernoulli(logistic(m)) of log-odds m = -4 + 6 [in block]_1 + 6
// [in block]_2 (about 7% ones): stochastic GCP on the sparse tensor finds the blocks
// again, and its true objective is close to that of full L-BFGS on the dense copy.
TEST(Gcp, SparseStratifiedSamplingRecoversPlantedBlocks) {
  const std::vector<index_t> dims = {60, 50, 40};
  KTensor<double> truth;
  truth.weights.assign(3, 1.0);
  for (index_t d : dims) {
    Matrix<double> f(d, 3);
    for (index_t i = 0; i < d; ++i) {
      f(i, 0) = -std::cbrt(4.0);
      f(i, 1) = i < d / 3 ? std::cbrt(6.0) : 0.0;
      f(i, 2) = i >= d / 2 && i < d / 2 + d / 3 ? std::cbrt(6.0) : 0.0;
    }
    truth.factors.push_back(std::move(f));
  }
  const Tensor<double> m = truth.full();
  std::mt19937_64 gen(12);
  Tensor<double> x(dims);
  for (index_t i = 0; i < x.numel(); ++i)
    x[i] = static_cast<double>(std::bernoulli_distribution(1 / (1 + std::exp(-m[i])))(gen));
  const SparseTensor<double> sx = SparseTensor<double>::from_dense(x.view());
  GcpOptions o;
  o.rank = 3;
  o.loss = GcpLoss::bernoulli;
  o.max_iters = 100;
  o.seed = 1;
  o.sampling.epoch_iters = 200;
  o.sampling.rate = 1e-2;
  const GcpResult<double> sparse = gcp(sx, o);
  EXPECT_GT(factor_match_score(sparse.model, truth), 0.9);
  o.max_iters = 500;
  const GcpResult<double> dense = gcp(x, o);
  const double f_sparse = dense_objective(x, sparse.model, o.loss);
  EXPECT_LT(f_sparse, 1.02 * dense.objective);
  // The final estimate is an estimate of that objective.
  EXPECT_NEAR(sparse.objective, f_sparse, 0.05 * f_sparse);
  // Epochs are undone when they fail: the kept estimates never rise.
  for (std::size_t i = 1; i < sparse.objective_history.size(); ++i)
    EXPECT_LE(sparse.objective_history[i], sparse.objective_history[i - 1]);
}

TEST(Gcp, SparseRefusesWhatTheLossCannotModel) {
  const SparseTensor<double> x({3, 4}, {1, 2, 0, 3}, {1.0, 2.0});
  GcpOptions o;
  o.loss = GcpLoss::bernoulli;
  expect_throw_with<InvalidArgument>([&] { gcp(x, o); },
                                     "binary data (0 or 1); the entry at (2, 3) is 2");
  const SparseTensor<double> neg({3, 4}, {1, 2, 0, 3}, {1.0, -2.0});
  o.loss = GcpLoss::gamma;
  expect_throw_with<InvalidArgument>(
      [&] { gcp(neg, o); }, "gamma loss needs nonnegative data; the entry at (2, 3) is -2");
  o.loss = GcpLoss::poisson;
  o.sampling.epoch_iters = 0;
  expect_throw_with<InvalidArgument>([&] { gcp(x, o); }, "epoch_iters must be at least 1, got 0");
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
  x(1, 2) = -0.5;
  o.loss = GcpLoss::rayleigh;
  expect_throw_with<InvalidArgument>(
      [&] { gcp(x, o); }, "GCP with the rayleigh loss needs nonnegative data; the entry at (1, 2)");
  o.loss = GcpLoss::huber;
  o.huber_delta = 0.0;
  expect_throw_with<InvalidArgument>([&] { gcp(x, o); }, "huber_delta must be positive, got 0");
  expect_throw_with<InvalidArgument>(
      [] { parse_gcp_loss("beta"); },
      "unknown loss 'beta' (expected gaussian, poisson, bernoulli, gamma, rayleigh or huber)");
}

}  // namespace
}  // namespace tenfold
