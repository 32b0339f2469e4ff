// Compression first: CP-ALS of the ST-HOSVD core, lifted, then refined on the full tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cp_test_util.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace tenfold::test {
namespace {

// 1 - ||X - M|| / ||X||, from the dense model.
double direct_fit(const Tensor<double>& x, const KTensor<double>& m) {
  const Tensor<double> full = m.full();
  double r2 = 0.0, x2 = 0.0;
  for (index_t i = 0; i < x.numel(); ++i) {
    r2 += (x[i] - full[i]) * (x[i] - full[i]);
    x2 += x[i] * x[i];
  }
  return 1.0 - std::sqrt(r2 / x2);
}

// A full-rank tensor with entries sin(i + 1) (planted problems need R <= I_n).
Tensor<double> dense(std::vector<index_t> dims) {
  Tensor<double> x(std::move(dims));
  for (index_t i = 0; i < x.numel(); ++i) x[i] = std::sin(static_cast<double>(i + 1));
  return x;
}

CpOptions options(index_t rank, CpCompress compress) {
  CpOptions o;
  o.rank = rank;
  o.max_iters = 2000;
  o.tol = 1e-10;
  o.compress = compress;
  return o;
}

TEST(CpCompressed, PlantedProblemsRecoveredWithAndWithoutCompression) {
  struct Case {
    std::vector<index_t> dims;
    index_t rank;
    double collinearity, noise;
  };
  const Case cases[] = {{{60, 50, 40}, 5, 0.0, 0.0},
                        {{60, 50, 40}, 5, 0.5, 0.1},
                        {{20, 18, 16, 14}, 4, 0.5, 0.0},
                        {{20, 18, 16, 14}, 4, 0.0, 0.1}};
  std::uint64_t seed = 7;
  for (const Case& k : cases) {
    const auto p = planted(k.dims, k.rank, k.collinearity, k.noise, ++seed);
    for (CpCompress c : {CpCompress::off, CpCompress::on}) {
      const CpResult<double> r = cp_als(p.tensor, options(k.rank, c));
      EXPECT_EQ(r.compressed, c == CpCompress::on);
      EXPECT_GE(factor_match_score(r.model, p.truth), 0.99)
          << "order " << k.dims.size() << " noise " << k.noise << " " << to_string(c);
      if (c != CpCompress::on) continue;
      EXPECT_EQ(r.compression_ranks, std::vector<index_t>(k.dims.size(), k.rank));
      EXPECT_GT(r.compressed_iterations, 0);
      EXPECT_GT(r.iterations, r.compressed_iterations);  // refining sweeps ran
      EXPECT_EQ(r.fit_history.size(), static_cast<std::size_t>(r.iterations));
      EXPECT_GT(r.timings.compress, 0.0);
    }
  }
}

TEST(CpCompressed, RefinementReachesThePlainAlsFit) {
  // 10 % noise: the best CP does not lie in the compressed subspaces, so the refining
  // sweeps on the full tensor must carry the lifted model to plain ALS's answer.
  const auto p = planted({50, 40, 30}, 6, 0.3, 0.1, 21);
  const CpResult<double> plain = cp_als(p.tensor, options(6, CpCompress::off));
  const CpResult<double> comp = cp_als(p.tensor, options(6, CpCompress::on));
  ASSERT_TRUE(plain.converged);
  ASSERT_TRUE(comp.converged);
  ASSERT_TRUE(comp.compressed);
  // Both stop when a sweep changes the fit by < 1e-10; linear convergence leaves each
  // within a few hundred of that of the common limit.
  EXPECT_NEAR(comp.fit, plain.fit, 1e-7);
  EXPECT_GE(factor_match_score(comp.model, plain.model), 0.9999);
  // The reported fit is that of the returned model on the full tensor.
  EXPECT_NEAR(comp.fit, direct_fit(p.tensor, comp.model), 1e-10);
  // The core phase alone ends below the full optimum (noise outside the subspaces).
  EXPECT_LT(comp.fit_history[static_cast<std::size_t>(comp.compressed_iterations - 1)], comp.fit);
}

TEST(CpCompressed, CorePhaseFitIsThatOfTheLiftedModel) {
  // With every sweep spent on the core, the answer is the lifted core model, and its
  // fit from ||X||^2 - ||G||^2 + ||G - core model||^2 must be exact.
  const auto p = planted({40, 30, 20}, 4, 0.0, 0.2, 31);
  CpOptions o = options(4, CpCompress::on);
  o.max_iters = 6;
  o.tol = 0.0;
  const CpResult<double> r = cp_als(p.tensor, o);
  ASSERT_TRUE(r.compressed);
  EXPECT_EQ(r.compressed_iterations, 6);
  EXPECT_EQ(r.iterations, 6);
  EXPECT_EQ(r.stop, CpStop::max_iters);
  EXPECT_NEAR(r.fit, direct_fit(p.tensor, r.model), 1e-12);
}

TEST(CpCompressed, CallbackSeesOneSequenceOfFullTensorFits) {
  const auto p = planted({40, 30, 20}, 4, 0.0, 0.1, 41);
  CpOptions o = options(4, CpCompress::on);
  o.n_starts = 1;  // one start: one sequence (several starts each report their own)
  std::vector<double> seen;
  o.callback = [&](const CpProgress& q) {
    EXPECT_EQ(q.iteration, static_cast<int>(seen.size()) + 1);
    seen.push_back(q.fit);
    return true;
  };
  const CpResult<double> r = cp_als(p.tensor, o);
  EXPECT_EQ(seen, r.fit_history);
  // Stopping inside the core phase returns the lifted model (from nvecs: the core phase
  // takes more than 3 sweeps; the automatic gevd start can converge sooner).
  o.init = CpInit::nvecs;
  o.callback = [](const CpProgress& q) { return q.iteration < 3; };
  const CpResult<double> s = cp_als(p.tensor, o);
  EXPECT_EQ(s.stop, CpStop::callback);
  EXPECT_EQ(s.iterations, 3);
  EXPECT_EQ(s.compressed_iterations, 3);
  EXPECT_NEAR(s.fit, direct_fit(p.tensor, s.model), 1e-12);
}

TEST(CpCompressed, StartsRunOnTheCore) {
  const auto p = planted({40, 30, 20}, 3, 0.0, 0.05, 51);
  CpOptions o = options(3, CpCompress::on);
  o.init = CpInit::random;
  o.n_starts = 4;
  const CpResult<double> r = cp_als(p.tensor, o);
  ASSERT_TRUE(r.compressed);
  EXPECT_EQ(r.init, CpInit::random);
  ASSERT_EQ(r.start_fits.size(), 4u);
  EXPECT_DOUBLE_EQ(r.start_fits[static_cast<std::size_t>(r.best_start)],
                   *std::max_element(r.start_fits.begin(), r.start_fits.end()));
  EXPECT_GE(factor_match_score(r.model, p.truth), 0.99);
}

TEST(CpCompressed, DefaultRunsSeveralStartsOnTheCore) {
  // n_starts 0 (automatic) from the automatic start (gevd on this 3-way core):
  // cp_compressed_starts starts on the core, the best kept; a callback stop ends them
  // all, and a time limit counts from the call.
  // (large enough that starts on the core cost less than half a start in all)
  const auto p = planted({120, 100, 80}, 3, 0.0, 0.05, 52);
  CpOptions o = options(3, CpCompress::on);
  o.tol = 1e-8;
  const CpResult<double> r = cp_als(p.tensor, o);
  ASSERT_TRUE(r.compressed);
  const int starts = cp_compressed_starts(p.tensor.dims(), 3);
  ASSERT_GT(starts, 1);
  // (random starts share a budget of 20 core sweeps each: fewer when they run longer)
  ASSERT_GT(r.start_fits.size(), 1u);
  ASSERT_LE(r.start_fits.size(), static_cast<std::size_t>(starts));
  EXPECT_EQ(r.init, r.best_start == 0 ? CpInit::gevd : CpInit::random);
  EXPECT_EQ(r.start_fits[static_cast<std::size_t>(r.best_start)],
            *std::max_element(r.start_fits.begin(), r.start_fits.end()));
  EXPECT_GE(factor_match_score(r.model, p.truth), 0.99);
  int calls = 0;
  o.callback = [&](const CpProgress&) { return ++calls < 3; };
  const CpResult<double> s = cp_als(p.tensor, o);
  EXPECT_EQ(s.stop, CpStop::callback);
  EXPECT_EQ(calls, 3);  // no start after the stop
  EXPECT_LT(s.start_fits.size(), static_cast<std::size_t>(starts));
  // A given start, or an explicit count, is run as asked.
  o.callback = nullptr;
  o.init = CpInit::random;
  EXPECT_EQ(cp_als(p.tensor, o).start_fits.size(), 1u);
  o.init = CpInit::automatic;
  o.n_starts = 2;
  EXPECT_EQ(cp_als(p.tensor, o).start_fits.size(), 2u);
}

TEST(CpCompressed, GevdStartIsExactOnAnExactRankRTensor) {
  // Noise-free rank R with collinear factors: the eigenvectors of S_a S_b^{-1} are the
  // core's A up to scale, so one sweep on the core leaves the planted model (a random
  // start does not get there in one sweep).
  const auto p = planted({40, 30, 20}, 5, 0.5, 0.0, 91);
  CpOptions o = options(5, CpCompress::on);
  o.init = CpInit::gevd;
  o.n_starts = 1;
  o.max_iters = 1;
  const CpResult<double> r = cp_als(p.tensor, o);
  ASSERT_TRUE(r.compressed);
  EXPECT_EQ(r.init, CpInit::gevd);
  EXPECT_GE(factor_match_score(r.model, p.truth), 1.0 - 1e-8);
  // (the fit from ||X||^2 + ||M||^2 - 2 <X, M> is good to about sqrt(eps))
  EXPECT_GE(r.fit, 1.0 - 1e-6);
  o.init = CpInit::random;
  EXPECT_LT(factor_match_score(cp_als(p.tensor, o).model, p.truth), 0.99);
  // float: the same start from the core in float, to float's precision.
  Tensor<float> xf(p.tensor.dims());
  for (index_t i = 0; i < xf.numel(); ++i) xf[i] = static_cast<float>(p.tensor[i]);
  o.init = CpInit::gevd;
  const CpResult<float> rf = cp_als(xf, o);
  EXPECT_EQ(rf.init, CpInit::gevd);
  EXPECT_GE(rf.fit, 1.0 - 1e-3);  // sqrt(eps) of float: 3.5e-4
}

TEST(CpCompressed, GevdRefusedWhereItDoesNotApply) {
  CpOptions o = options(4, CpCompress::on);
  o.init = CpInit::gevd;
  o.max_iters = 3;
  // Order 4; axis 0 shorter than R (core 3 x 4 x 4); no compression.
  expect_throw_with<InvalidArgument>(
      [&] {
        cp_als(dense({8, 7, 6, 5}), o);
      },
      "init = gevd needs a 3-way tensor");
  expect_throw_with<InvalidArgument>(
      [&] {
        cp_als(dense({3, 30, 20}), o);
      },
      "first two axes have at least rank = 4");
  o.compress = CpCompress::off;
  expect_throw_with<InvalidArgument>(
      [&] {
        cp_als(dense({30, 20, 10}), o);
      },
      "init = gevd starts on the compressed core");
  // automatic on a core where it does not apply: nvecs, as before.
  o = options(4, CpCompress::on);
  o.max_iters = 3;
  o.n_starts = 1;
  EXPECT_EQ(cp_als(dense({3, 30, 20}), o).init, CpInit::nvecs);
}

TEST(CpCompressed, AutomaticStartsFitInTwoFifthsOfASingleStart) {
  // 400^3 at R 32: ST-HOSVD (3.2e10 flops) and two full sweeps (1.6e10) dwarf a core
  // start of 20 * (4 * 32 * 32^3 + 4e5) = 9.2e7, so the cap holds; 200^3 at R 64: a core
  // start of 20 * (4 * 64 * 64^3 + 4e5) = 1.35e9 against 3.7e9 + 4.1e9 + 1.35e9 for one
  // start in all: two fifths of that buy two more; 128^3 at R 16: a core sweep's 2.6e5
  // flops are less than its fixed cost, which the count charges (21 starts, not 63).
  const std::vector<index_t> big{400, 400, 400}, dense_core{200, 200, 200};
  EXPECT_EQ(cp_compressed_starts(big, 32), kCpMaxCompressedStarts);
  EXPECT_EQ(cp_compressed_starts(dense_core, 64), 3);
  EXPECT_EQ(cp_compressed_starts(std::vector<index_t>{128, 128, 128}, 16), 21);
  const std::vector<index_t> mid{300, 300, 300};
  const int n = cp_compressed_starts(mid, 32);
  EXPECT_GT(n, 8);
  EXPECT_LE(n, kCpMaxCompressedStarts);
}

TEST(CpCompressed, SkippedWhereItCannotPay) {
  // Ranks min(I_n, R) equal to the sizes: nothing to compress, even when asked.
  const Tensor<double> x = dense({4, 5, 6});
  EXPECT_EQ(cp_compression_ranks(x.dims(), 6), (std::vector<index_t>{4, 5, 6}));
  CpOptions o = options(6, CpCompress::on);
  o.max_iters = 20;
  const CpResult<double> on = cp_als(x, o);
  EXPECT_FALSE(on.compressed);
  EXPECT_TRUE(on.compression_ranks.empty());
  EXPECT_EQ(on.compressed_iterations, 0);
  // automatic: not below kCpCompressMinEntries, even at a large reduction...
  const auto small = planted({40, 30, 20}, 2, 0.0, 0.0, 62);
  EXPECT_FALSE(cp_als(small.tensor, options(2, CpCompress::automatic)).compressed);
  // ...and on from there (128^3 = 2^21 entries, 2^15 times the core).
  const auto large = planted({128, 128, 128}, 4, 0.0, 0.0, 63);
  o = options(4, CpCompress::automatic);
  o.tol = 1e-8;
  const CpResult<double> r = cp_als(large.tensor, o);
  EXPECT_TRUE(r.compressed);
  EXPECT_GE(factor_match_score(r.model, large.truth), 0.99);
  // ...but not where ST-HOSVD would form a mode Gram beyond kCpNvecsMaxSize^2.
  const auto tall = planted({kCpNvecsMaxSize + 1, 16, 16}, 2, 0.0, 0.0, 64);
  o = options(2, CpCompress::automatic);
  o.max_iters = 5;
  EXPECT_FALSE(cp_als(tall.tensor, o).compressed);
  // The default is automatic.
  EXPECT_EQ(CpOptions{}.compress, CpCompress::automatic);
}

TEST(CpCompressed, RanksFollowTheCallersModeOrder) {
  // Row-major: the run is in NumPy axis order (10, 20, 30); the ranks come back in the
  // input's mode order.
  const Tensor<double> x = dense({30, 20, 10});
  EXPECT_EQ(cp_compression_ranks(x.dims(), 15), (std::vector<index_t>{15, 15, 10}));
  CpOptions o = options(15, CpCompress::on);
  o.max_iters = 3;
  o.layout = Layout::row_major;
  const CpResult<double> r = cp_als(x, o);
  EXPECT_EQ(r.compression_ranks, (std::vector<index_t>{15, 15, 10}));
  ASSERT_EQ(r.model.factors.size(), 3u);
  for (int n = 0; n < 3; ++n)
    EXPECT_EQ(r.model.factors[static_cast<std::size_t>(n)].rows(), x.dim(n));
}

TEST(CpCompressed, RefusedWhereItDoesNotApply) {
  const auto p = planted({20, 10, 8}, 2, 0.0, 0.0, 81);
  CpOptions o = options(2, CpCompress::on);
  o.nonnegative = true;
  expect_throw_with<InvalidArgument>([&] { cp_als(p.tensor, o); },
                                     "compress = on cannot be combined with nonnegative");
  o.compress = CpCompress::automatic;  // automatic: runs uncompressed
  EXPECT_FALSE(cp_als(p.tensor, o).compressed);
  o = options(2, CpCompress::on);
  const std::vector<std::uint8_t> all(static_cast<std::size_t>(p.tensor.numel()), 1);
  expect_throw_with<InvalidArgument>(
      [&] { cp_als(p.tensor, TensorView<const std::uint8_t>(all.data(), p.tensor.dims()), o); },
      "compress = on cannot be combined with missing values");
  expect_throw_with<InvalidArgument>([] { parse_cp_compress("yes"); },
                                     "unknown compress 'yes' (expected auto, on or off)");
  EXPECT_EQ(parse_cp_compress(to_string(CpCompress::automatic)), CpCompress::automatic);
}

}  // namespace
}  // namespace tenfold::test
