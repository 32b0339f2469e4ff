// The three Tucker algorithms (HOSVD, ST-HOSVD, HOOI) on each backend: the eps
// guarantee, HOOI against ST-HOSVD and HOSVD, options and result fields, the progress
// callback, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backend_test_util.hpp"
#include "tenfold/error.hpp"
#include "tucker_test_util.hpp"

namespace tenfold::test {
namespace {

// --- the eps guarantee ---------------------------------------------------------

// Smallest r with sum_{i >= r} lambda_i <= bound (r >= 1).
index_t rank_for(const std::vector<double>& lambda, double bound) {
  index_t r = static_cast<index_t>(lambda.size());
  double tail = 0.0;
  while (r > 1 && tail + lambda[static_cast<std::size_t>(r - 1)] <= bound) {
    tail += lambda[static_cast<std::size_t>(--r)];
  }
  return r;
}

class Tucker : public OnEachBackend {};

TEST_P(Tucker, EpsGuaranteeHoldsOnRandomTensors) {
  const std::vector<std::vector<index_t>> shapes = {{9, 8, 7}, {6, 5, 4, 5}, {4, 5, 3, 4, 3}};
  const std::vector<double> eps_values = {0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9};
  std::uint64_t seed = 100;
  int cases = 0;
  for (const auto& dims : shapes) {
    // A Gaussian tensor (flat spectra) and a low-rank one plus 10% noise (decaying spectra).
    std::vector<index_t> half;
    for (index_t d : dims) half.push_back((d + 1) / 2);
    Tensor<double> low = random_ttensor<double>(dims, half, seed++).full();
    const Tensor<double> noise = random_tensor<double>(dims, seed++);
    const double scale = 0.1 * norm<double>(low.view()) / norm<double>(noise.view());
    for (index_t i = 0; i < low.numel(); ++i) low[i] += scale * noise[i];
    for (const Tensor<double>* x : {&noise, static_cast<const Tensor<double>*>(&low)}) {
      const double nx2 = std::pow(norm<double>(x->view()), 2);
      for (double eps : eps_values) {
        for (TuckerMethod method :
             {TuckerMethod::sthosvd, TuckerMethod::hosvd, TuckerMethod::hooi}) {
          TuckerOptions o;
          o.backend = backend();
          o.method = method;
          o.eps = eps;
          o.max_iters = 3;
          const TuckerResult<double> r = tucker(*x, o);
          const double err = true_relative_error(*x, r.model);
          const std::string what = std::string(to_string(method)) + " eps " + std::to_string(eps) +
                                   " order " + std::to_string(dims.size());
          EXPECT_LE(err, eps * (1 + 1e-12)) << what;
          EXPECT_NEAR(r.relative_error, err, 1e-7) << what;
          // Each rank is the smallest whose discarded eigenvalues fit the per-mode budget.
          for (std::size_t n = 0; n < dims.size(); ++n) {
            EXPECT_EQ(
                r.model.ranks()[n],
                rank_for(r.eigenvalues[n], eps * eps * nx2 / static_cast<double>(dims.size())))
                << what << " mode " << n;
          }
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 2 * 8 * 3);
}

// --- HOOI, ST-HOSVD and HOSVD compared -----------------------------------------

TEST_P(Tucker, HooiNeverWorseThanItsStartAndStHosvdWithinHosvdBound) {
  const std::vector<std::pair<std::vector<index_t>, std::vector<index_t>>> cases = {
      {{10, 9, 8}, {3, 4, 2}}, {{6, 7, 5, 4}, {2, 3, 3, 2}}, {{5, 4, 4, 3, 3}, {2, 2, 3, 1, 2}}};
  std::uint64_t seed = 300;
  for (const auto& [dims, ranks] : cases) {
    const Tensor<double> x = random_tensor<double>(dims, seed++);
    const double nx2 = std::pow(norm<double>(x.view()), 2);
    TuckerOptions o;
    o.backend = backend();
    o.ranks = ranks;
    o.method = TuckerMethod::hosvd;
    const TuckerResult<double> ho = tucker(x, o);
    o.method = TuckerMethod::sthosvd;
    const TuckerResult<double> st = tucker(x, o);
    o.method = TuckerMethod::hooi;
    o.tol = 0.0;
    o.max_iters = 8;
    const TuckerResult<double> hooi = tucker(x, o);

    // HOSVD bound: sum over modes of the eigenvalues each mode discards from the full tensor.
    double bound = 0.0, st_discarded = 0.0;
    for (std::size_t n = 0; n < dims.size(); ++n) {
      for (std::size_t i = static_cast<std::size_t>(ranks[n]); i < ho.eigenvalues[n].size(); ++i) {
        bound += ho.eigenvalues[n][i];
        st_discarded += st.eigenvalues[n][i];
      }
    }
    const double e_ho = true_relative_error(x, ho.model), e_st = true_relative_error(x, st.model);
    const double e_hooi = true_relative_error(x, hooi.model);
    EXPECT_LE(e_ho * e_ho * nx2, bound * (1 + 1e-12));
    EXPECT_LE(e_st * e_st * nx2, bound * (1 + 1e-12));
    // ST-HOSVD's error is exactly what its truncations discarded.
    EXPECT_NEAR(e_st * e_st * nx2, st_discarded, 1e-10 * nx2);
    // HOOI starts from ST-HOSVD and never increases the error.
    ASSERT_EQ(hooi.error_history.size(), 9u);
    EXPECT_EQ(hooi.iterations, 8);
    EXPECT_FALSE(hooi.converged);
    EXPECT_NEAR(hooi.error_history[0], st.relative_error, 1e-14);
    for (std::size_t i = 1; i < hooi.error_history.size(); ++i) {
      EXPECT_LE(hooi.error_history[i], hooi.error_history[i - 1] + 1e-12);
    }
    EXPECT_LE(e_hooi, e_st + 1e-12);
    EXPECT_NEAR(hooi.relative_error, e_hooi, 1e-7);
    EXPECT_LT(orthonormality_defect(hooi.model), 1e-12);
    EXPECT_TRUE(hooi.mode_order.size() == dims.size() && ho.mode_order.empty());
  }
}

TEST_P(Tucker, HooiStopsOnTolerance) {
  const Tensor<double> x = random_tensor<double>({12, 11, 10}, 400);
  TuckerOptions o;
  o.backend = backend();
  o.method = TuckerMethod::hooi;
  o.ranks = {3, 3, 3};
  o.tol = 1e-3;
  const TuckerResult<double> r = tucker(x, o);
  EXPECT_TRUE(r.converged);
  EXPECT_LT(r.iterations, o.max_iters);
  const auto& h = r.error_history;
  EXPECT_LT(h[h.size() - 2] - h.back(), o.tol);
}

// --- options and result fields --------------------------------------------------

TEST_P(Tucker, ModeOrder) {
  const Tensor<double> x = random_tensor<double>({10, 40, 20}, 500);
  TuckerOptions o;
  o.backend = backend();
  o.ranks = {5, 4, 10};  // reductions 2, 10, 2
  EXPECT_EQ(tucker(x, o).mode_order, (std::vector<int>{1, 0, 2}));
  o.ranks.clear();
  o.eps = 0.5;  // by mode size
  EXPECT_EQ(tucker(x, o).mode_order, (std::vector<int>{1, 2, 0}));
  // Ties: outer modes first.
  const Tensor<double> y = random_tensor<double>({6, 6, 6, 6, 6}, 501);
  EXPECT_EQ(tucker(y, o).mode_order, (std::vector<int>{0, 4, 1, 3, 2}));
  o.eps.reset();
  o.ranks = {3, 2, 2, 3, 2};  // reductions 2, 3, 3, 2, 3
  EXPECT_EQ(tucker(y, o).mode_order, (std::vector<int>{4, 1, 2, 0, 3}));
  // Any given order is followed and gives a valid decomposition within the bound.
  o.ranks.clear();
  o.eps = 0.5;
  o.mode_order = {2, 0, 1};
  const TuckerResult<double> r = tucker(x, o);
  EXPECT_EQ(r.mode_order, o.mode_order);
  EXPECT_LE(true_relative_error(x, r.model), 0.5);
}

TEST_P(Tucker, CompressionRatioAndTimings) {
  const Tensor<double> x = random_tensor<double>({20, 15, 10}, 600);
  TuckerOptions o;
  o.backend = backend();
  o.ranks = {4, 3, 2};
  const TuckerResult<double> r = tucker(x, o);
  EXPECT_DOUBLE_EQ(r.compression_ratio, 3000.0 / (24.0 + 80 + 45 + 20));
  const TuckerTimings& t = r.timings;
  EXPECT_GT(t.total, 0.0);
  EXPECT_LE(t.gram + t.eig + t.ttm, t.total);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_TRUE(r.error_history.empty());
}

TEST_P(Tucker, ZeroTensor) {
  const Tensor<double> x({4, 3, 2});
  TuckerOptions o;
  o.backend = backend();
  o.eps = 0.1;
  const TuckerResult<double> r = tucker(x, o);
  EXPECT_EQ(r.relative_error, 0.0);
  EXPECT_EQ(r.model.ranks(), (std::vector<index_t>{1, 1, 1}));
  EXPECT_EQ(r.model.core[0], 0.0);
  o.eps.reset();
  o.ranks = {2, 2, 2};
  o.method = TuckerMethod::hooi;
  EXPECT_EQ(tucker(x, o).relative_error, 0.0);
}

TEST_P(Tucker, FloatAgreesWithDouble) {
  const Tensor<double> xd = random_ttensor<double>({15, 12, 10}, {5, 5, 5}, 700).full();
  Tensor<double> noisy = xd;
  const Tensor<double> noise = random_tensor<double>(xd.dims(), 701);
  for (index_t i = 0; i < noisy.numel(); ++i) noisy[i] += 0.3 * noise[i];
  const Tensor<float> xf = convert<float, double>(noisy.view());
  for (TuckerMethod method : {TuckerMethod::sthosvd, TuckerMethod::hosvd, TuckerMethod::hooi}) {
    TuckerOptions o;
    o.backend = backend();
    o.method = method;
    o.ranks = {4, 4, 4};
    const TuckerResult<double> rd = tucker(noisy, o);
    const TuckerResult<float> rf = tucker(xf, o);
    expect_float_agrees(noisy, rd, rf, method);
    for (std::size_t n = 0; n < 3; ++n) {
      EXPECT_LT(rel_diff(rf.eigenvalues[n], rd.eigenvalues[n]), 1e-5) << to_string(method);
    }
  }
}

TEST_P(Tucker, MethodNames) {
  for (TuckerMethod m : {TuckerMethod::sthosvd, TuckerMethod::hosvd, TuckerMethod::hooi}) {
    EXPECT_EQ(parse_tucker_method(to_string(m)), m);
  }
  expect_error<InvalidArgument>([] { parse_tucker_method("svd"); }, "'svd'");
}

// --- the progress callback -------------------------------------------------------

// Every report of a run, and the run's result.
struct Recorded {
  std::vector<TuckerProgress> steps;
  TuckerResult<double> result;
};

Recorded record(const Tensor<double>& x, TuckerOptions o) {
  Recorded r;
  o.callback = [&r](const TuckerProgress& p) {
    r.steps.push_back(p);
    return true;
  };
  r.result = tucker(x, o);
  return r;
}

// Which step the callback answers false at.
TuckerOptions stopping_at(TuckerOptions o, int step) {
  o.callback = [step](const TuckerProgress& p) { return p.step != step; };
  return o;
}

TEST_P(Tucker, CallbackSeesEveryStepInOrder) {
  const Tensor<double> x = random_tensor<double>({10, 9, 8}, 850);
  TuckerOptions o;
  o.backend = backend();
  o.ranks = {3, 4, 2};
  for (Layout layout : {Layout::col_major, Layout::row_major}) {
    o.layout = layout;
    const std::string what = layout == Layout::col_major ? "col_major" : "row_major";
    // ST-HOSVD: one step per mode, in the processing order, each with the error of the
    // tensor truncated so far (growing), the last the result's; the result unchanged.
    o.method = TuckerMethod::sthosvd;
    const Recorded st = record(x, o);
    ASSERT_EQ(st.steps.size(), 3u) << what;
    double previous = 0.0, seconds = 0.0;
    for (std::size_t k = 0; k < 3; ++k) {
      const TuckerProgress& p = st.steps[k];
      EXPECT_EQ(p.stage, TuckerMethod::sthosvd);
      EXPECT_EQ(p.step, static_cast<int>(k) + 1);
      EXPECT_EQ(p.sweep, 0);
      EXPECT_EQ(p.mode, st.result.mode_order[k]) << what;
      EXPECT_GE(p.relative_error, previous - 1e-15);
      EXPECT_GE(p.seconds, seconds);
      previous = p.relative_error;
      seconds = p.seconds;
    }
    EXPECT_EQ(st.steps.back().relative_error, st.result.relative_error);
    EXPECT_LE(st.steps.back().seconds, st.result.timings.total);
    o.callback = nullptr;
    EXPECT_EQ(tucker(x, o).model.core.values(), st.result.model.core.values()) << what;

    // HOSVD: modes in order (of the NumPy axes for row_major); the error known at the
    // last step, after the core.
    const auto nth_mode = [layout](int k) { return layout == Layout::col_major ? k : 2 - k; };
    o.method = TuckerMethod::hosvd;
    const Recorded ho = record(x, o);
    ASSERT_EQ(ho.steps.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      const TuckerProgress& p = ho.steps[static_cast<std::size_t>(k)];
      EXPECT_EQ(p.stage, TuckerMethod::hosvd);
      EXPECT_EQ(p.step, k + 1);
      EXPECT_EQ(p.mode, nth_mode(k)) << what;
      EXPECT_EQ(std::isnan(p.relative_error), k < 2);
    }
    EXPECT_EQ(ho.steps.back().relative_error, ho.result.relative_error);

    // HOOI: the start's steps, then each sweep's modes in order, the sweep's error at
    // its last mode.
    o.method = TuckerMethod::hooi;
    o.max_iters = 4;
    o.tol = 0.0;
    const Recorded hooi = record(x, o);
    ASSERT_EQ(hooi.steps.size(), 3u + 4u * 3u);
    for (std::size_t k = 0; k < hooi.steps.size(); ++k) {
      const TuckerProgress& p = hooi.steps[k];
      EXPECT_EQ(p.step, static_cast<int>(k) + 1);
      if (k < 3) {
        EXPECT_EQ(p.stage, TuckerMethod::sthosvd);
        EXPECT_EQ(p.mode, hooi.result.mode_order[k]);
        continue;
      }
      const int sweep = static_cast<int>(k - 3) / 3 + 1, mode = static_cast<int>(k - 3) % 3;
      EXPECT_EQ(p.stage, TuckerMethod::hooi);
      EXPECT_EQ(p.sweep, sweep);
      EXPECT_EQ(p.mode, nth_mode(mode)) << what;
      if (mode < 2) {
        EXPECT_TRUE(std::isnan(p.relative_error));
      } else {
        EXPECT_EQ(p.relative_error, hooi.result.error_history[static_cast<std::size_t>(sweep)]);
      }
    }
    EXPECT_EQ(hooi.steps[2].relative_error, hooi.result.error_history[0]);
    o.callback = nullptr;
    EXPECT_EQ(tucker(x, o).model.core.values(), hooi.result.model.core.values()) << what;
  }
}

TEST_P(Tucker, CallbackStopsAsDocumented) {
  const Tensor<double> x = random_tensor<double>({10, 9, 8}, 860);
  TuckerOptions o;
  o.backend = backend();
  o.ranks = {3, 4, 2};
  // ST-HOSVD and HOSVD have no model before their last step: Cancelled.
  for (TuckerMethod method : {TuckerMethod::sthosvd, TuckerMethod::hosvd}) {
    o.method = method;
    for (int step : {1, 2}) {
      expect_error<Cancelled>([&] { tucker(x, stopping_at(o, step)); }, "no result");
    }
    // At the last step there is nothing left to stop.
    const TuckerResult<double> last = tucker(x, stopping_at(o, 3));
    EXPECT_EQ(last.model.core.values(), tucker(x, o).model.core.values());
    EXPECT_EQ(last.stop, TuckerStop::converged);
  }
  o.method = TuckerMethod::sthosvd;
  const TuckerResult<double> start = tucker(x, o);
  o.method = TuckerMethod::hooi;
  o.tol = 0.0;
  // HOOI before its start is complete: Cancelled as well.
  expect_error<Cancelled>([&] { tucker(x, stopping_at(o, 2)); }, "sthosvd step 2 of 3");
  // At the start's last step: the start, no sweep.
  const TuckerResult<double> at_start = tucker(x, stopping_at(o, 3));
  EXPECT_EQ(at_start.stop, TuckerStop::callback);
  EXPECT_FALSE(at_start.converged);
  EXPECT_EQ(at_start.iterations, 0);
  EXPECT_EQ(at_start.model.core.values(), start.model.core.values());
  EXPECT_EQ(at_start.error_history, std::vector<double>{start.relative_error});
  EXPECT_EQ(at_start.relative_error, start.relative_error);
  // Half-way through sweep 3 (after its modes 0 and 1), or at the end of sweep 2: the
  // model of sweep 2, as max_iters = 2 gives it.
  o.max_iters = 2;
  const TuckerResult<double> two = tucker(x, o);
  o.max_iters = 10;
  for (int step : {3 + 2 * 3 + 1, 3 + 2 * 3 + 2, 3 + 2 * 3}) {
    const TuckerResult<double> r = tucker(x, stopping_at(o, step));
    EXPECT_EQ(r.stop, TuckerStop::callback) << step;
    EXPECT_FALSE(r.converged);
    EXPECT_EQ(r.iterations, 2) << step;
    EXPECT_EQ(r.error_history, two.error_history) << step;
    EXPECT_EQ(r.relative_error, two.relative_error);
    EXPECT_EQ(r.model.core.values(), two.model.core.values()) << step;
    for (std::size_t n = 0; n < 3; ++n) {
      EXPECT_EQ(r.model.factors[n].values(), two.model.factors[n].values()) << step;
    }
    EXPECT_NEAR(true_relative_error(x, r.model), r.relative_error, 1e-7);
  }
  EXPECT_EQ(two.stop, TuckerStop::max_iters);
  EXPECT_EQ(to_string(TuckerStop::callback), "callback");
  // A sweep that reaches tol counts as converged even when the callback says stop.
  o.tol = 1e300;
  const TuckerResult<double> converged = tucker(x, stopping_at(o, 6));
  EXPECT_EQ(converged.stop, TuckerStop::converged);
  EXPECT_TRUE(converged.converged);
  // The callback's own exceptions come through.
  o.callback = [](const TuckerProgress&) -> bool { throw std::runtime_error("from callback"); };
  expect_error<std::runtime_error>([&] { tucker(x, o); }, "from callback");
}

// --- bad input ---------------------------------------------------------------------

TEST_P(Tucker, BadInputIsNamed) {
  const Tensor<double> x = random_tensor<double>({4, 3, 5}, 800);
  auto run = [&](const TuckerOptions& o) { return [&x, o] { tucker(x, o); }; };
  TuckerOptions o;
  o.backend = backend();
  expect_error<InvalidArgument>(run(o), "either ranks");
  o.ranks = {2, 2};
  expect_error<DimensionMismatch>(run(o), "ranks has 2 entries");
  o.ranks = {2, 0, 2};
  expect_error<InvalidArgument>(run(o), "rank of mode 1 must be at least 1, got 0");
  o.ranks = {2, 2, 6};
  expect_error<InvalidArgument>(run(o), "rank 6 of mode 2 exceeds the mode size 5");
  o.eps = 0.1;
  expect_error<InvalidArgument>(run(o), "not both");
  o.ranks.clear();
  for (double bad : {0.0, 1.0, -0.5, 2.0, std::numeric_limits<double>::quiet_NaN()}) {
    o.eps = bad;
    expect_error<InvalidArgument>(run(o), "eps must be in (0, 1)");
  }
  o.eps = 0.1;
  o.mode_order = {0, 2, 2};
  expect_error<InvalidArgument>(run(o), "permutation of 0..2, got (0, 2, 2)");
  o.mode_order = {1, 0};
  expect_error<InvalidArgument>(run(o), "got (1, 0)");
  o.mode_order.clear();
  o.max_iters = 0;
  expect_error<InvalidArgument>(run(o), "max_iters");
  o.max_iters = 5;
  o.tol = -1.0;
  expect_error<InvalidArgument>(run(o), "tol");
  o.tol = 1e-6;

  Tensor<double> bad = x;
  bad(1, 2, 3) = std::numeric_limits<double>::quiet_NaN();
  expect_error<InvalidArgument>([&] { tucker(bad, o); }, "NaN) at index (1, 2, 3)");
  bad(1, 2, 3) = std::numeric_limits<double>::infinity();
  expect_error<InvalidArgument>([&] { tucker(bad, o); }, "Inf");
  expect_error<InvalidArgument>([&] { tucker(random_tensor<double>({5}, 1), o); }, "order 1");
  expect_error<InvalidArgument>([&] { tucker(Tensor<double>({3, 0, 2}), o); }, "mode 1 has size 0");
  if (!cuda_compiled()) {
    o.backend = Backend::cuda;
    expect_error<NotCompiled>(run(o), "cuda");
  }
}

TENFOLD_ON_EACH_BACKEND(Tucker);

}  // namespace
}  // namespace tenfold::test
