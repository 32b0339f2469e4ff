// CP-ALS: known answers, recovery of planted factors, fit bookkeeping, stopping
// rules, determinism, regularisation and fallbacks. Bad input is in
// test_cp_als_errors.cpp, the closed-form fit's resolution in test_cp_fit_resolution.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backend_test_util.hpp"
#include "cp_test_util.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::test {
namespace {

template <class U, class T>
KTensor<U> convert_model(const KTensor<T>& k) {
  KTensor<U> m;
  for (T w : k.weights) m.weights.push_back(static_cast<U>(w));
  for (const Matrix<T>& f : k.factors) {
    m.factors.emplace_back(f.rows(), f.cols(),
                           std::vector<U>(f.values().begin(), f.values().end()));
  }
  return m;
}

template <class T>
void expect_finite(const CpResult<T>& r) {
  for (T w : r.model.weights) EXPECT_TRUE(std::isfinite(w));
  for (const Matrix<T>& f : r.model.factors)
    for (T v : f.values()) EXPECT_TRUE(std::isfinite(v));
  for (double f : r.fit_history) EXPECT_TRUE(std::isfinite(f));
}

// --- known answer -------------------------------------------------------------------

// A suite run once per backend whose CP options are made for that backend.
class OnEachBackendCp : public OnEachBackend {
 protected:
  // Options of rank `rank` on this suite's backend, the rest at their defaults.
  CpOptions options(index_t rank) const {
    CpOptions o;
    o.backend = backend();
    o.rank = rank;
    return o;
  }
};

class CpAlsKnownAnswer : public OnEachBackendCp {};

TEST_P(CpAlsKnownAnswer, ExactRankTwoFromIntegerFactors) {
  // X = a1 o b1 o c1 + a2 o b2 o c2 (2 x 3 x 4). Every factor has two independent
  // columns (k-rank 2), so 2 + 2 + 2 >= 2 R + 2 and the CP is unique (Kruskal).
  const Matrix<double> a(2, 2, {1, 0, /**/ 1, 1});
  const Matrix<double> b(3, 2, {1, 2, 0, /**/ 0, 1, 1});
  const Matrix<double> c(4, 2, {1, 0, 1, 2, /**/ 2, 1, 0, 1});
  const KTensor<double> truth({1.0, 1.0}, {a, b, c});
  const Tensor<double> x = truth.full();
  // Entries by hand: X(i,j,k) = a1_i b1_j c1_k + a2_i b2_j c2_k.
  EXPECT_EQ(x(0, 0, 0), 1.0 * 1 * 1 + 1.0 * 0 * 2);
  EXPECT_EQ(x(1, 2, 3), 0.0 * 0 * 2 + 1.0 * 1 * 1);
  EXPECT_EQ(x(0, 1, 0), 1.0 * 2 * 1 + 1.0 * 1 * 2);
  EXPECT_EQ(x(1, 1, 2), 0.0 * 2 * 1 + 1.0 * 1 * 0);

  // Fixed start: the true factors plus a fixed perturbation of +-0.1 and +-0.2.
  CpOptions o = options(2);
  o.init = CpInit::given;
  o.tol = 0.0;  // the cheap fit saturates near sqrt(eps): run a fixed number of sweeps
  o.max_iters = 200;
  std::vector<Matrix<double>> start;
  for (const Matrix<double>& f : truth.factors) {
    Matrix<double> g = f;
    for (index_t i = 0; i < g.size(); ++i)
      g.values()[static_cast<std::size_t>(i)] += 0.1 * static_cast<double>((i * 7) % 5 - 2);
    start.push_back(g);
  }
  const CpResult<double> r = cp_als(x, o, start);
  EXPECT_EQ(r.stop, CpStop::max_iters);
  EXPECT_LT(exact_relative_error(x, r.model), 1e-12);
  // Normalised weights: ||a1|| ||b1|| ||c1|| = 1 sqrt(5) sqrt(6), ||a2|| ||b2|| ||c2|| = 2 sqrt(6).
  ASSERT_EQ(r.model.rank(), 2);
  EXPECT_NEAR(r.model.weights[0], std::sqrt(30.0), 1e-10 * std::sqrt(30.0));
  EXPECT_NEAR(r.model.weights[1], 2.0 * std::sqrt(6.0), 1e-10 * std::sqrt(6.0));
  EXPECT_NEAR(factor_match_score(r.model, truth), 1.0, 1e-10);
  // Unit columns, signs fixed so each column's largest entry is positive (here all are).
  for (const Matrix<double>& f : r.model.factors)
    for (index_t j = 0; j < 2; ++j) {
      double s = 0.0;
      for (index_t i = 0; i < f.rows(); ++i) {
        s += f(i, j) * f(i, j);
        EXPECT_GT(f(i, j), -1e-10);
      }
      EXPECT_NEAR(s, 1.0, 1e-14);
    }
}

// --- recovery of planted factors ------------------------------------------------------

struct Planted {
  std::vector<index_t> dims;
  double collinearity;
  double noise;
};

class CpAlsRecovery : public ::testing::TestWithParam<Planted> {};

TEST_P(CpAlsRecovery, ReachesTruthOrNoiseFloor) {
  const Planted& c = GetParam();
  const index_t rank = 3;
  const auto p = planted(c.dims, rank, c.collinearity, c.noise);
  CpOptions o;
  o.rank = rank;
  o.seed = 1;
  if (c.collinearity > 0.0) {
    // Collinear factors converge slowly (swamps): more sweeps, tighter tolerance.
    o.init = CpInit::nvecs;
    o.max_iters = 1500;
    o.tol = 1e-12;
  } else {
    o.max_iters = 200;
    o.tol = 1e-10;
  }
  const CpResult<double> r = cp_als(p.tensor, o);
  expect_finite(r);
  const double err = exact_relative_error(p.tensor, r.model);
  EXPECT_GE(factor_match_score(r.model, p.truth), 0.99);
  if (c.noise == 0.0) {
    EXPECT_LT(err, c.collinearity > 0.0 ? 1e-4 : 1e-8);
    return;
  }
  // The truth itself has error ||N|| / ||X||, so the optimum is at most that. A rank-R
  // fit has f = R (sum_n I_n - N + 1) degrees of freedom and absorbs about the fraction
  // f / numel of the (isotropic) noise energy, so err ~ level sqrt(1 - f / numel); twice
  // that fraction is a safe floor.
  const double level = p.noise_norm / norm<double>(p.tensor);
  double sum_dims = 0.0, numel = 1.0;
  for (index_t d : c.dims) {
    sum_dims += static_cast<double>(d);
    numel *= static_cast<double>(d);
  }
  const double dof =
      static_cast<double>(rank) * (sum_dims - static_cast<double>(c.dims.size()) + 1.0);
  EXPECT_LE(err, level * (1.0 + 1e-6));
  EXPECT_GE(err, level * std::sqrt(1.0 - 2.0 * dof / numel));
  // Far above sqrt(eps), the cheap fit is the exact one.
  EXPECT_NEAR(r.fit, 1.0 - err, 1e-10);
  EXPECT_EQ(r.relative_error, 1.0 - r.fit);
}

INSTANTIATE_TEST_SUITE_P(
    Planted, CpAlsRecovery,
    ::testing::Values(Planted{{20, 18, 16}, 0.0, 0.0}, Planted{{20, 18, 16}, 0.9, 0.0},
                      Planted{{20, 18, 16}, 0.0, 0.1}, Planted{{20, 18, 16}, 0.9, 0.1},
                      Planted{{10, 9, 8, 7}, 0.0, 0.0}, Planted{{10, 9, 8, 7}, 0.9, 0.0},
                      Planted{{10, 9, 8, 7}, 0.0, 0.1}, Planted{{10, 9, 8, 7}, 0.9, 0.1}));

class CpAls : public OnEachBackendCp {};

TEST_P(CpAls, KruskalOperandFollowsTheDensePath) {
  // The same iteration on a tensor given in CP form and on its dense form.
  const auto p = planted({7, 6, 5}, 3, 0.3, 0.0, 9);
  for (index_t rank : {2, 3, 4}) {
    CpOptions o = options(rank);
    o.init = CpInit::given;
    o.max_iters = 15;
    o.tol = 0.0;
    std::vector<Matrix<double>> start;
    for (index_t d : p.tensor.dims()) start.push_back(random_matrix<double>(d, rank, 40 + d));
    const CpResult<double> rk = cp_als(p.truth, o, start);
    const CpResult<double> rd = cp_als(p.tensor, o, start);
    ASSERT_EQ(rk.fit_history.size(), rd.fit_history.size());
    // The models agree to rounding. The cheap fits carry an absolute error of about
    // eps / (relative error), up to ~1e-11 here where ranks 3 and 4 approach an exact fit.
    EXPECT_LT(rel_diff(rk.model.full().values(), rd.model.full().values()), 1e-12)
        << "rank " << rank;
    for (std::size_t i = 0; i < rk.fit_history.size(); ++i)
      EXPECT_NEAR(rk.fit_history[i], rd.fit_history[i], 1e-10) << "rank " << rank << " iter " << i;
  }
  // Nvecs needs the mode Grams, which the Kruskal operand forms from the factors.
  CpOptions o = options(3);
  o.init = CpInit::nvecs;
  o.tol = 1e-12;
  o.max_iters = 500;
  EXPECT_GE(factor_match_score(cp_als(p.truth, o).model, p.truth), 0.99);
}

// From the same start near a planted model and a fixed number of sweeps, every backend
// follows the reference backend's iteration: fits within 1e-10 (float: 1e-4), weights
// and factors to the same relative tolerance. Near the model ALS converges, so rounding
// differences between the backends are damped rather than amplified.
template <class T>
void expect_follows_reference(Backend backend, const std::vector<index_t>& dims) {
  const auto p = planted(dims, 3, 0.0, 0.05, 17);
  const Tensor<T> x = convert<T>(p.tensor.view());
  CpOptions o;
  o.rank = 3;
  o.init = CpInit::given;
  o.max_iters = 20;
  o.tol = 0.0;
  std::uint64_t seed = 90;
  std::vector<Matrix<T>> start;
  for (const Matrix<double>& f : p.truth.factors) {
    const auto noise = random_values<double>(static_cast<std::size_t>(f.size()), ++seed);
    std::vector<T> values(noise.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<T>(f.values()[i] + 0.1 * noise[i]);
    start.emplace_back(f.rows(), f.cols(), std::move(values));
  }
  o.backend = Backend::reference;
  const CpResult<T> want = cp_als(x, o, start);
  o.backend = backend;
  const CpResult<T> got = cp_als(x, o, start);
  const double tol = std::is_same_v<T, double> ? 1e-10 : 1e-4;
  ASSERT_EQ(got.fit_history.size(), want.fit_history.size());
  for (std::size_t i = 0; i < want.fit_history.size(); ++i)
    EXPECT_NEAR(got.fit_history[i], want.fit_history[i], tol) << "iteration " << i + 1;
  EXPECT_LT(rel_diff(got.model.weights, want.model.weights), tol);
  for (std::size_t n = 0; n < dims.size(); ++n)
    EXPECT_LT(rel_diff(got.model.factors[n].values(), want.model.factors[n].values()), tol)
        << "factor " << n;
}

TEST_P(CpAls, FollowsTheReferenceFromTheSameStart) {
  for (const std::vector<index_t>& dims :
       {std::vector<index_t>{30, 25, 20}, std::vector<index_t>{12, 10, 9, 8}}) {
    expect_follows_reference<double>(backend(), dims);
    expect_follows_reference<float>(backend(), dims);
  }
}

// --- fit bookkeeping, precision, determinism --------------------------------------------

TEST_P(CpAls, FloatAgreesWithDouble) {
  const auto p = planted({15, 12, 10}, 3, 0.0, 0.1);
  const Tensor<float> xf = convert<float>(p.tensor.view());
  CpOptions o = options(3);
  o.init = CpInit::nvecs;
  o.tol = 1e-8;  // below float resolution of the fit: stops at max_iters or on equal fits
  const CpResult<double> rd = cp_als(p.tensor, o);
  const CpResult<float> rf = cp_als(xf, o);
  expect_finite(rf);
  EXPECT_NEAR(rf.fit, rd.fit, 1e-5);
  EXPECT_NEAR(factor_match_score(convert_model<double>(rf.model), rd.model), 1.0, 1e-4);
  // The float cheap fit against the exact error of the float model.
  EXPECT_NEAR(rf.fit, 1.0 - exact_relative_error(xf, rf.model), 1e-5);
}

TEST_P(CpAls, FloatFitDoesNotOverflowForLargeEntries) {
  // ||X||^2 ~ 1e64 is far beyond float range: the fit must be computed without
  // forming products of that size in float. The fit is invariant to scaling.
  const auto p = planted({12, 10, 8}, 2, 0.0, 0.2);
  Tensor<float> x = convert<float>(p.tensor.view());
  CpOptions o = options(2);
  o.init = CpInit::random;  // the nvecs start's Gram (~1e64) cannot be formed in float
  o.max_iters = 20;
  o.tol = 0.0;
  const CpResult<float> small = cp_als(x, o);
  for (float& v : x.values()) v *= 1e30f;
  const CpResult<float> large = cp_als(x, o);
  expect_finite(large);
  ASSERT_EQ(large.fit_history.size(), small.fit_history.size());
  for (std::size_t i = 0; i < small.fit_history.size(); ++i)
    EXPECT_NEAR(large.fit_history[i], small.fit_history[i], 1e-5) << "iteration " << i;
  EXPECT_LT(large.fit, 0.9);  // a noisy tensor: not the fit of a perfect model
}

TEST_P(CpAls, WeightsBeyondFloatAreANumericalError) {
  // The tensor runs scaled to magnitude 1 (test_scaling.cpp), but weights near
  // ||X|| ~ 1e40 cannot be represented in float.
  CpOptions o = options(2);
  Tensor<float> xf = random_tensor<float>({40, 30, 50}, 1);
  for (float& v : xf.values()) v *= 1e38f;
  EXPECT_THROW(cp_als(xf, o), NumericalError);
}

TEST_P(CpAls, SameSeedSameResultOtherSeedOtherStart) {
  const auto p = planted({9, 8, 7}, 3, 0.5, 0.05);
  CpOptions o = options(3);
  o.init = CpInit::random;
  o.seed = 42;
  o.max_iters = 30;
  const CpResult<double> a = cp_als(p.tensor, o), b = cp_als(p.tensor, o);
  EXPECT_EQ(a.fit_history, b.fit_history);
  EXPECT_EQ(a.model.weights, b.model.weights);
  for (std::size_t n = 0; n < 3; ++n)
    EXPECT_EQ(a.model.factors[n].values(), b.model.factors[n].values());
  o.seed = 43;
  const CpResult<double> c = cp_als(p.tensor, o);
  EXPECT_NE(c.fit_history.front(), a.fit_history.front());
}

TEST_P(CpAls, FitHistoryIsMonotone) {
  // Every mode update solves its least-squares problem exactly, so the error never
  // grows. Overfactoring (rank 5 for rank 3 plus noise) makes the run long.
  const auto p = planted({12, 11, 10}, 3, 0.0, 0.1);
  CpOptions o = options(5);
  o.tol = 0.0;
  o.max_iters = 80;
  const CpResult<double> r = cp_als(p.tensor, o);
  ASSERT_EQ(r.fit_history.size(), 80u);
  for (std::size_t i = 1; i < r.fit_history.size(); ++i)
    EXPECT_GE(r.fit_history[i], r.fit_history[i - 1] - 1e-12) << "iteration " << i + 1;
  EXPECT_EQ(r.fit, r.fit_history.back());
  EXPECT_GT(r.fit_history.back(), r.fit_history.front());
}

// --- stopping rules ---------------------------------------------------------------------

TEST_P(CpAls, StopsOnConvergence) {
  const auto p = planted({10, 9, 8}, 2, 0.0, 0.1);
  CpOptions o = options(2);
  o.tol = 1e-6;
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_EQ(r.stop, CpStop::converged);
  EXPECT_TRUE(r.converged);
  ASSERT_GE(r.iterations, 2);
  EXPECT_LT(r.iterations, o.max_iters);
  EXPECT_EQ(r.fit_history.size(), static_cast<std::size_t>(r.iterations));
  const auto n = r.fit_history.size();
  EXPECT_LT(std::abs(r.fit_history[n - 1] - r.fit_history[n - 2]), o.tol);
  for (std::size_t i = 1; i + 1 < n; ++i)
    EXPECT_GE(std::abs(r.fit_history[i] - r.fit_history[i - 1]), o.tol) << "stopped late at " << i;
}

TEST_P(CpAls, StopsAtMaxIters) {
  const auto p = planted({10, 9, 8}, 2, 0.0, 0.1);
  CpOptions o = options(2);
  o.tol = 0.0;
  o.max_iters = 5;
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_EQ(r.stop, CpStop::max_iters);
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.iterations, 5);
  EXPECT_EQ(r.fit_history.size(), 5u);
}

TEST_P(CpAls, CallbackSeesProgressAndCanStop) {
  const auto p = planted({10, 9, 8}, 2, 0.0, 0.1);
  CpOptions o = options(2);
  o.tol = 0.0;
  std::vector<CpProgress> seen;
  o.callback = [&](const CpProgress& s) {
    seen.push_back(s);
    return s.iteration < 3;
  };
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_EQ(r.stop, CpStop::callback);
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.iterations, 3);
  ASSERT_EQ(seen.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(seen[i].iteration, static_cast<int>(i) + 1);
    EXPECT_EQ(seen[i].fit, r.fit_history[i]);
    EXPECT_EQ(seen[i].delta, i == 0 ? seen[i].fit : std::abs(seen[i].fit - seen[i - 1].fit));
    if (i > 0) {
      EXPECT_GE(seen[i].seconds, seen[i - 1].seconds);
    }
  }
}

TEST_P(CpAls, StopsAtTimeLimit) {
  const auto p = planted({10, 9, 8}, 2, 0.0, 0.1);
  CpOptions o = options(2);
  o.tol = 0.0;
  o.max_iters = 1000000;
  o.time_limit = 1e-9;  // over after the first iteration
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_EQ(r.stop, CpStop::time_limit);
  EXPECT_EQ(r.iterations, 1);
  EXPECT_GT(r.timings.total, 0.0);
  EXPECT_GE(r.timings.total, r.timings.mttkrp + r.timings.gram + r.timings.solve);
}

// --- regularisation, fallbacks, initialisations ------------------------------------------------

TEST_P(CpAls, GivenFactorsAreTheStartWithInitGivenOrAuto) {
  // The start is cp_als's third argument: with init auto it is used just as with given,
  // on every input form and for every start of several (start 0 from the factors).
  const auto p = planted({8, 7, 6}, 3, 0.0, 0.05, 21);
  std::vector<Matrix<double>> start;
  for (index_t d : p.tensor.dims()) start.push_back(random_matrix<double>(d, 3, 60 + d));
  CpOptions given = options(3);
  given.init = CpInit::given;
  given.max_iters = 12;
  given.tol = 0.0;
  given.n_starts = 2;
  CpOptions automatic = given;
  automatic.init = CpInit::automatic;
  const CpResult<double> a = cp_als(p.tensor, given, start);
  const CpResult<double> b = cp_als(p.tensor, automatic, start);
  EXPECT_EQ(a.init, CpInit::given);
  EXPECT_EQ(b.init, CpInit::given);
  EXPECT_EQ(a.start_fits, b.start_fits);
  EXPECT_EQ(a.fit_history, b.fit_history);
  EXPECT_EQ(cp_als(p.truth, automatic, start).fit_history,
            cp_als(p.truth, given, start).fit_history);
  // Without factors, auto is the nvecs start, which the factors above are not.
  const CpResult<double> nvecs = cp_als(p.tensor, automatic);
  EXPECT_EQ(nvecs.init, CpInit::nvecs);
  EXPECT_NE(nvecs.fit_history.front(), a.fit_history.front());
}

TEST_P(CpAls, RidgeShrinksTheSolution) {
  // Rank one, one sweep from a given start: every mode update is m / (v + ridge) with m
  // independent of the ridge in direction, and the last v = 1 (unit columns after the
  // 2-norm normalisation of the first sweep). So the weight is divided by 1 + ridge.
  const Tensor<double> x = random_tensor<double>({5, 4, 3}, 7);
  CpOptions o = options(1);
  o.init = CpInit::given;
  o.max_iters = 1;
  std::vector<Matrix<double>> start;
  for (index_t d : x.dims()) start.push_back(random_matrix<double>(d, 1, 80 + d));
  const CpResult<double> plain = cp_als(x, o, start);
  o.ridge = 0.5;
  const CpResult<double> ridge = cp_als(x, o, start);
  EXPECT_NEAR(plain.model.weights[0] / ridge.model.weights[0], 1.5, 1e-14);
  for (std::size_t n = 0; n < 3; ++n)
    EXPECT_LT(rel_diff(ridge.model.factors[n].values(), plain.model.factors[n].values()), 1e-14);
  // A small ridge on a full run still fits well.
  const auto p = planted({10, 9, 8}, 3, 0.0, 0.1);
  CpOptions q = options(3);
  q.ridge = 1e-3;
  const CpResult<double> r = cp_als(p.tensor, q);
  expect_finite(r);
  EXPECT_GE(factor_match_score(r.model, p.truth), 0.99);
}

TEST_P(CpAls, EigenFallbackOnSingularNormalEquations) {
  // X = a o e_0 o c, and a rank-2 start whose second column in mode 1 is e_1, orthogonal
  // to the data and to the first column (so the first normal matrix is diagonal): the
  // first update gives U_0 an exactly zero second column (X_(0)'s
  // product with it vanishes exactly), so every later normal matrix V = *_m G_m has a
  // zero row and column and Cholesky fails. The pseudo-inverse gives the minimum-norm
  // solution, which keeps that component at zero: the run reproduces rank-1 ALS from
  // the first column. (A start that is singular from the outset is refused instead.)
  const std::vector<double> a = {1, 0, 1, 0, 1, 1}, c = {2, 0, 1, 2};
  Tensor<double> x({6, 5, 4});
  for (index_t k = 0; k < 4; ++k)
    for (index_t i = 0; i < 6; ++i)
      x(i, 0, k) = a[static_cast<std::size_t>(i)] * c[static_cast<std::size_t>(k)];
  const std::vector<std::vector<std::vector<double>>> cols = {
      {{1, 0, 1, 0, 1, 1}, {1, 2, 0, 1, 0, 1}},
      {{1, 0, 2, 2, 0}, {0, 1, 0, 0, 0}},
      {{2, 1, 1, 2}, {1, 1, 0, 1}}};
  std::vector<CpResult<double>> runs;
  for (index_t rank : {1, 2}) {
    CpOptions o = options(rank);
    o.init = CpInit::given;
    o.max_iters = 6;
    o.tol = 0.0;
    std::vector<Matrix<double>> start;
    for (const auto& mode : cols) {
      Matrix<double> g(static_cast<index_t>(mode[0].size()), rank);
      for (index_t j = 0; j < rank; ++j)
        for (std::size_t i = 0; i < mode[0].size(); ++i)
          g(static_cast<index_t>(i), j) = mode[static_cast<std::size_t>(j)][i];
      start.push_back(g);
    }
    runs.push_back(cp_als(x, o, start));
  }
  const CpResult<double>& r = runs[1];
  EXPECT_EQ(runs[0].eigen_fallbacks, 0);
  EXPECT_GT(r.eigen_fallbacks, 0);
  expect_finite(r);
  EXPECT_EQ(r.model.weights[1], 0.0);
  for (std::size_t i = 0; i < r.fit_history.size(); ++i)
    EXPECT_NEAR(r.fit_history[i], runs[0].fit_history[i], 1e-12) << "iteration " << i + 1;
  EXPECT_LT(rel_diff(r.model.full().values(), runs[0].model.full().values()), 1e-10);
}

TEST_P(CpAls, NvecsWithRankAboveAModeSize) {
  // Mode 1 has two rows for three components: the third column is random.
  const auto p = planted({6, 2, 5}, 2, 0.0, 0.01);
  CpOptions o = options(3);
  o.init = CpInit::nvecs;
  o.max_iters = 50;
  const CpResult<double> a = cp_als(p.tensor, o), b = cp_als(p.tensor, o);
  expect_finite(a);
  EXPECT_EQ(a.fit_history, b.fit_history);
  EXPECT_GT(a.fit, 0.98);
}

TEST_P(CpAls, OrderTwoAndSizeOneModes) {
  // Matrices and tensors with size-one modes run through the same operand.
  for (const auto& dims : std::vector<std::vector<index_t>>{{7, 5}, {6, 1, 5}, {4, 1, 3, 1, 2}}) {
    KTensor<double> truth = random_ktensor<double>(dims, 1, 5);
    const Tensor<double> x = truth.full();
    CpOptions o = options(1);
    o.tol = 0.0;
    o.max_iters = 10;
    const CpResult<double> r = cp_als(x, o);
    EXPECT_LT(exact_relative_error(x, r.model), 1e-12) << dims.size();
  }
}

TENFOLD_ON_EACH_BACKEND(CpAlsKnownAnswer);
TENFOLD_ON_EACH_BACKEND(CpAls);

}  // namespace
}  // namespace tenfold::test
