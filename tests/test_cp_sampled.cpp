// CP-ALS with sampled least squares (solver = sampled, CP-ARLS-LEV): the fit estimated
// from a sample of entries, the schedule of exact fit checks, the fit reached against
// exact ALS, the sketched start, determinism, and the options it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cp/sampled.hpp"
#include "cp_test_util.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold::test {
namespace {

// --- sampled least squares (CP-ARLS-LEV) ---------------------------------------------------

// Exact ALS to convergence: the fit the sampled solver is measured against.
double exact_als_fit(const Tensor<double>& x, index_t rank) {
  CpOptions o;
  o.rank = rank;
  o.max_iters = 1000;
  o.tol = 1e-10;
  o.compress = CpCompress::off;
  return cp_als(x, o).fit;
}

CpOptions sampled_options(index_t rank) {
  CpOptions o;
  o.rank = rank;
  o.solver = CpSolver::sampled;
  o.max_iters = 200;
  o.tol = 1e-5;
  o.seed = 1;
  return o;
}

TEST(CpSampled, FitSampleEstimateIsUnbiasedWithinItsStandardError) {
  // A random tensor and a random rank-3 model (residual entries far from Gaussian: a
  // model of the wrong scale): over 400 independent samples of 1,000 entries the mean
  // estimate lies within 4 standard errors of the mean (sd / sqrt(400)) of the exact
  // ||X - M||^2, and the reported standard error matches the spread of the estimates:
  // the sample sd of 400 estimates is within 4 of its own standard errors (about
  // 1 / sqrt(2 * 399) = 3.5 % relative) of the mean reported one, a margin of 20 %
  // (the heavier-than-Gaussian tails of d^2 widen the first).
  const Tensor<double> x = random_tensor<double>({30, 25, 20}, 31);
  const KTensor<double> m(std::vector<double>{1.5, 0.7, 2.0},
                          {random_matrix<double>(30, 3, 32), random_matrix<double>(25, 3, 33),
                           random_matrix<double>(20, 3, 34)});
  const std::vector<double> full = naive_full(m);
  double exact = 0.0;
  for (index_t i = 0; i < x.numel(); ++i) {
    const double d = x.values()[static_cast<std::size_t>(i)] - full[static_cast<std::size_t>(i)];
    exact += d * d;
  }
  std::vector<const double*> f;
  for (const Matrix<double>& u : m.factors) f.push_back(u.data());
  constexpr int kSamples = 400;
  double sum = 0.0, sum2 = 0.0, se_sum = 0.0;
  for (int k = 0; k < kSamples; ++k) {
    const detail::FitSample<double> sample(x.view(), 1000, 100 + k);
    ASSERT_EQ(sample.size(), 1000);
    const detail::ResidualEstimate e = sample.estimate(f, m.weights.data(), 3);
    ASSERT_GT(e.std_error, 0.0);
    // Each one within 5 of its own standard errors (a 6e-7 two-sided tail, if Gaussian).
    EXPECT_LE(std::abs(e.resid2 - exact), 5.0 * e.std_error) << "sample " << k;
    sum += e.resid2;
    sum2 += e.resid2 * e.resid2;
    se_sum += e.std_error;
  }
  const double mean = sum / kSamples;
  const double sd = std::sqrt((sum2 - kSamples * mean * mean) / (kSamples - 1));
  EXPECT_LE(std::abs(mean - exact), 4.0 * sd / std::sqrt(double{kSamples}));
  EXPECT_NEAR(sd / (se_sum / kSamples), 1.0, 0.2);
}

TEST(CpSampled, FitSampleOfAnExactModelIsZero) {
  const auto p = planted({12, 10, 8}, 3, 0.2, 0.0, 35);
  std::vector<const double*> f;
  for (const Matrix<double>& u : p.truth.factors) f.push_back(u.data());
  const detail::ResidualEstimate e =
      detail::FitSample<double>(p.tensor.view(), 500, 7).estimate(f, p.truth.weights.data(), 3);
  // Rounding only: entries of order 1, each d_e^2 near eps^2.
  const auto numel = static_cast<double>(p.tensor.numel());
  EXPECT_LE(e.resid2, 1e-20 * numel);
  EXPECT_LE(e.std_error, 1e-20 * numel);
}

TEST(CpSampled, AutomaticChecksStopNearTheExactFit) {
  // The default rule (fit_check_every = 0): the estimate decides when to check, the
  // run stops converged at the exact ALS fit (within the sampling's 0.1 %), and the
  // reported fit is the returned model's exact fit.
  const auto p = planted({60, 50, 40}, 5, 0.3, 0.01, 11);
  const double exact = exact_als_fit(p.tensor, 5);
  ASSERT_GT(exact, 0.985);
  CpOptions o = sampled_options(5);
  o.tol = 1e-6;
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_EQ(r.stop, CpStop::converged);
  EXPECT_LT(r.iterations, 100);
  EXPECT_GE(r.fit, 0.999 * exact);
  EXPECT_LE(r.fit, exact + 1e-6);
  EXPECT_GE(factor_match_score(r.model, p.truth), 0.99);
  EXPECT_NEAR(1.0 - r.fit, exact_relative_error(p.tensor, r.model), 1e-12);
  // The estimates of the unchecked sweeps track the exact fit: the last sweep's (checked)
  // and the one before (estimated) differ by less than 1 % of the residual.
  ASSERT_GE(r.fit_history.size(), 2u);
  EXPECT_NEAR(r.fit_history[r.fit_history.size() - 2], r.fit_history.back(), 0.01 * (1 - exact));
}

TEST(CpSampled, AutomaticChecksFollowTheSameIterates) {
  // The check schedule does not change the iterates: the automatic rule's run and one
  // checked only after its last sweep draw the same rows, so the exact fits of that
  // sweep agree, and so do the estimates of the sweeps neither checked.
  const auto p = planted({40, 30, 20}, 4, 0.3, 0.01, 36);
  CpOptions o = sampled_options(4);
  const CpResult<double> a = cp_als(p.tensor, o);
  ASSERT_GT(a.iterations, 5);
  o.fit_check_every = a.iterations;
  o.max_iters = a.iterations;
  const CpResult<double> b = cp_als(p.tensor, o);
  ASSERT_EQ(b.fit_history.size(), a.fit_history.size());
  EXPECT_NEAR(a.fit_history.back(), b.fit_history.back(), 1e-12);
  EXPECT_EQ(a.fit_history[0], b.fit_history[0]);  // no check before the sixth sweep
}

TEST(CpSampled, PlantedProblemReachesTheExactFit) {
  // 1 % noise: the exact fit is about 0.99, and sampled sweeps must come within 0.1 % of
  // it (a relative-error least-squares solution per mode with S = 64 R rows).
  const auto p = planted({60, 50, 40}, 5, 0.3, 0.01, 11);
  const double exact = exact_als_fit(p.tensor, 5);
  ASSERT_GT(exact, 0.985);
  CpOptions o = sampled_options(5);
  o.fit_check_every = 5;
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_EQ(r.stop, CpStop::converged);
  EXPECT_GE(r.fit, 0.999 * exact);
  EXPECT_LE(r.fit, exact + 1e-6);  // the exact optimum is not beaten
  EXPECT_GE(factor_match_score(r.model, p.truth), 0.99);
  // The reported fit is the returned model's, exactly (the best checked one).
  EXPECT_NEAR(1.0 - r.fit, exact_relative_error(p.tensor, r.model), 1e-12);
  // Checks every 5 sweeps: the run stops at one, and returns the best of them.
  EXPECT_EQ(r.iterations % 5, 0);
  double best = 0.0;
  for (std::size_t k = 4; k < r.fit_history.size(); k += 5) best = std::max(best, r.fit_history[k]);
  EXPECT_EQ(r.fit, best);
}

TEST(CpSampled, FloatReachesTheExactFit) {
  const auto p = planted({60, 50, 40}, 5, 0.3, 0.01, 12);
  const double exact = exact_als_fit(p.tensor, 5);
  const Tensor<float> x = convert<float>(p.tensor.view());
  const CpResult<float> r = cp_als(x, sampled_options(5));
  EXPECT_GE(r.fit, 0.999 * exact);
  // The fit formula ||X||^2 + ||M||^2 - 2 <X, M> in float: an error of a few eps ||X||^2
  // in the residual's square moves an error near 0.01 by about 10 eps / (2 0.01) = 3e-5.
  EXPECT_NEAR(1.0 - r.fit, exact_relative_error(x, r.model), 1e-4);
}

TEST(CpSampled, AllRowsIsExactAls) {
  // Samples at least the rows of every Khatri-Rao product: each row once, i.e. the exact
  // update, so the run follows exact ALS from the same start (rounding apart).
  const auto p = planted({12, 10, 8}, 3, 0.5, 0.1, 17);
  CpOptions o;
  o.rank = 3;
  o.init = CpInit::random;
  o.max_iters = 8;
  o.tol = 0.0;
  o.compress = CpCompress::off;
  const CpResult<double> exact = cp_als(p.tensor, o);
  o.solver = CpSolver::sampled;
  o.samples = 12 * 10;  // the most rows of any mode's product
  o.fit_check_every = 1;
  const CpResult<double> r = cp_als(p.tensor, o);
  ASSERT_EQ(r.iterations, 8);
  for (std::size_t k = 0; k < 8; ++k) EXPECT_NEAR(r.fit_history[k], exact.fit_history[k], 1e-10);
}

TEST(CpSampled, RowMajorInPlaceReachesTheExactFit) {
  // NumPy order read in place: the sampled operand sees the memory's modes through the
  // reversed view; the model comes back in the input's mode order.
  const auto p = planted({50, 40, 30}, 4, 0.3, 0.01, 16);
  const double exact = exact_als_fit(p.tensor, 4);
  CpOptions o = sampled_options(4);
  o.layout = Layout::row_major;
  o.row_major_input = RowMajorInput::in_place;
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_GE(r.fit, 0.999 * exact);
  EXPECT_NEAR(1.0 - r.fit, exact_relative_error(p.tensor, r.model), 1e-12);
  EXPECT_GE(factor_match_score(r.model, p.truth), 0.99);
}

TEST(CpSampled, DeterministicGivenTheSeed) {
  const auto p = planted({40, 30, 20, 10}, 4, 0.0, 0.01, 13);
  CpOptions o = sampled_options(4);
  o.max_iters = 12;
  const CpResult<double> a = cp_als(p.tensor, o);
  const CpResult<double> b = cp_als(p.tensor, o);
  EXPECT_EQ(a.fit_history, b.fit_history);
  EXPECT_EQ(a.model.weights, b.model.weights);
  o.seed = 2;
  EXPECT_NE(cp_als(p.tensor, o).fit_history, a.fit_history);  // other rows drawn
}

TEST(CpSampled, StoppedBetweenChecksReportsTheExactFitOfItsModel) {
  // A callback stop after sweep 3 (no check yet): the model's fit is computed at the end.
  const auto p = planted({30, 25, 20}, 3, 0.0, 0.01, 14);
  CpOptions o = sampled_options(3);
  o.callback = [](const CpProgress& q) { return q.iteration < 3; };
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_EQ(r.stop, CpStop::callback);
  EXPECT_EQ(r.iterations, 3);
  EXPECT_NEAR(1.0 - r.fit, exact_relative_error(p.tensor, r.model), 1e-12);
}

// G = V diag(lambda) V^T (n x n) for the random orthogonal V = I - 2 w w^T / (w^T w) (a
// Householder reflection, w Gaussian); returns V.
std::vector<double> psd_with_spectrum(index_t n, const std::vector<double>& lambda,
                                      std::uint64_t seed, std::vector<double>& g) {
  detail::Rng rng(seed);
  std::vector<double> w(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n * n));
  double ww = 0.0;
  for (double& a : w) {
    a = rng.normal();
    ww += a * a;
  }
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) v[i + j * n] = (i == j ? 1.0 : 0.0) - 2.0 * w[i] * w[j] / ww;
  g.assign(static_cast<std::size_t>(n * n), 0.0);
  for (index_t k = 0; k < n; ++k)
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < n; ++i) g[i + j * n] += lambda[k] * v[i + k * n] * v[j + k * n];
  return v;
}

TEST(CpSampled, SketchedEigenvectorsMatchTheLeadingOnes) {
  // The nvecs start of the sampled solver: the leading r eigenvectors of a PSD matrix by
  // subspace iteration. With the top r eigenvalues in [10, 20] and the rest below 0.01,
  // three passes leave an error near (0.01 / 10)^3 in each vector, whose cosine with the
  // exact one (up to sign) is then 1 to rounding (one pass misses by ~3e-9).
  const index_t n = 120, r = 6;
  std::vector<double> lambda(static_cast<std::size_t>(n));
  for (index_t k = 0; k < n; ++k) lambda[k] = k < r ? 20.0 - 2.0 * k : 0.01 / (1.0 + k);
  std::vector<double> g;
  const std::vector<double> v = psd_with_spectrum(n, lambda, 5, g);
  std::vector<double> u(static_cast<std::size_t>(n * r));
  ASSERT_TRUE(detail::leading_eigenvectors_sketched(n, g.data(), r, 9, u.data()));
  for (index_t j = 0; j < r; ++j) {
    double d = 0.0, norm = 0.0;
    for (index_t i = 0; i < n; ++i) {
      d += u[i + j * n] * v[i + j * n];
      norm += u[i + j * n] * u[i + j * n];
    }
    EXPECT_NEAR(norm, 1.0, 1e-12) << "vector " << j;
    EXPECT_NEAR(std::abs(d), 1.0, 1e-12) << "vector " << j;
  }
  // A Gram of rank 3 has no 16-dimensional range: the solver says so and writes nothing.
  for (index_t k = 3; k < n; ++k) lambda[k] = 0.0;
  psd_with_spectrum(n, lambda, 6, g);
  std::fill(u.begin(), u.end(), -7.0);
  EXPECT_FALSE(detail::leading_eigenvectors_sketched(n, g.data(), r, 9, u.data()));
  EXPECT_TRUE(std::all_of(u.begin(), u.end(), [](double a) { return a == -7.0; }));
}

TEST(CpSampled, SketchedStartReachesTheExactFit) {
  // Modes of at least 4 (R + 10) entries start from the sketched eigenvectors of the
  // sampled Grams; the run must still reach the exact fit.
  const auto p = planted({70, 64, 60}, 4, 0.3, 0.01, 21);
  const double exact = exact_als_fit(p.tensor, 4);
  CpOptions o = sampled_options(4);
  o.init = CpInit::nvecs;
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_EQ(r.init, CpInit::nvecs);
  EXPECT_GE(r.fit, 0.999 * exact);
  EXPECT_LE(r.fit, exact + 1e-6);
  EXPECT_GE(factor_match_score(r.model, p.truth), 0.99);
}

TEST(CpSampled, OptionsValidated) {
  const auto p = planted({10, 9, 8}, 2, 0.0, 0.0, 15);
  CpOptions o = sampled_options(2);
  const auto refused = [&](const CpOptions& bad, const std::string& message) {
    expect_throw_with<InvalidArgument>([&] { cp_als(p.tensor, bad); }, message);
  };
  // Option errors name the option's field (the program and Python map it to theirs).
  CpOptions bad = o;
  bad.samples = -1;
  expect_throw_with<InvalidOption>([&] { cp_als(p.tensor, bad); },
                                   "samples must be >= 0 (0: automatic), got -1");
  bad = o;
  bad.fit_check_every = -1;
  expect_throw_with<InvalidOption>([&] { cp_als(p.tensor, bad); },
                                   "fit_check_every must be >= 0 (0: automatic), got -1");
  bad = o;
  bad.nonnegative = true;
  refused(bad, "solver = sampled cannot be combined with nonnegative");
  bad = o;
  bad.line_search = true;
  refused(bad, "solver = sampled cannot be combined with line_search");
  bad = o;
  bad.n_starts = 2;
  refused(bad, "solver = sampled cannot be combined with n_starts > 1 (got 2)");
  bad = o;
  bad.compress = CpCompress::on;
  refused(bad, "solver = sampled cannot be combined with compress = on");
  bad = o;
  bad.orthogonalise = 1;
  refused(bad, "solver = sampled cannot be combined with orthogonalise");
  bad = o;
  bad.sparsity = 3;
  refused(bad, "solver = sampled cannot be combined with sparsity");
  bad = o;
  bad.fixed_modes = {0};
  {
    const std::vector<Matrix<double>> start = p.truth.factors;
    expect_throw_with<InvalidArgument>([&] { cp_als(p.tensor, bad, start); },
                                       "solver = sampled cannot be combined with fixed modes");
  }
  bad = o;
  bad.backend = Backend::reference;
  refused(bad, "solver = sampled runs on the cpu backend only, got backend reference");
  expect_throw_with<InvalidArgument>([&] { cp_als(p.truth, o); },
                                     "solver = sampled needs a dense tensor without a mask, got "
                                     "a tensor given as a model");
  const std::vector<std::uint8_t> all(static_cast<std::size_t>(p.tensor.numel()), 1);
  expect_throw_with<InvalidArgument>(
      [&] { cp_als(p.tensor, TensorView<const std::uint8_t>(all.data(), p.tensor.dims()), o); },
      "solver = sampled needs a dense tensor without a mask, got a mask of observed entries");
  expect_throw_with<InvalidArgument>(
      [&] { cp_als(SparseTensor<double>::from_dense(p.tensor.view()), o); },
      "solver = sampled needs a dense tensor without a mask, got a sparse tensor");
  expect_throw_with<InvalidArgument>([] { parse_cp_solver("fast"); },
                                     "unknown solver 'fast' (expected exact or sampled)");
  EXPECT_EQ(parse_cp_solver(to_string(CpSolver::sampled)), CpSolver::sampled);
}

}  // namespace
}  // namespace tenfold::test
