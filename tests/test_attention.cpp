// Attention adapter: the collaborative form against simple loop-based references
// (dense QK tensors, scores and softmax written out) on small random layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention_test_util.hpp"
#include "backend_test_util.hpp"
#include "random_matrix.hpp"
#include "tenfold/attention.hpp"
#include "tenfold/error.hpp"

namespace {

using namespace tenfold;
using namespace tenfold::attention;
using namespace tenfold::test;

// T(h, i, j) = sum_k W_Q(i, h d + k) W_K(j, h d + k) / sqrt(d), by loops.
Tensor<double> dense_qk(const QueryKeyLayer<double>& l) {
  const index_t h = l.heads, d = l.head_dim, n = l.input_dim();
  Tensor<double> t({h, n, n});
  for (index_t g = 0; g < h; ++g)
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (index_t k = 0; k < d; ++k)
          s += l.query_weight(i, g * d + k) * l.key_weight(j, g * d + k);
        t(g, i, j) = s / std::sqrt(static_cast<double>(d));
      }
  return t;
}

// T~(h, i, j) = scale sum_r m(h, r) A(i, r) B(j, r), by loops.
Tensor<double> dense_qk(const CollaborativeLayer<double>& c) {
  const index_t h = c.heads(), n = c.input_dim();
  Tensor<double> t({h, n, n});
  for (index_t g = 0; g < h; ++g)
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (index_t r = 0; r < c.rank(); ++r) s += c.mixing(g, r) * c.query(i, r) * c.key(j, r);
        t(g, i, j) = c.context_scale * s;
      }
  return t;
}

double dense_relative_error(const QueryKeyLayer<double>& l, const CollaborativeLayer<double>& c) {
  const Tensor<double> a = dense_qk(l), b = dense_qk(c);
  double num = 0.0, den = 0.0;
  for (index_t i = 0; i < a.numel(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += a[i] * a[i];
  }
  return std::sqrt(num / den);
}

// s_h(x_i, y_j) = (x_i^T W_Q^h + b_Q^h)(W_K^h^T y_j + b_K^h) / sqrt(d), by loops: (n_k, n_q, H).
Tensor<double> reference_scores(const QueryKeyLayer<double>& l, const Matrix<double>& x,
                                const Matrix<double>& y) {
  const index_t h = l.heads, d = l.head_dim, n = l.input_dim();
  Tensor<double> s({y.cols(), x.cols(), h});
  for (index_t g = 0; g < h; ++g)
    for (index_t i = 0; i < x.cols(); ++i)
      for (index_t j = 0; j < y.cols(); ++j) {
        double acc = 0.0;
        for (index_t k = 0; k < d; ++k) {
          const index_t c = g * d + k;
          double q = l.query_bias.empty() ? 0.0 : l.query_bias[static_cast<std::size_t>(c)];
          double kk = l.key_bias.empty() ? 0.0 : l.key_bias[static_cast<std::size_t>(c)];
          for (index_t p = 0; p < n; ++p) {
            q += x(p, i) * l.query_weight(p, c);
            kk += y(p, j) * l.key_weight(p, c);
          }
          acc += q * kk;
        }
        s(j, i, g) = acc / std::sqrt(static_cast<double>(d));
      }
  return s;
}

// Softmax over keys (mode 0) of every (query, head).
Tensor<double> softmax(const Tensor<double>& s) {
  Tensor<double> p(s.dims());
  const index_t nk = s.dim(0);
  for (index_t col = 0; col < s.numel() / nk; ++col) {
    const double* in = s.data() + col * nk;
    double* out = p.data() + col * nk;
    const double mx = *std::max_element(in, in + nk);
    double sum = 0.0;
    for (index_t j = 0; j < nk; ++j) sum += out[j] = std::exp(in[j] - mx);
    for (index_t j = 0; j < nk; ++j) out[j] /= sum;
  }
  return p;
}

double max_relative_difference(const Tensor<double>& a, const Tensor<double>& b) {
  double worst = 0.0;
  for (index_t i = 0; i < a.numel(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(a[i]));
  }
  return worst;
}

class Attention : public tenfold::test::OnEachBackend {};

TEST_P(Attention, ScoresMatchLoopReference) {
  const auto l = random_layer<double>(3, 4, 10, true, 1);
  std::mt19937_64 gen(2);
  const auto x = gaussian<double>(10, 5, 1.0, gen), y = gaussian<double>(10, 7, 1.0, gen);
  const Tensor<double> s = scores(l, x, y), ref = reference_scores(l, x, y);
  ASSERT_EQ(s.dims(), (std::vector<index_t>{7, 5, 3}));
  for (index_t i = 0; i < s.numel(); ++i)
    EXPECT_NEAR(s[i], ref[i], 1e-13 * (1.0 + std::abs(ref[i])));
}

TEST_P(Attention, CollaborativeScoresMatchLoopReference) {
  std::mt19937_64 gen(3);
  CollaborativeLayer<double> c;
  c.mixing = gaussian<double>(3, 5, 1.0, gen);
  c.query = gaussian<double>(8, 5, 1.0, gen);
  c.key = gaussian<double>(8, 5, 1.0, gen);
  c.content = gaussian<double>(8, 3, 1.0, gen);
  c.context_scale = 0.7;
  const auto x = gaussian<double>(8, 4, 1.0, gen), y = gaussian<double>(8, 6, 1.0, gen);
  const Tensor<double> s = scores(c, x, y);
  for (index_t g = 0; g < 3; ++g)
    for (index_t i = 0; i < 4; ++i)
      for (index_t j = 0; j < 6; ++j) {
        double ctx = 0.0, content = 0.0;
        for (index_t r = 0; r < 5; ++r) {
          double xa = 0.0, yb = 0.0;
          for (index_t p = 0; p < 8; ++p) {
            xa += x(p, i) * c.query(p, r);
            yb += y(p, j) * c.key(p, r);
          }
          ctx += xa * c.mixing(g, r) * yb;
        }
        for (index_t p = 0; p < 8; ++p) content += c.content(p, g) * y(p, j);
        EXPECT_NEAR(s(j, i, g), 0.7 * ctx + content, 1e-13 * (1.0 + std::abs(ctx)));
      }
}

TEST_P(Attention, FullRankKeepsProbabilitiesAndScoresUpToRowConstants) {
  for (std::uint64_t seed = 10; seed < 13; ++seed) {
    const auto l = random_layer<double>(4, 3, 9, true, seed);
    std::mt19937_64 gen(seed + 100);
    const auto x = gaussian<double>(9, 6, 1.0, gen), y = gaussian<double>(9, 8, 1.0, gen);
    const CollaborativeLayer<double> c = exact(l);
    EXPECT_EQ(c.rank(), 12);
    EXPECT_EQ(c.context_scale, 1.0);
    const Tensor<double> s = scores(l, x, y), sc = scores(c, x, y);
    // s - s~ is constant along each (query, head) column: the terms with b_K.
    for (index_t col = 0; col < 6 * 4; ++col) {
      const double shift = s[col * 8] - sc[col * 8];
      for (index_t j = 1; j < 8; ++j) {
        EXPECT_NEAR(s[col * 8 + j] - sc[col * 8 + j], shift, 1e-13 * (1.0 + std::abs(shift)));
      }
    }
    EXPECT_LT(max_relative_difference(softmax(s), softmax(sc)), 1e-12);
    EXPECT_LT(qk_error(l, c), 1e-14);
  }
}

TEST_P(Attention, KeyBiasChangesNoProbability) {
  auto l = random_layer<double>(3, 4, 10, true, 20);
  std::mt19937_64 gen(21);
  const auto x = gaussian<double>(10, 5, 1.0, gen), y = gaussian<double>(10, 6, 1.0, gen);
  const Tensor<double> raw_before = scores(l, x, y);
  const CollaborativeLayer<double> c_before = exact(l);
  l.key_bias = gaussian_vector<double>(12, gen);
  const Tensor<double> raw_after = scores(l, x, y);
  ASSERT_GT(max_relative_difference(raw_before, raw_after), 1e-3);  // the scores did move
  const Tensor<double> after = softmax(raw_after);
  EXPECT_LT(max_relative_difference(softmax(raw_before), after), 1e-12);
  // The collaborative form does not depend on b_K at all.
  const CollaborativeLayer<double> c_after = exact(l);
  EXPECT_EQ(c_before.content.values(), c_after.content.values());
  EXPECT_LT(max_relative_difference(after, softmax(scores(c_after, x, y))), 1e-12);
}

TEST_P(Attention, QkTensorIsTheDenseTensor) {
  const auto l = random_layer<double>(3, 2, 5, false, 30);
  const Tensor<double> t = qk_tensor(l).full(), ref = dense_qk(l);
  for (index_t i = 0; i < t.numel(); ++i) EXPECT_NEAR(t[i], ref[i], 1e-15);
}

TEST_P(Attention, ReportedErrorEqualsDenseError) {
  const auto l = random_layer<double>(3, 4, 10, true, 40);
  for (index_t r : {1, 3, 6, 9, 12}) {
    CompressOptions o;
    o.backend = backend();
    o.rank = r;
    o.max_iters = 20;
    const CompressResult<double> res = compress(l, o);
    const double dense = dense_relative_error(l, res.layer);
    EXPECT_NEAR(res.relative_error, dense, 1e-12 + 1e-10 * dense) << "R = " << r;
    EXPECT_NEAR(qk_error(l, res.layer), res.relative_error, 1e-15 + 1e-13 * dense);
  }
}

TEST_P(Attention, NearExactErrorIsNotLostToCancellation) {
  // A collaborative layer 1e-7 away (relative) from the exact one: the difference
  // of norms would cancel; the reported error must still be right to many digits.
  const auto l = random_layer<double>(3, 4, 10, false, 50);
  CollaborativeLayer<double> c = exact(l);
  std::mt19937_64 gen(51);
  std::normal_distribution<double> n(0.0, 1e-7);
  for (double& v : c.query.values()) v *= 1.0 + n(gen);
  const double dense = dense_relative_error(l, c);
  ASSERT_GT(dense, 1e-8);
  ASSERT_LT(dense, 1e-6);
  EXPECT_NEAR(qk_error(l, c), dense, 1e-6 * dense);
}

TEST_P(Attention, ErrorFallsWithRankAndVanishesAtFullRank) {
  for (std::uint64_t seed : {60, 61}) {
    const auto l = random_layer<double>(4, 4, 12, true, seed);
    double previous = 1.0;
    for (index_t r : {2, 4, 6, 8, 10, 12, 14}) {
      CompressOptions o;
      o.backend = backend();
      o.rank = r;
      const CompressResult<double> res = compress(l, o);
      EXPECT_LT(res.relative_error, previous) << "R = " << r;
      previous = res.relative_error;
    }
    CompressOptions o;
    o.backend = backend();
    o.rank = 16;
    const CompressResult<double> full = compress(l, o);
    EXPECT_LT(full.relative_error, 1e-13);
    EXPECT_LT(dense_relative_error(l, full.layer), 1e-13);
    EXPECT_EQ(full.iterations, 0);  // the exact form, no ALS
    EXPECT_TRUE(full.converged);
  }
}

TEST_P(Attention, StructuredKeepsTheBetterOfItsStarts) {
  const auto l = random_layer<double>(4, 4, 12, false, 70);
  auto run = [&](Init init) {
    CompressOptions o;
    o.backend = backend();
    o.rank = 7;
    o.max_iters = 6;
    o.tol = 0.0;
    o.init = init;
    return compress(l, o);
  };
  const double heads = run(Init::heads).relative_error, nvecs = run(Init::nvecs).relative_error;
  const CompressResult<double> best = run(Init::structured);
  EXPECT_DOUBLE_EQ(best.relative_error, std::min(heads, nvecs));
  EXPECT_EQ(best.iterations, 6);
  // A heads start that converges within the trial is kept as it is.
  CompressOptions loose;
  loose.backend = backend();
  loose.rank = 7;
  loose.tol = 0.05;
  loose.init = Init::heads;
  const CompressResult<double> h = compress(l, loose);
  ASSERT_TRUE(h.converged);
  ASSERT_LT(h.iterations, 10);
  loose.init = Init::structured;
  EXPECT_EQ(compress(l, loose).relative_error, h.relative_error);
  // Past the trial the kept start goes on: never worse than after the trial.
  CompressOptions o;
  o.backend = backend();
  o.rank = 7;
  o.max_iters = 40;
  o.tol = 0.0;
  EXPECT_LE(compress(l, o).relative_error, best.relative_error);
}

TEST_P(Attention, AllStartsRunAndRandomDependsOnSeed) {
  const auto l = random_layer<double>(3, 4, 10, true, 80);
  for (Init init : {Init::structured, Init::heads, Init::nvecs, Init::random}) {
    CompressOptions o;
    o.backend = backend();
    o.rank = 5;
    o.init = init;
    const CompressResult<double> r = compress(l, o);
    EXPECT_GT(r.relative_error, 0.0);
    EXPECT_LT(r.relative_error, 1.0);
    EXPECT_NEAR(r.relative_error, dense_relative_error(l, r.layer), 1e-10);
    EXPECT_EQ(parse_init(to_string(init)), init);
  }
  CompressOptions o;
  o.backend = backend();
  o.rank = 5;
  o.init = Init::random;
  o.max_iters = 3;
  const double a = compress(l, o).relative_error;
  EXPECT_EQ(a, compress(l, o).relative_error);
  o.seed = 1;
  EXPECT_NE(a, compress(l, o).relative_error);
}

TEST_P(Attention, CallbackSeesEverySweepAndStops) {
  const auto l = random_layer<double>(4, 4, 12, false, 75);
  CompressOptions o;
  o.backend = backend();
  o.rank = 7;
  o.tol = 0.0;
  std::vector<CompressProgress> seen;
  const auto recording = [&](const CompressProgress& p) {
    seen.push_back(p);
    return true;
  };
  // Init::structured: the heads trial (10 sweeps), the nvecs trial (10), then the
  // better one goes on; sweeps numbered through, the result unchanged by the callback.
  o.max_iters = 15;
  const CompressResult<double> plain = compress(l, o);
  o.callback = recording;
  const CompressResult<double> r = compress(l, o);
  EXPECT_EQ(r.layer.mixing.values(), plain.layer.mixing.values());
  EXPECT_FALSE(r.stopped);
  ASSERT_EQ(seen.size(), 25u);
  double seconds = 0.0;
  for (std::size_t k = 0; k < seen.size(); ++k) {
    EXPECT_EQ(seen[k].iteration, static_cast<int>(k) + 1);
    EXPECT_EQ(seen[k].layer, -1);
    EXPECT_FALSE(seen[k].layer_done);
    EXPECT_GE(seen[k].seconds, seconds);
    seconds = seen[k].seconds;
    EXPECT_GT(seen[k].relative_error, 0.0);
    EXPECT_LT(seen[k].relative_error, 1.0);
  }
  const Init kept = seen[9].relative_error <= seen[19].relative_error ? Init::heads : Init::nvecs;
  for (std::size_t k = 0; k < 10; ++k) EXPECT_EQ(seen[k].start, Init::heads);
  for (std::size_t k = 10; k < 20; ++k) EXPECT_EQ(seen[k].start, Init::nvecs);
  for (std::size_t k = 20; k < 25; ++k) EXPECT_EQ(seen[k].start, kept);
  EXPECT_NEAR(seen.back().relative_error, r.relative_error, 1e-8);
  EXPECT_LE(seen.back().seconds, r.seconds);

  // A false stops the ALS: the model of that sweep, stopped, not converged.
  o.init = Init::heads;
  o.max_iters = 3;
  o.callback = nullptr;
  const CompressResult<double> three = compress(l, o);
  o.max_iters = 10;
  o.callback = [](const CompressProgress& p) { return p.iteration != 3; };
  const CompressResult<double> stopped = compress(l, o);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_FALSE(stopped.converged);
  EXPECT_EQ(stopped.iterations, 3);
  EXPECT_EQ(stopped.layer.mixing.values(), three.layer.mixing.values());
  EXPECT_EQ(stopped.relative_error, three.relative_error);
  // Init::structured stopped in its nvecs trial: no sweep after the stop.
  o.init = Init::structured;
  o.max_iters = 30;
  seen.clear();
  o.callback = [&](const CompressProgress& p) {
    seen.push_back(p);
    return p.iteration != 12;
  };
  const CompressResult<double> trial = compress(l, o);
  EXPECT_TRUE(trial.stopped);
  EXPECT_FALSE(trial.converged);
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(seen.back().start, Init::nvecs);
}

TEST_P(Attention, ParameterCounts) {
  auto l = random_layer<double>(3, 4, 10, true, 90);
  CompressOptions o;
  o.backend = backend();
  o.rank = 5;
  o.max_iters = 2;
  CompressResult<double> r = compress(l, o);
  EXPECT_EQ(r.params_before, 2 * 10 * 12 + 2 * 12);
  EXPECT_EQ(r.params_after, 3 * 5 + 2 * 10 * 5 + 3 * 10);
  l.query_bias.clear();
  l.key_bias.clear();
  r = compress(l, o);
  EXPECT_EQ(r.params_before, 2 * 10 * 12);
  EXPECT_EQ(r.params_after, 3 * 5 + 2 * 10 * 5);
  EXPECT_EQ(r.layer.content.size(), 0);
}

TEST_P(Attention, FloatLayers) {
  const auto ld = random_layer<double>(3, 4, 10, true, 100);
  QueryKeyLayer<float> lf;
  lf.heads = 3;
  lf.head_dim = 4;
  lf.query_weight = Matrix<float>(
      10, 12, std::vector<float>(ld.query_weight.values().begin(), ld.query_weight.values().end()));
  lf.key_weight = Matrix<float>(
      10, 12, std::vector<float>(ld.key_weight.values().begin(), ld.key_weight.values().end()));
  lf.query_bias.assign(ld.query_bias.begin(), ld.query_bias.end());
  CompressOptions o;
  o.backend = backend();
  o.rank = 6;
  o.max_iters = 30;
  const double ed = compress(ld, o).relative_error, ef = compress(lf, o).relative_error;
  EXPECT_NEAR(ef, ed, 1e-3 * ed);
  EXPECT_LT(qk_error(lf, exact(lf)), 1e-6);
}

TEST_P(Attention, RedundancyOfAKnownSpectrum) {
  // W_Q = U diag(a), W_K = V diag(b) with orthonormal U, V: the energies are a^2
  // and b^2, and P P^T = U diag(a^2 b^2) U^T.
  const index_t h = 3, d = 2, n = 8, s = 6;
  std::mt19937_64 gen(110);
  QueryKeyLayer<double> l;
  l.heads = h;
  l.head_dim = d;
  l.query_weight = orthonormal(n, s, gen);
  l.key_weight = orthonormal(n, s, gen);
  const std::vector<double> a = {1.0, 3.0, 0.5, 2.0, 0.1, 1.5}, b = {2.0, 1.0, 1.0, 0.2, 3.0, 1.0};
  for (index_t j = 0; j < s; ++j)
    for (index_t i = 0; i < n; ++i) {
      l.query_weight(i, j) *= a[static_cast<std::size_t>(j)];
      l.key_weight(i, j) *= b[static_cast<std::size_t>(j)];
    }
  auto expected = [&](std::vector<double> e) {
    std::sort(e.begin(), e.end(), std::greater<>());
    e.resize(static_cast<std::size_t>(n), 0.0);
    return e;
  };
  std::vector<double> qa, kb, pab;
  for (index_t j = 0; j < s; ++j) {
    const double x = a[static_cast<std::size_t>(j)], y = b[static_cast<std::size_t>(j)];
    qa.push_back(x * x);
    kb.push_back(y * y);
    pab.push_back(x * x * y * y);
  }
  const Redundancy red = redundancy(l);
  const std::pair<const EnergyCurve*, std::vector<double>> cases[] = {
      {&red.queries, expected(qa)}, {&red.keys, expected(kb)}, {&red.products, expected(pab)}};
  for (const auto& [curve, energy] : cases) {
    ASSERT_EQ(curve->energy.size(), energy.size());
    double total = 0.0;
    for (double e : energy) total += e;
    double run = 0.0;
    for (std::size_t k = 0; k < energy.size(); ++k) {
      EXPECT_NEAR(curve->energy[k], energy[k], 1e-12 * total);
      run += energy[k];
      EXPECT_NEAR(curve->cumulative[k], run / total, 1e-12);
    }
  }
  // Products: energies 9, 4, 2.25, 0.25, 0.16, 0.09 (total 15.75), cumulative 0.571,
  // 0.825, 0.968, 0.984, 0.994, 1: 90% and 95% need 3 dimensions, 99% 5.
  EXPECT_EQ(red.products.dim90, 3);
  EXPECT_EQ(red.products.dim95, 3);
  EXPECT_EQ(red.products.dim99, 5);
  EXPECT_EQ(red.products.dimension_for(0.0), 1);
  EXPECT_EQ(red.products.dimension_for(1.0), 6);
  EXPECT_THROW(red.products.dimension_for(1.5), tenfold::InvalidArgument);
}

TEST_P(Attention, RedundancyTotalIsTheDenseEnergyOfP) {
  const auto l = random_layer<double>(3, 2, 7, false, 120);
  const Tensor<double> t = dense_qk(l);
  double p2 = 0.0;  // ||P||^2 = d ||T||^2
  for (index_t i = 0; i < t.numel(); ++i) p2 += t[i] * t[i] * 2.0;
  const Redundancy red = redundancy(l);
  double total = 0.0;
  for (double e : red.products.energy) total += e;
  EXPECT_NEAR(total, p2, 1e-12 * p2);
  EXPECT_TRUE(std::is_sorted(red.products.energy.rbegin(), red.products.energy.rend()));
}

TEST_P(Attention, InvalidArguments) {
  auto l = random_layer<double>(3, 4, 10, true, 130);
  CompressOptions o;
  o.backend = backend();
  o.rank = 0;
  EXPECT_THROW(compress(l, o), tenfold::InvalidArgument);
  o.rank = 13;
  EXPECT_THROW(compress(l, o), tenfold::InvalidArgument);
  o.rank = 4;
  o.max_iters = 0;
  EXPECT_THROW(compress(l, o), tenfold::InvalidArgument);
  o.max_iters = 10;
  if (!tenfold::cuda_compiled()) {
    o.backend = tenfold::Backend::cuda;
    EXPECT_THROW(compress(l, o), tenfold::NotCompiled);
  }
  EXPECT_THROW(parse_init("svd"), tenfold::InvalidArgument);

  auto bad = l;
  bad.query_bias.pop_back();
  EXPECT_THROW(exact(bad), tenfold::DimensionMismatch);
  bad = l;
  bad.heads = 4;
  EXPECT_THROW(bad.validate(), tenfold::DimensionMismatch);
  bad = l;
  bad.key_weight(2, 3) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(redundancy(bad), tenfold::InvalidArgument);
  bad = l;
  std::fill(bad.query_weight.values().begin(), bad.query_weight.values().end(), 0.0);
  o.backend = tenfold::Backend::cpu;
  EXPECT_THROW(compress(bad, o), tenfold::InvalidArgument);

  const Matrix<double> x(9, 2), y(10, 2);
  EXPECT_THROW(scores(l, x, y), tenfold::DimensionMismatch);
  CollaborativeLayer<double> c = exact(l);
  c.key = Matrix<double>(10, 11);
  EXPECT_THROW(scores(c, y, y), tenfold::DimensionMismatch);
  c = exact(l);
  c.mixing = Matrix<double>(2, 12);
  EXPECT_THROW(qk_error(l, c), tenfold::DimensionMismatch);
}

TENFOLD_ON_EACH_BACKEND(Attention);

}  // namespace
