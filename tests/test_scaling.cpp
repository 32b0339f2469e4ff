// Inputs far from magnitude 1 (core/scaling.hpp): CP-ALS in every variant of its loop and
// Tucker in every method give the problem at magnitude 1 scaled (fit, relative error and
// factors equal, weights and core scaled), in float and double, in the library and the
// program; results that cannot be represented are refused with one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "cli_run.hpp"
#include "core/random.hpp"
#include "core/scalar.hpp"
#include "core/scaling.hpp"
#include "cp_test_util.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::test {
namespace {

// Agreement of the scaled and the unscaled run: both are the same problem up to the
// rounding of x * scale (one unit in the last place per entry), which 30 sweeps on a
// well-conditioned problem amplify to well under these bounds.
template <class T>
double fit_tol() {
  return std::is_same_v<T, double> ? 1e-10 : 1e-4;
}
template <class T>
double model_tol() {
  return std::is_same_v<T, double> ? 1e-7 : 1e-2;
}

// The case: a rank-2 6x5x4 tensor (with noise, so that no fit is exactly 1).
Tensor<double> rank_two() { return planted({6, 5, 4}, 2, 0.0, 0.1, 5).tensor; }

template <class T>
Tensor<T> times(const Tensor<double>& x, double scale) {
  Tensor<T> y(x.dims());
  for (index_t i = 0; i < x.numel(); ++i) y[i] = static_cast<T>(x[i] * scale);
  return y;
}

template <class T>
std::vector<double> scaled_values(const std::vector<T>& v, double scale) {
  std::vector<double> w(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) w[i] = static_cast<double>(v[i]) / scale;
  return w;
}

template <class T>
std::vector<double> widened(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Large magnitudes the problem's outputs (weights, core ~ ||X||) still fit in.
template <class T>
std::vector<double> extreme_scales() {
  if constexpr (std::is_same_v<T, double>) {
    return {1e-300, 1e-150, 1e150, 1e300};
  } else {
    return {1e-37, 1e-30, 1e-21, 1e30, 1e36};
  }
}

// One variant of the CP-ALS loop on x (the mask marks every seventh entry missing).
template <class T>
using CpVariant = std::function<CpResult<T>(const Tensor<T>&)>;

template <class T>
std::vector<std::pair<std::string, CpVariant<T>>> cp_variants() {
  CpOptions base;
  base.rank = 2;
  base.tol = 0.0;  // 30 sweeps in every run, so that the histories line up
  base.max_iters = 30;
  auto with = [base](auto change) {
    CpOptions o = base;
    change(o);
    return [o](const Tensor<T>& x) { return cp_als(x, o); };
  };
  std::vector<std::uint8_t> mask(120, 1);
  for (std::size_t i = 0; i < mask.size(); i += 7) mask[i] = 0;
  auto masked = [base, mask](CpMissingSolver solver) {
    CpOptions o = base;
    o.missing_solver = solver;
    return [o, mask](const Tensor<T>& x) {
      return cp_als(x.view(), TensorView<const std::uint8_t>(mask.data(), x.dims()), o);
    };
  };
  return {
      {"nvecs", with([](CpOptions&) {})},
      {"random", with([](CpOptions& o) { o.init = CpInit::random; })},
      {"nonnegative", with([](CpOptions& o) { o.nonnegative = true; })},
      {"line_search", with([](CpOptions& o) { o.line_search = true; })},
      // One start: of the automatic starts on the core several end in the same model,
      // and rounding picks which one's history is reported.
      {"compress", with([](CpOptions& o) {
         o.compress = CpCompress::on;
         o.n_starts = 1;
       })},
      {"row_major", with([](CpOptions& o) { o.layout = Layout::row_major; })},
      // Its default samples exceed the rows of each Khatri-Rao product here, so every
      // row is taken once: the sampled path's arithmetic without the draws. 15 sweeps,
      // fewer than its stop after three stale checks takes (20), a threshold rounding
      // decides.
      {"sampled", with([](CpOptions& o) {
         o.solver = CpSolver::sampled;
         o.max_iters = 15;
       })},
      {"masked em", masked(CpMissingSolver::em)},
      {"masked weighted", masked(CpMissingSolver::weighted)},
  };
}

template <class T>
class Scaling : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Scaling, Precisions);

TYPED_TEST(Scaling, CpAtExtremeMagnitudesIsTheProblemAtOneScaled) {
  using T = TypeParam;
  const Tensor<T> x = times<T>(rank_two(), 1.0);
  for (const auto& [name, run] : cp_variants<T>()) {
    const CpResult<T> want = run(x);
    ASSERT_LT(want.fit, 0.99) << name;  // noisy: an all-zero model would report 1
    for (double scale : extreme_scales<T>()) {
      SCOPED_TRACE(name + " at " + std::to_string(scale));
      const CpResult<T> got = run(times<T>(rank_two(), scale));
      ASSERT_EQ(got.fit_history.size(), want.fit_history.size());
      // HALS's first sweep is one pass of coordinate descent from the start as given,
      // whose magnitude is not that of the tensor: it depends on the tensor's scale (at
      // 2^k too) by design, and the later sweeps no longer do.
      for (std::size_t i = name == "nonnegative" ? 1 : 0; i < want.fit_history.size(); ++i)
        EXPECT_NEAR(got.fit_history[i], want.fit_history[i], fit_tol<T>()) << "iteration " << i;
      EXPECT_NEAR(got.relative_error, want.relative_error, fit_tol<T>());
      EXPECT_LT(rel_diff(scaled_values(got.model.weights, scale), widened(want.model.weights)),
                model_tol<T>());
      for (std::size_t n = 0; n < 3; ++n) {
        EXPECT_LT(rel_diff(widened(got.model.factors[n].values()),
                           widened(want.model.factors[n].values())),
                  model_tol<T>())
            << "factor " << n;
      }
    }
  }
}

TYPED_TEST(Scaling, TuckerAtExtremeMagnitudesIsTheProblemAtOneScaled) {
  using T = TypeParam;
  const Tensor<T> x = times<T>(rank_two(), 1.0);
  for (TuckerMethod method : {TuckerMethod::sthosvd, TuckerMethod::hosvd, TuckerMethod::hooi}) {
    for (bool by_eps : {false, true}) {
      TuckerOptions o;
      o.method = method;
      o.max_iters = 5;
      o.tol = 0.0;
      if (by_eps) {
        o.eps = 0.12;
      } else {
        o.ranks = {2, 2, 2};
      }
      const TuckerResult<T> want = tucker(x, o);
      ASSERT_GT(want.relative_error, 0.01);
      // In double, the eigenvalues (squares) need |x| within about 1e+-154.
      std::vector<double> scales = extreme_scales<T>();
      if (std::is_same_v<T, double>) scales = {1e-150, 1e150};
      for (double scale : scales) {
        SCOPED_TRACE(std::string(to_string(method)) + (by_eps ? " eps" : " ranks") + " at " +
                     std::to_string(scale));
        const TuckerResult<T> got = tucker(times<T>(rank_two(), scale), o);
        ASSERT_EQ(got.model.ranks(), want.model.ranks());
        EXPECT_NEAR(got.relative_error, want.relative_error, fit_tol<T>());
        EXPECT_LT(rel_diff(scaled_values(got.model.core.values(), scale),
                           widened(want.model.core.values())),
                  model_tol<T>());
        for (std::size_t n = 0; n < 3; ++n) {
          EXPECT_LT(rel_diff(widened(got.model.factors[n].values()),
                             widened(want.model.factors[n].values())),
                    model_tol<T>());
          EXPECT_LT(rel_diff(scaled_values(got.eigenvalues[n], scale * scale), want.eigenvalues[n]),
                    model_tol<T>());
        }
      }
    }
  }
}

// --- results that cannot be represented ---------------------------------------------

template <class T>
Tensor<T> constant(T value) {
  Tensor<T> x({6, 5, 4});
  for (T& v : x.values()) v = value;
  return x;
}

// The one-pass scan (vectorised, over the pool) against a plain loop: random
// magnitudes over the whole exponent range, both signs, lengths that end inside a chunk
// and a vector, serial and parallel sizes; one Inf or NaN anywhere, or a complex part.
template <class T>
void expect_magnitudes_match(std::uint64_t seed) {
  using R = detail::real_t<T>;
  detail::Rng rng(seed);
  for (const index_t n : {index_t{1}, index_t{37}, index_t{32768}, index_t{200003}}) {
    std::vector<T> v(static_cast<std::size_t>(n));
    double want = 0.0;
    for (T& e : v) {
      const auto draw = [&] {
        const int k = static_cast<int>(rng.uniform() * 2 * std::numeric_limits<R>::max_exponent) -
                      std::numeric_limits<R>::max_exponent;
        return static_cast<R>(std::ldexp(rng.uniform() - 0.5, k));
      };
      if constexpr (detail::is_complex_v<T>) {
        e = T(draw(), draw());
        want = std::max({want, std::abs(static_cast<double>(e.real())),
                         std::abs(static_cast<double>(e.imag()))});
      } else {
        e = draw();
        want = std::max(want, std::abs(static_cast<double>(e)));
      }
    }
    const TensorView<const T> x(v.data(), {n});
    const detail::Magnitudes m = detail::magnitudes(x);
    EXPECT_TRUE(m.finite) << n;
    EXPECT_EQ(m.max_abs, want) << n;
    for (const R bad : {std::numeric_limits<R>::infinity(), -std::numeric_limits<R>::infinity(),
                        std::numeric_limits<R>::quiet_NaN()}) {
      const std::size_t at = static_cast<std::size_t>(rng.uniform() * static_cast<double>(n));
      const T keep = v[at];
      if constexpr (detail::is_complex_v<T>) {
        v[at] = T(keep.real(), bad);
      } else {
        v[at] = bad;
      }
      EXPECT_FALSE(detail::magnitudes(x).finite) << n << " at " << at;
      v[at] = keep;
    }
  }
}

TEST(ScalingScan, MagnitudesMatchAPlainLoop) {
  const ThreeThreads threads;
  expect_magnitudes_match<float>(1);
  expect_magnitudes_match<double>(2);
  expect_magnitudes_match<std::complex<float>>(3);
  expect_magnitudes_match<std::complex<double>>(4);
}

TEST(ScalingLimits, UnrepresentableResultsAreRefusedInOneLine) {
  CpOptions cp;
  cp.rank = 1;
  TuckerOptions tk;
  tk.ranks = {1, 1, 1};
  // A constant tensor is rank one with weight sqrt(120) |x|.
  const float big = std::numeric_limits<float>::max() / 2;
  expect_throw_with<NumericalError>([&] { cp_als(constant(big), cp); },
                                    "the CP weights of this tensor (largest |x| = 1.7e+38) "
                                    "exceed the range of float; decompose it in double");
  expect_throw_with<NumericalError>([&] { tucker(constant(big), tk); },
                                    "the entries of the Tucker core of this tensor");
  // Subnormal input: the weight sqrt(120) 1e-41 is subnormal too.
  expect_throw_with<NumericalError>([&] { cp_als(constant(1e-41f), cp); },
                                    "fall below the range of float; decompose it in double");
  expect_throw_with<NumericalError>([&] { cp_als(constant(1e-310), cp); },
                                    "fall below the range of double; scale the tensor up");
  // In double, Tucker's eigenvalues are squares: 1e+-200 is refused for them (not a
  // failing eigensolver), while CP-ALS is fine.
  expect_throw_with<NumericalError>([&] { tucker(times<double>(rank_two(), 1e200), tk); },
                                    "the Gram eigenvalues of this tensor (largest |x| = ");
  expect_throw_with<NumericalError>([&] { tucker(times<double>(rank_two(), 1e-300), tk); },
                                    "fall below the range of double; scale the tensor up");
  EXPECT_LT(cp_als(times<double>(rank_two(), 1e-300), cp).fit, 0.99);
}

TEST(ScalingLimits, FloatNearTheLimitsNeedsNoEigensolverLuck) {
  // The Grams of a float tensor near 1e-38 underflowed and the eigensolver failed.
  TuckerOptions o;
  o.ranks = {2, 2, 2};
  const TuckerResult<float> got = tucker(times<float>(rank_two(), 1e-37), o);
  const TuckerResult<float> want = tucker(times<float>(rank_two(), 1.0), o);
  EXPECT_NEAR(got.relative_error, want.relative_error, fit_tol<float>());
}

TEST(ScalingCli, CpOfATinyTensorReportsTheTrueFit) {
  TempDir dir;
  io::save_npy<double>(dir / "x.npy", rank_two().view());
  io::save_npy<double>(dir / "tiny.npy", times<double>(rank_two(), 1e-200).view());
  const std::string common = " --rank 2 --max-iters 30 --tol 0 -q --out ";
  ASSERT_EQ(tenfold_cli(dir, "cp " + (dir / "x.npy").string() + common + (dir / "a").string()).code,
            0);
  const CliRun tiny =
      tenfold_cli(dir, "cp " + (dir / "tiny.npy").string() + common + (dir / "b").string());
  ASSERT_EQ(tiny.code, 0) << tiny.err;
  const auto a = nlohmann::json::parse(slurp(dir / "a/report.json"));
  const auto b = nlohmann::json::parse(slurp(dir / "b/report.json"));
  EXPECT_LT(b["fit"].get<double>(), 0.99);
  EXPECT_NEAR(b["fit"].get<double>(), a["fit"].get<double>(), fit_tol<double>());
  const auto w = io::load_npy<double>(dir / "b/weights.npy");
  const auto w1 = io::load_npy<double>(dir / "a/weights.npy");
  EXPECT_LT(rel_diff(scaled_values(w.values(), 1e-200), w1.values()), model_tol<double>());
}

}  // namespace
}  // namespace tenfold::test
