// The latent value cache (value_latent, include/tenfold/kv_cache.hpp): the layer's output
// through the latent and the folded o_proj, written out by loops, equals the original's
// at full size for GQA, MQA and MHA, with and without a value bias, in float and double;
// budgets; the data-aware error; the joint latent of keys and values; refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <vector>

#include "attention/rotary_solver.hpp"
#include "expect_throw.hpp"
#include "random_matrix.hpp"
#include "relative_difference.hpp"
#include "tenfold/error.hpp"
#include "tenfold/kv_cache.hpp"

namespace {

using namespace tenfold;
using namespace tenfold::attention;
using namespace tenfold::test;

template <class T>
ValueLayer<T> random_values(index_t heads, index_t groups, index_t d, index_t input, index_t out,
                            bool bias, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  ValueLayer<T> l;
  l.heads = heads;
  l.key_heads = groups;
  l.head_dim = d;
  l.value_weight = gaussian<T>(input, groups * d, 1.0 / std::sqrt(double(input)), gen);
  l.output_weight = gaussian<T>(heads * d, out, 1.0 / std::sqrt(double(heads * d)), gen);
  if (bias) l.value_bias = gaussian<T>(groups * d, 1, 1.0, gen).values();
  return l;
}

// The joint latent's layer: random_values (4 heads, 2 key heads, d = 8, no bias) with a random
// key weight (from seed + 1).
ValueLayer<double> keyed_values(index_t input, index_t out, std::uint64_t seed) {
  ValueLayer<double> l = random_values<double>(4, 2, 8, input, out, false, seed);
  std::mt19937_64 gen(seed + 1);
  l.key_weight = gaussian<double>(input, 16, 1.0, gen);
  return l;
}

// y = sum_h W_O^h (sum_n a_{h,n} v_g(h)(x_n)) for tokens xs with attention weights a
// (heads x tokens), the original layer.
template <class T>
std::vector<double> original_output(const ValueLayer<T>& l, const std::vector<Matrix<double>>& xs,
                                    const Matrix<double>& a) {
  const index_t d = l.head_dim, per = l.heads / l.key_heads, e = l.output_weight.cols();
  std::vector<double> y(e, 0.0);
  for (index_t h = 0; h < l.heads; ++h) {
    std::vector<double> o(d, 0.0);
    for (std::size_t n = 0; n < xs.size(); ++n) {
      for (index_t c = 0; c < d; ++c) {
        const index_t col = (h / per) * d + c;
        double v = l.value_bias.empty() ? 0.0 : l.value_bias[col];
        for (index_t i = 0; i < l.input_dim(); ++i) v += l.value_weight(i, col) * xs[n](i, 0);
        o[c] += a(h, static_cast<index_t>(n)) * v;
      }
    }
    for (index_t j = 0; j < e; ++j)
      for (index_t c = 0; c < d; ++c) y[j] += l.output_weight(h * d + c, j) * o[c];
  }
  return y;
}

// The same through the cached latent c_n = latent^T [x_n; 1] and the folded o_proj.
std::vector<double> latent_output(const ValueLatent& r, index_t heads,
                                  const std::vector<Matrix<double>>& xs, const Matrix<double>& a) {
  const index_t k = r.values(), e = r.output.cols(), dim = xs.front().rows();
  std::vector<double> y(e, 0.0);
  for (index_t h = 0; h < heads; ++h) {
    std::vector<double> mixed(k, 0.0);
    for (std::size_t n = 0; n < xs.size(); ++n) {
      for (index_t c = 0; c < k; ++c) {
        double v = r.latent.rows() > dim ? r.latent(dim, c) : 0.0;
        for (index_t i = 0; i < dim; ++i) v += r.latent(i, c) * xs[n](i, 0);
        mixed[c] += a(h, static_cast<index_t>(n)) * v;
      }
    }
    for (index_t j = 0; j < e; ++j)
      for (index_t c = 0; c < k; ++c) y[j] += r.output(h * k + c, j) * mixed[c];
  }
  return y;
}

template <class T>
class ValueExact : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ValueExact, Precisions);

TYPED_TEST(ValueExact, FullSizeGivesTheOriginalOutput) {
  using T = TypeParam;
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  struct Case {
    index_t heads, groups, d, input, out;
    bool bias;
  };
  // GQA, MQA, MHA; D wider and narrower than G d; a value bias.
  for (const Case c : {Case{4, 2, 8, 40, 24, false}, Case{6, 1, 8, 20, 16, true},
                       Case{3, 3, 8, 40, 24, true}, Case{4, 2, 16, 12, 20, false}}) {
    const ValueLayer<T> l = random_values<T>(c.heads, c.groups, c.d, c.input, c.out, c.bias, 7);
    const ValueLatent r = value_latent(l, ValueOptions{});
    std::mt19937_64 gen(3);
    std::vector<Matrix<double>> xs;
    for (int n = 0; n < 5; ++n) xs.push_back(gaussian<double>(c.input, 1, 1.0, gen));
    const Matrix<double> a = gaussian<double>(c.heads, 5, 1.0, gen);
    EXPECT_LT(relative_norm_difference(latent_output(r, c.heads, xs, a), original_output(l, xs, a)),
              tol)
        << c.heads << " heads, " << c.groups << " groups";
    EXPECT_LT(r.relative_error, tol);
    // Random weights have full rank: min(D', G d) latent values.
    EXPECT_EQ(r.values(), std::min(c.input + (c.bias ? 1 : 0), c.groups * c.d));
  }
}

TEST(Values, BudgetKeepsTheLargestSingularValuesAndErrorFallsWithIt) {
  const ValueLayer<double> l = random_values<double>(4, 2, 8, 40, 24, true, 5);
  double last = 2.0;
  for (index_t budget : {1, 4, 8, 12, 16}) {
    ValueOptions o;
    o.values = budget;
    const ValueLatent r = value_latent(l, o);
    EXPECT_EQ(r.values(), budget);
    EXPECT_EQ(r.output.rows(), 4 * budget);
    EXPECT_LT(r.relative_error, last);
    // The error is the dropped singular values' share of the objective.
    double kept = 0.0, all = 0.0;
    for (std::size_t i = 0; i < r.singular_values.size(); ++i) {
      all += r.singular_values[i] * r.singular_values[i];
      if (static_cast<index_t>(i) < budget) kept += r.singular_values[i] * r.singular_values[i];
    }
    EXPECT_NEAR(r.relative_error, std::sqrt((all - kept) / all), 1e-10);
    last = r.relative_error;
  }
  EXPECT_LT(last, 1e-10);  // G d = 16 values: everything kept
}

TEST(Values, DataAwareMinimisesTheDataError) {
  const ValueLayer<double> l = random_values<double>(4, 2, 8, 12, 24, false, 9);
  std::mt19937_64 gen(4);
  // Inputs with very unequal scales per coordinate: the moment matters.
  Matrix<double> x = gaussian<double>(12, 200, 1.0, gen);
  for (index_t t = 0; t < 200; ++t)
    for (index_t i = 0; i < 12; ++i) x(i, t) *= std::pow(3.0, -double(i) / 2.0);
  Matrix<double> s(12, 12);
  for (index_t t = 0; t < 200; ++t)
    for (index_t j = 0; j < 12; ++j)
      for (index_t i = 0; i < 12; ++i) s(i, j) += x(i, t) * x(j, t) / 200.0;
  ValueOptions o;
  o.values = 5;
  o.damping = 0.0;
  const ValueLatent data = value_latent(l, o, &s);
  const ValueLatent weight = value_latent(l, o);
  ASSERT_TRUE(data.data_error.has_value());
  EXPECT_FALSE(weight.data_error.has_value());
  // The weight-only latent measured on the data: no better than the data-aware one.
  const ValueLatent weight_on_data = [&] {
    ValueOptions full;
    full.values = 5;
    full.damping = 1e12;  // whitening by a multiple of I: the weight-only latent
    return value_latent(l, full, &s);
  }();
  EXPECT_LE(*data.data_error, *weight_on_data.data_error + 1e-12);
  EXPECT_GT(*data.data_error, 0.0);
}

TEST(Values, RefusesBadSizesAndOptions) {
  const ValueLayer<double> l = random_values<double>(4, 2, 8, 10, 12, false, 1);
  ValueOptions o;
  o.values = 17;
  EXPECT_THROW(value_latent(l, o), InvalidArgument);
  o.values = 4;
  o.damping = -1.0;
  EXPECT_THROW(value_latent(l, o), InvalidArgument);
  ValueLayer<double> bad = l;
  bad.key_heads = 3;
  EXPECT_THROW(value_latent(bad, ValueOptions{}), InvalidArgument);
  bad = l;
  bad.output_weight = Matrix<double>(31, 12);
  EXPECT_THROW(value_latent(bad, ValueOptions{}), DimensionMismatch);
  bad = l;
  bad.value_weight(0, 0) = std::nan("");
  EXPECT_THROW(value_latent(bad, ValueOptions{}), InvalidArgument);
  const Matrix<double> wrong(9, 9);
  EXPECT_THROW(value_latent(l, o, &wrong), InvalidArgument);
  // More latent values than the layer's X has singular values (D = 10 < G d = 16).
  o = ValueOptions{};
  o.values = 12;
  test::expect_throw_with<InvalidArgument>(
      [&] { value_latent(l, o); },
      "the budget of 12 latent values exceeds the 10 singular values of the layer");
}

// Joint: keys and values from one latent. At full size (the rank of [W_K, W_V F]: 2 G d, or
// D' when narrower) the keys rebuilt from c_n = latent^T [x_n; 1] are W_K^T x_n + b_K and the
// output through the latent is the original's, with key and value biases.
TYPED_TEST(ValueExact, JointFullSizeRebuildsKeysAndValues) {
  using T = TypeParam;
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  for (const index_t input : {40, 20}) {
    ValueLayer<T> l = random_values<T>(4, 2, 8, input, 24, true, 11);
    std::mt19937_64 gen(12);
    l.key_weight = gaussian<T>(input, 16, 1.0 / std::sqrt(double(input)), gen);
    l.key_bias = gaussian<T>(16, 1, 1.0, gen).values();
    ValueOptions o;
    o.joint = true;
    const ValueLatent r = value_latent(l, o);
    EXPECT_EQ(r.values(), std::min<index_t>(input + 1, 32));
    ASSERT_EQ(r.key_expand.rows(), 16);
    std::vector<Matrix<double>> xs;
    for (int n = 0; n < 5; ++n) xs.push_back(gaussian<double>(input, 1, 1.0, gen));
    const Matrix<double> a = gaussian<double>(4, 5, 1.0, gen);
    EXPECT_LT(relative_norm_difference(latent_output(r, 4, xs, a), original_output(l, xs, a)), tol);
    std::vector<double> keys, rebuilt;
    for (const Matrix<double>& x : xs) {
      for (index_t col = 0; col < 16; ++col) {
        double k = l.key_bias[col], b = 0.0;
        for (index_t i = 0; i < input; ++i) k += l.key_weight(i, col) * x(i, 0);
        for (index_t c = 0; c < r.values(); ++c) {
          double v = r.latent(input, c);
          for (index_t i = 0; i < input; ++i) v += r.latent(i, c) * x(i, 0);
          b += r.key_expand(col, c) * v;
        }
        keys.push_back(k);
        rebuilt.push_back(b);
      }
    }
    EXPECT_LT(relative_norm_difference(rebuilt, keys), tol) << "D = " << input;
    EXPECT_LT(*r.key_error, tol);
  }
}

// Each side scaled to unit energy: the keys' and the values' squared relative errors add up
// to the dropped sigma^2 of X = [W_K / n_K, W_V F / n_V].
TEST(Values, JointErrorsAddUpToTheDroppedSingularValues) {
  const ValueLayer<double> l = keyed_values(40, 24, 13);
  for (index_t budget : {3, 10, 20}) {
    ValueOptions o;
    o.joint = true;
    o.values = budget;
    const ValueLatent r = value_latent(l, o);
    double dropped = 0.0;
    for (std::size_t i = static_cast<std::size_t>(budget); i < r.singular_values.size(); ++i)
      dropped += r.singular_values[i] * r.singular_values[i];
    EXPECT_NEAR(*r.key_error * *r.key_error + r.relative_error * r.relative_error, dropped, 1e-10);
    EXPECT_GT(*r.key_error, 0.0);
  }
}

// The keys' emphasis a trades the two sides: as a grows the keys' error of the optimum
// cannot rise and the values' cannot fall; with query weights the latent changes, and the
// full size stays exact (no weighting there).
TEST(Values, JointKeyEmphasisTradesKeysForValues) {
  ValueLayer<double> l = keyed_values(40, 24, 21);
  ValueOptions o;
  o.joint = true;
  o.values = 12;
  double keys = 2.0, values = -1.0;
  for (double a : {0.25, 1.0, 2.5, 8.0}) {
    o.key_emphasis = a;
    const ValueLatent r = value_latent(l, o);
    EXPECT_LE(*r.key_error, keys + 1e-12) << a;
    EXPECT_GE(r.relative_error, values - 1e-12) << a;
    keys = *r.key_error;
    values = r.relative_error;
  }
  o.key_emphasis = 2.5;
  const ValueLatent plain = value_latent(l, o);
  std::mt19937_64 gen(23);
  l.query_weight = gaussian<double>(40, 32, 1.0, gen);
  o.inv_freq = {1.0, 0.3, 0.05, 0.01};
  o.context = 64;
  const ValueLatent weighted = value_latent(l, o);
  EXPECT_GT(std::abs(*weighted.key_error - *plain.key_error), 1e-6);
  o.values = 0;
  const ValueLatent full = value_latent(l, o);
  EXPECT_LT(*full.key_error, 1e-10);
  EXPECT_LT(full.relative_error, 1e-10);
}

// The phase averages A(theta_j -/+ theta_k) the keys' weighting reads, in O(1), against the
// direct sum over the offsets: frequencies far apart, equal, a hair apart (the series side
// of the switch), beyond 2 pi, and contexts from 1 to 5,000; |A| <= 1 at a billion tokens.
TEST(Values, OffsetPhasesEqualTheSumOverEveryOffset) {
  const std::vector<double> freq = {1.0, 0.3, 0.3 + 1e-9, 2e-7, 7.5, 1e-4};
  const index_t half = static_cast<index_t>(freq.size());
  for (index_t n : {1, 2, 9, 2048, 5000}) {
    const attention::detail::OffsetPhases p = attention::detail::offset_phases(freq, n);
    const double total = static_cast<double>(n) * static_cast<double>(n + 1) / 2.0;
    for (index_t k = 0; k < half; ++k)
      for (index_t j = 0; j < half; ++j) {
        std::complex<double> minus = 0.0, plus = 0.0;
        for (index_t delta = 0; delta < n; ++delta) {
          const double w = static_cast<double>(n - delta) / total, t = static_cast<double>(delta);
          minus += w * std::polar(1.0, (freq[j] - freq[k]) * t);
          plus += w * std::polar(1.0, (freq[j] + freq[k]) * t);
        }
        EXPECT_LT(std::abs(p.minus[j + k * half] - minus), 1e-12) << n << " " << j << " " << k;
        EXPECT_LT(std::abs(p.plus[j + k * half] - plus), 1e-12) << n << " " << j << " " << k;
      }
  }
  const attention::detail::OffsetPhases big = attention::detail::offset_phases(freq, 1000000000);
  for (const std::complex<double>& a : big.minus) EXPECT_LE(std::abs(a), 1.0 + 1e-12);
  EXPECT_NEAR(big.minus[0].real(), 1.0, 1e-15);
}

TEST(Values, JointRefusesBadKeyWeighting) {
  ValueLayer<double> l = keyed_values(10, 12, 3);
  std::mt19937_64 gen(5);
  ValueOptions o;
  o.joint = true;
  o.values = 4;
  for (double a : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    o.key_emphasis = a;
    EXPECT_THROW(value_latent(l, o), InvalidOption) << a;
  }
  o.key_emphasis = 1.0;
  l.query_weight = gaussian<double>(10, 32, 1.0, gen);
  EXPECT_THROW(value_latent(l, o), DimensionMismatch);  // no frequencies
  o.inv_freq = {1.0, 0.1, 0.01};
  EXPECT_THROW(value_latent(l, o), DimensionMismatch);  // d/2 = 4 expected
  o.inv_freq = {1.0, 0.1, 0.01, std::nan("")};
  EXPECT_THROW(value_latent(l, o), InvalidArgument);
  o.inv_freq = {1.0, 0.1, 0.01, 0.001};
  o.context = 0;
  EXPECT_THROW(value_latent(l, o), InvalidOption);
  o.context = 16;
  EXPECT_NO_THROW(value_latent(l, o));
  l.query_bias = std::vector<double>(31, 0.0);
  EXPECT_THROW(value_latent(l, o), DimensionMismatch);
  l.query_bias.clear();
  l.query_weight = gaussian<double>(10, 31, 1.0, gen);
  EXPECT_THROW(value_latent(l, o), DimensionMismatch);
}

TEST(Values, JointRefusesMissingKeysAndBadSizes) {
  ValueLayer<double> l = random_values<double>(4, 2, 8, 10, 12, false, 1);
  ValueOptions o;
  o.joint = true;
  EXPECT_THROW(value_latent(l, o), DimensionMismatch);  // no key weight
  std::mt19937_64 gen(2);
  l.key_weight = gaussian<double>(10, 16, 1.0, gen);
  o.values = 33;
  EXPECT_THROW(value_latent(l, o), InvalidArgument);
  o.values = 11;  // at most min(D', 2 G d) = 10 singular values
  EXPECT_THROW(value_latent(l, o), InvalidArgument);
  o.values = 10;
  EXPECT_NO_THROW(value_latent(l, o));
  l.key_bias = std::vector<double>(15, 0.0);
  EXPECT_THROW(value_latent(l, o), DimensionMismatch);
  l.key_bias.clear();
  l.key_weight(3, 3) = std::nan("");
  EXPECT_THROW(value_latent(l, o), InvalidArgument);
}

}  // namespace
