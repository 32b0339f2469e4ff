// Shared rotary keys (rotary_keys), both forms: exact at full size for GQA, MQA and MHA, with
// and without biases, in float and double (logits of rotated queries against rotated
// rebuilt keys, written out by loops); budgets; data-aware errors; refusals. The
// agreement with tenfold.torch's conversion is python/tests/test_cli_rotary.py.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "random_matrix.hpp"
#include "relative_difference.hpp"
#include "tenfold/attention.hpp"
#include "tenfold/error.hpp"

namespace {

using namespace tenfold;
using namespace tenfold::attention;
using namespace tenfold::test;

template <class T>
RotaryLayer<T> random_rotary(index_t heads, index_t key_heads, index_t d, index_t input,
                             bool biases, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  RotaryLayer<T> l;
  l.heads = heads;
  l.key_heads = key_heads;
  l.head_dim = d;
  const double sd = 1.0 / std::sqrt(static_cast<double>(input));
  l.query_weight = gaussian<T>(input, heads * d, sd, gen);
  l.key_weight = gaussian<T>(input, key_heads * d, sd, gen);
  if (biases) {
    l.query_bias = gaussian<T>(heads * d, 1, 1.0, gen).values();
    l.key_bias = gaussian<T>(key_heads * d, 1, 1.0, gen).values();
  }
  return l;
}

std::vector<double> frequencies(index_t d) {
  std::vector<double> f;
  for (index_t j = 0; j < d / 2; ++j) f.push_back(std::pow(100.0, -2.0 * j / d));
  return f;
}

// v rotated by position p: pair j = (j, j + d/2) turned by p theta_j.
std::vector<double> rotate(const std::vector<double>& v, double p, const std::vector<double>& th) {
  const std::size_t half = th.size();
  std::vector<double> out(v.size());
  for (std::size_t j = 0; j < half; ++j) {
    const double c = std::cos(p * th[j]), s = std::sin(p * th[j]);
    out[j] = v[j] * c - v[j + half] * s;
    out[j + half] = v[j] * s + v[j + half] * c;
  }
  return out;
}

// Logits s_h(m, n) of random tokens x (position m) against y (position n), keys from
// `key(g, y)`; all heads, a few position pairs, one vector.
template <class T, class Key>
std::vector<double> logits(const RotaryLayer<T>& l, const std::vector<double>& th, Key key) {
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal;
  const index_t dim = l.input_dim(), d = l.head_dim;
  std::vector<double> out;
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<double> x(dim), y(dim);
    for (auto& v : x) v = normal(gen);
    for (auto& v : y) v = normal(gen);
    const double m = 3.0 + 11 * trial, n = 2.0 * trial;
    for (index_t h = 0; h < l.heads; ++h) {
      std::vector<double> q(d);
      for (index_t k = 0; k < d; ++k) {
        double s = l.query_bias.empty() ? 0.0 : l.query_bias[h * d + k];
        for (index_t i = 0; i < dim; ++i) s += l.query_weight(i, h * d + k) * x[i];
        q[k] = s;
      }
      const std::vector<double> qr = rotate(q, m, th);
      const std::vector<double> kr = rotate(key(h / (l.heads / l.key_heads), y), n, th);
      out.push_back(std::inner_product(qr.begin(), qr.end(), kr.begin(), 0.0));
    }
  }
  return out;
}

template <class T>
std::vector<double> original_key(const RotaryLayer<T>& l, index_t g, const std::vector<double>& y) {
  const index_t d = l.head_dim;
  std::vector<double> k(d);
  for (index_t c = 0; c < d; ++c) {
    double s = l.key_bias.empty() ? 0.0 : l.key_bias[g * d + c];
    for (index_t i = 0; i < l.input_dim(); ++i) s += l.key_weight(i, g * d + c) * y[i];
    k[c] = s;
  }
  return k;
}

// Key of head g rebuilt from the latent: expand * (latent^T [y; 1]).
std::vector<double> rebuilt_key(const RotaryKeys& r, index_t d, index_t g,
                                const std::vector<double>& y) {
  const index_t cv = r.key_values(), dim = static_cast<index_t>(y.size());
  std::vector<double> rho(cv);
  for (index_t c = 0; c < cv; ++c) {
    double s = r.latent.rows() > dim ? r.latent(dim, c) : 0.0;
    for (index_t i = 0; i < dim; ++i) s += r.latent(i, c) * y[i];
    rho[c] = s;
  }
  std::vector<double> k(d, 0.0);
  for (index_t c = 0; c < d; ++c)
    for (index_t v = 0; v < cv; ++v) k[c] += r.expand(g * d + c, v) * rho[v];
  return k;
}

template <class T>
class RotaryExact : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RotaryExact, Precisions);

TYPED_TEST(RotaryExact, FullSizeGivesTheOriginalLogits) {
  using T = TypeParam;
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  struct Case {
    index_t heads, key_heads, d, input, bands;
    bool biases;
  };
  // GQA, MQA, MHA; D wider and narrower than a band's 2 G b keys; biases; both forms
  // (bands = 1: complex keys per pair).
  for (const Case c :
       {Case{4, 2, 8, 20, 2, false}, Case{6, 1, 8, 20, 4, true}, Case{3, 3, 8, 20, 2, true},
        Case{4, 2, 16, 12, 4, false}, Case{4, 2, 16, 12, 8, true}, Case{4, 2, 8, 20, 1, false},
        Case{6, 1, 8, 20, 1, true}, Case{3, 3, 8, 2, 1, true}}) {
    const RotaryLayer<T> l = random_rotary<T>(c.heads, c.key_heads, c.d, c.input, c.biases, 11);
    RotaryOptions o;
    o.bands = c.bands;
    o.inv_freq = frequencies(c.d);
    const RotaryKeys r = rotary_keys(l, o);
    const std::vector<double> want =
        logits(l, o.inv_freq, [&](index_t g, const auto& y) { return original_key(l, g, y); });
    const std::vector<double> got =
        logits(l, o.inv_freq, [&](index_t g, const auto& y) { return rebuilt_key(r, c.d, g, y); });
    EXPECT_LT(relative_norm_difference(got, want), tol)
        << c.heads << " heads, " << c.key_heads << " key heads";
    EXPECT_LT(r.relative_error, tol);
    // Random keys have full rank per band: min(D', 2 G b) values each, or two per
    // complex key, min(D', G) of them, for bands = 1.
    const index_t dim = c.input + (c.biases ? 1 : 0);
    const index_t per_band =
        c.bands == 1 ? 2 * std::min(dim, c.key_heads) : std::min(dim, 2 * c.key_heads * c.bands);
    EXPECT_EQ(r.key_values(), per_band * (c.d / 2 / c.bands));
    EXPECT_EQ(r.decode_flops,
              rotary_decode_flops(c.heads, c.key_heads, c.d, r.key_values(), c.bands));
  }
}

TEST(Rotary, BudgetIsSpreadOverBandsAndErrorFallsWithIt) {
  const RotaryLayer<double> l = random_rotary<double>(4, 2, 16, 40, true, 3);
  RotaryOptions o;
  o.bands = 2;
  o.inv_freq = frequencies(16);
  double last = 2.0;
  for (index_t budget : {1, 4, 9, 16, 25, 32}) {
    o.key_values = budget;
    const RotaryKeys r = rotary_keys(l, o);
    EXPECT_EQ(r.key_values(), budget);
    EXPECT_EQ(std::accumulate(r.ranks.begin(), r.ranks.end(), index_t{0}), budget);
    // Each band's ranks are the count of its singular values among the largest.
    EXPECT_LT(r.relative_error, last);
    last = r.relative_error;
  }
  EXPECT_LT(last, 1e-10);  // G d = 32: everything kept
}

TEST(Rotary, ComplexKeysSpendTheBudgetOnTheLargestSingularValues) {
  // bands = 1: two values per complex key; a budget keeps the largest sigma over all
  // pairs, so any other split of the same count (given as ranks) drops at least as much.
  const RotaryLayer<double> l = random_rotary<double>(4, 2, 8, 20, true, 3);
  RotaryOptions o;
  o.bands = 1;
  o.key_values = 8;
  const RotaryKeys best = rotary_keys(l, o);
  EXPECT_EQ(best.key_values(), 8);
  EXPECT_EQ(best.frequency.size(), 4u);
  EXPECT_EQ(best.mixing.cols(), 8);
  EXPECT_EQ(best.decode_flops, 2 * 4 * 8);
  for (const std::vector<index_t>& ranks :
       {std::vector<index_t>{1, 1, 1, 1}, {2, 2, 0, 0}, {0, 2, 0, 2}, {2, 0, 1, 1}}) {
    o.ranks = ranks;
    const RotaryKeys other = rotary_keys(l, o);
    EXPECT_EQ(other.ranks, ranks);
    EXPECT_LE(best.relative_error, other.relative_error + 1e-12);
  }
  o.ranks = {3, 0, 0, 0};  // at most min(D', G) = 2 keys per pair
  EXPECT_THROW(rotary_keys(l, o), InvalidArgument);
  o.ranks = {};
  o.key_values = 7;  // two values per complex key
  EXPECT_THROW(rotary_keys(l, o), InvalidArgument);
}

TEST(Rotary, DataAwareReportsTheDataErrorAndIsExactAtFullSize) {
  const RotaryLayer<double> l = random_rotary<double>(4, 2, 8, 10, false, 5);
  std::mt19937_64 gen(9);
  const Matrix<double> x = gaussian<double>(10, 50, 1.0, gen);
  InputMoments m;
  m.query = Matrix<double>(10, 10);
  for (index_t j = 0; j < 10; ++j)
    for (index_t i = 0; i < 10; ++i)
      for (index_t t = 0; t < 50; ++t) m.query(i, j) += x(i, t) * x(j, t) / 50.0;
  RotaryOptions o;
  o.bands = 2;
  o.inv_freq = frequencies(8);
  const RotaryKeys full = rotary_keys(l, o, &m);
  ASSERT_TRUE(full.data_error.has_value());
  EXPECT_LT(*full.data_error, 1e-10);
  o.key_values = 6;
  o.damping = 0.0;
  const RotaryKeys data = rotary_keys(l, o, &m);
  const RotaryKeys weight = rotary_keys(l, o);
  ASSERT_TRUE(data.data_error.has_value());
  EXPECT_FALSE(weight.data_error.has_value());
  EXPECT_GT(*data.data_error, 0.0);
  EXPECT_LT(*data.data_error, 1.0);
  // The objectives differ, so do the rebuilt keys (their agreement with tenfold.torch:
  // python/tests/test_cli_rotary.py).
  std::mt19937_64 probe(1);
  const Matrix<double> y = gaussian<double>(10, 1, 1.0, probe);
  const std::vector<double> yv = y.values();
  EXPECT_GT(relative_norm_difference(rebuilt_key(data, 8, 0, yv), rebuilt_key(weight, 8, 0, yv)),
            1e-3);
}

TEST(Rotary, RefusesBadOptions) {
  const RotaryLayer<double> l = random_rotary<double>(4, 2, 8, 10, false, 5);
  RotaryOptions o;
  o.inv_freq = frequencies(8);
  o.bands = 3;
  EXPECT_THROW(rotary_keys(l, o), InvalidArgument);
  o.bands = 2;
  o.key_values = 17;
  EXPECT_THROW(rotary_keys(l, o), InvalidArgument);
  o.key_values = 0;
  o.inv_freq.pop_back();
  EXPECT_THROW(rotary_keys(l, o), DimensionMismatch);
  RotaryLayer<double> bad = l;
  bad.key_heads = 3;
  o.inv_freq = frequencies(8);
  EXPECT_THROW(rotary_keys(bad, o), InvalidArgument);
}

}  // namespace
