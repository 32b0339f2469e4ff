// Tensors and CP models: sizes and validation, KTensor full/norm/inner against
// naive definitions, the factor match score and the planted-problem generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "cp_test_util.hpp"
#include "tenfold/error.hpp"

namespace tenfold::test {
namespace {

constexpr index_t kHuge = index_t{1} << 32;

TEST(TensorSizes, CheckedNumel) {
  const std::vector<index_t> ok = {3, 0, 5};
  EXPECT_EQ(checked_numel(ok), 0);
  const std::vector<index_t> big = {index_t{1} << 31, index_t{1} << 31};
  EXPECT_EQ(checked_numel(big), index_t{1} << 62);
  const std::vector<index_t> negative = {3, -2};
  expect_throw_with<InvalidArgument>([&] { checked_numel(negative); }, "size -2 of mode 1");
  const std::vector<index_t> overflow = {kHuge, kHuge};
  expect_throw_with<InvalidArgument>([&] { checked_numel(overflow); }, "(4294967296, 4294967296)");
  // Zero anywhere makes the product zero, but overflowing nonzero sizes are rejected
  // wherever the zero stands (a shape and its reverse alike).
  const std::vector<index_t> overflow_then_zero = {kHuge, kHuge, 0};
  EXPECT_THROW(checked_numel(overflow_then_zero), InvalidArgument);
  const std::vector<index_t> zero_then_overflow = {0, kHuge, kHuge};
  EXPECT_THROW(checked_numel(zero_then_overflow), InvalidArgument);
  const std::vector<index_t> zero_between = {kHuge, 0, kHuge};
  EXPECT_THROW(checked_numel(zero_between), InvalidArgument);
}

TEST(TensorSizes, ConstructionRejectsOverflowBeforeAllocating) {
  EXPECT_THROW(Tensor<double>({kHuge, kHuge, 2}), InvalidArgument);
  EXPECT_THROW(Tensor<float>({-1, 3}), InvalidArgument);
  EXPECT_THROW(Matrix<double>(kHuge, kHuge), InvalidArgument);
  EXPECT_THROW(Matrix<double>(-3, 2), InvalidArgument);
  // 2^62 elements fit a 64-bit count, but not 8-byte elements in memory.
  expect_throw_with<InvalidArgument>(
      [] {
        Tensor<double>({index_t{1} << 31, index_t{1} << 31});
      },
      "(2147483648, 2147483648) needs 4611686018427387904 elements of 8 bytes");
  EXPECT_THROW(Matrix<float>(index_t{1} << 31, index_t{1} << 31), InvalidArgument);
  EXPECT_THROW(Tensor<double>({2, 3}, std::vector<double>(5)), DimensionMismatch);
  EXPECT_THROW(Matrix<double>(2, 3, std::vector<double>(7)), DimensionMismatch);
}

TEST(TensorSizes, CheckFiniteNamesTheFirstBadIndex) {
  Tensor<double> x({2, 3, 4});
  x(1, 0, 2) = std::numeric_limits<double>::quiet_NaN();
  x(0, 2, 3) = std::numeric_limits<double>::infinity();
  expect_throw_with<InvalidArgument>([&] { check_finite<double>(x, "tensor"); },
                                     "tensor has a non-finite entry (NaN) at index (1, 0, 2)");
  x(1, 0, 2) = 0.0;
  expect_throw_with<InvalidArgument>([&] { check_finite<double>(x, "tensor"); },
                                     "(Inf) at index (0, 2, 3)");
}

TEST(TensorSizes, NormAndConvert) {
  const Tensor<float> x = random_tensor<float>({3, 4, 5}, 1);
  double ss = 0.0;
  for (float v : x.values()) ss += static_cast<double>(v) * v;
  EXPECT_NEAR(norm<float>(x), std::sqrt(ss), 1e-14 * std::sqrt(ss));
  const Tensor<double> y = convert<double>(x.view());
  EXPECT_EQ(y.dims(), x.dims());
  for (index_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y[i], static_cast<double>(x[i]));
}

TEST(TensorSizes, TransposeReversesTheModes) {
  const Tensor<float> x = random_tensor<float>({3, 4, 2, 5}, 2);
  const Tensor<float> y = transpose(x.view());
  EXPECT_EQ(y.dims(), (std::vector<index_t>{5, 2, 4, 3}));
  for (index_t l = 0; l < 5; ++l)
    for (index_t k = 0; k < 2; ++k)
      for (index_t j = 0; j < 4; ++j)
        for (index_t i = 0; i < 3; ++i) EXPECT_EQ(y(l, k, j, i), x(i, j, k, l));
  EXPECT_EQ(transpose(y.view()).values(), x.values());
}

template <class T>
class Models : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Models, Types);

TYPED_TEST(Models, FullNormInnerAgainstNaive) {
  using T = TypeParam;
  for (const auto& dims :
       std::vector<std::vector<index_t>>{{5}, {4, 3}, {3, 1, 4}, {2, 3, 4, 2}, {3, 1, 4, 2, 5}}) {
    const KTensor<T> k = random_ktensor<T>(dims, 3, 2);
    const Tensor<T> x = k.full();
    ASSERT_EQ(x.dims(), dims);
    const std::vector<double> expect = naive_full(k);
    EXPECT_LT(rel_diff(x.values(), expect), kernel_tol<T>());
    double ss = 0.0;
    for (double v : expect) ss += v * v;
    EXPECT_NEAR(k.norm(), std::sqrt(ss), kernel_tol<T>() * std::sqrt(ss));
    const Tensor<T> y = random_tensor<T>(dims, 3);
    double dot = 0.0, scale = 0.0;
    for (index_t i = 0; i < y.numel(); ++i) {
      dot += expect[static_cast<std::size_t>(i)] * y[i];
      scale += std::abs(expect[static_cast<std::size_t>(i)] * y[i]);
    }
    EXPECT_NEAR(k.inner(y.view()), dot, kernel_tol<T>() * scale) << "order " << dims.size();
  }
}

TYPED_TEST(Models, InnerRejectsOtherShapes) {
  using T = TypeParam;
  const KTensor<T> k = random_ktensor<T>({3, 4}, 2, 1);
  const Tensor<T> y({4, 3});
  EXPECT_THROW(k.inner(y.view()), DimensionMismatch);
}

TYPED_TEST(Models, Validate) {
  using T = TypeParam;
  const KTensor<T> good = random_ktensor<T>({3, 4}, 2, 1);
  EXPECT_NO_THROW(good.validate());
  KTensor<T> k;
  expect_throw_with<InvalidArgument>([&] { k.validate(); }, "no factor matrices");
  k = good;
  k.weights.clear();
  expect_throw_with<InvalidArgument>([&] { k.validate(); }, "rank 0");
  k = good;
  k.factors[1] = Matrix<T>(4, 3);
  expect_throw_with<DimensionMismatch>([&] { k.validate(); }, "factor 1 has 3 columns");
  k = good;
  k.factors[0] = Matrix<T>(0, 2);
  expect_throw_with<InvalidArgument>([&] { k.validate(); }, "factor 0 has no rows");
  k = good;
  k.factors[1](2, 1) = std::numeric_limits<T>::quiet_NaN();
  expect_throw_with<InvalidArgument>([&] { k.validate(); },
                                     "factor 1 has a non-finite entry (NaN) at index (2, 1)");
  k = good;
  k.weights[1] = std::numeric_limits<T>::infinity();
  expect_throw_with<InvalidArgument>([&] { k.validate(); },
                                     "weights has a non-finite entry (Inf) at index (1)");
  EXPECT_THROW(k.full(), InvalidArgument);
  EXPECT_THROW(k.norm(), InvalidArgument);
}

// --- factor match score ---------------------------------------------------------

// The same model with components permuted, and each column rescaled by a signed
// factor that the weight (or another mode) compensates.
template <class T>
KTensor<T> permuted_rescaled(const KTensor<T>& k, const std::vector<index_t>& perm) {
  KTensor<T> p = k;
  for (std::size_t j = 0; j < perm.size(); ++j) {
    const auto src = static_cast<std::size_t>(perm[j]);
    p.weights[j] = k.weights[src] / T(2);
    for (std::size_t n = 0; n < k.factors.size(); ++n) {
      const T s = n == 0 ? T(-4) : (n == 1 ? T(-0.25) : T(2));
      for (index_t i = 0; i < k.factors[n].rows(); ++i)
        p.factors[n](i, static_cast<index_t>(j)) = s * k.factors[n](i, perm[j]);
    }
  }
  return p;
}

TYPED_TEST(Models, FmsOfTheSameModelIsOne) {
  using T = TypeParam;
  const KTensor<T> k = random_ktensor<T>({5, 4, 3}, 4, 1);
  const KTensor<T> p = permuted_rescaled(k, {2, 0, 3, 1});
  const double tol = std::is_same_v<T, double> ? 1e-14 : 1e-6;
  EXPECT_NEAR(factor_match_score(k, k), 1.0, tol);
  EXPECT_NEAR(factor_match_score(k, p), 1.0, tol);
  EXPECT_NEAR(factor_match_score(p, k), 1.0, tol);
  EXPECT_NEAR(factor_match_score(k, p, FmsOptions{true}), 1.0, tol);
}

TEST(FactorMatch, HandCheckedValues) {
  // Rank one, 2 x 2: mode-0 columns (1, 0) and (1, 1), the same mode-1 column:
  // congruence = cos 45 degrees = 1/sqrt(2).
  const KTensor<double> a({1.0}, {Matrix<double>(2, 1, {1, 0}), Matrix<double>(2, 1, {0, 3})});
  const KTensor<double> b({1.0}, {Matrix<double>(2, 1, {1, 1}), Matrix<double>(2, 1, {0, 1})});
  EXPECT_NEAR(factor_match_score(a, b), 1.0 / std::sqrt(2.0), 1e-15);
  // Weights after normalisation: a has 3, b has sqrt(2); penalty 1 - (3 - sqrt 2) / 3.
  EXPECT_NEAR(factor_match_score(a, b, FmsOptions{true}),
              1.0 / std::sqrt(2.0) * (1.0 - (3.0 - std::sqrt(2.0)) / 3.0), 1e-15);
  // Same factors, weights 2 and -1: penalty 1 - 1/2 (signs are not weights).
  const KTensor<double> c({-1.0}, a.factors);
  KTensor<double> d = a;
  d.weights[0] = 2.0;
  EXPECT_NEAR(factor_match_score(c, d), 1.0, 1e-15);
  EXPECT_NEAR(factor_match_score(c, d, FmsOptions{true}), 0.5, 1e-15);
}

TEST(Degeneracy, MostNegativeCongruenceHandChecked) {
  // Three components of a 2 x 2 x 2 model. Components 0 and 2 share modes 1 and 2, and
  // their mode-0 columns (1, 0) and (-1, 1) have cosine -1/sqrt(2): congruence -1/sqrt(2).
  // Components 0 and 1 are orthogonal in mode 0 (congruence 0); 1 and 2 have cosines
  // 1/sqrt(2), 1 and -1 in modes 0, 1, 2 and weights of opposite sign: +1/sqrt(2).
  const KTensor<double> k({2.0, -1.0, 5.0}, {Matrix<double>(2, 3, {1, 0, 0, 3, -1, 1}),
                                             Matrix<double>(2, 3, {1, 1, 1, 1, 1, 1}),
                                             Matrix<double>(2, 3, {0, 2, 0, -1, 0, 1})});
  const ComponentPair p = most_negative_congruence(k);
  EXPECT_EQ(p.first, 0);
  EXPECT_EQ(p.second, 2);
  EXPECT_NEAR(p.congruence, -1.0 / std::sqrt(2.0), 1e-15);
  // A rank-one model has no pair.
  const KTensor<double> one({1.0}, {Matrix<double>(2, 1, {1, 0}), Matrix<double>(2, 1, {0, 3})});
  const ComponentPair none = most_negative_congruence(one);
  EXPECT_EQ(none.first, none.second);
  EXPECT_EQ(none.congruence, 1.0);
}

TEST(Degeneracy, CancellingPairIsFoundInFloatToo) {
  // Component 1 is component 0 with mode 2 negated and a slight tilt: congruence near -1.
  KTensor<float> k = random_ktensor<float>({6, 5, 4}, 3, 7);
  for (index_t i = 0; i < 6; ++i) k.factors[0](i, 1) = k.factors[0](i, 0);
  for (index_t i = 0; i < 5; ++i) k.factors[1](i, 1) = k.factors[1](i, 0) + 1e-3f;
  for (index_t i = 0; i < 4; ++i) k.factors[2](i, 1) = -k.factors[2](i, 0);
  k.weights[0] = k.weights[1] = 100.0f;
  const ComponentPair p = most_negative_congruence(k);
  EXPECT_EQ(p.first, 0);
  EXPECT_EQ(p.second, 1);
  EXPECT_LT(p.congruence, -0.999);
  KTensor<float> bad = k;
  bad.factors[0](2, 2) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(most_negative_congruence(bad), InvalidArgument);
}

TEST(FactorMatch, ZeroComponentHasCongruenceZero) {
  KTensor<double> a = random_ktensor<double>({3, 4}, 2, 1);
  KTensor<double> b = a;
  for (index_t i = 0; i < 4; ++i) b.factors[1](i, 1) = 0.0;
  // Component 0 matches exactly, component 1 not at all.
  EXPECT_NEAR(factor_match_score(a, b), 0.5, 1e-14);
  EXPECT_NEAR(factor_match_score(b, b), 0.5, 1e-14);
}

TEST(FactorMatch, DifferentRanksMatchTheSmallerIntoTheLarger) {
  const KTensor<double> big = random_ktensor<double>({4, 5, 3}, 3, 1);
  KTensor<double> small;
  small.weights = {big.weights[2], big.weights[0]};
  for (const Matrix<double>& f : big.factors) {
    Matrix<double> g(f.rows(), 2);
    std::copy_n(f.col(2), f.rows(), g.col(0));
    std::copy_n(f.col(0), f.rows(), g.col(1));
    small.factors.push_back(g);
  }
  EXPECT_NEAR(factor_match_score(small, big), 1.0, 1e-14);
  EXPECT_NEAR(factor_match_score(big, small), 1.0, 1e-14);
}

// Congruence matrix by definition, for the brute-force checks below.
std::vector<std::vector<double>> congruences(const KTensor<double>& a, const KTensor<double>& b) {
  std::vector<std::vector<double>> c(static_cast<std::size_t>(a.rank()),
                                     std::vector<double>(static_cast<std::size_t>(b.rank()), 1.0));
  for (std::size_t n = 0; n < a.factors.size(); ++n)
    for (index_t i = 0; i < a.rank(); ++i)
      for (index_t j = 0; j < b.rank(); ++j) {
        double ab = 0.0, aa = 0.0, bb = 0.0;
        for (index_t l = 0; l < a.factors[n].rows(); ++l) {
          ab += a.factors[n](l, i) * b.factors[n](l, j);
          aa += a.factors[n](l, i) * a.factors[n](l, i);
          bb += b.factors[n](l, j) * b.factors[n](l, j);
        }
        c[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] *=
            std::abs(ab) / std::sqrt(aa * bb);
      }
  return c;
}

TEST(FactorMatch, MatchingIsOptimalNotGreedy) {
  int greedy_suboptimal = 0;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const index_t ra = 2 + static_cast<index_t>(seed % 4), rb = 5;
    const KTensor<double> a = random_ktensor<double>({3, 2}, ra, 10 * seed);
    const KTensor<double> b = random_ktensor<double>({3, 2}, rb, 10 * seed + 5);
    const auto c = congruences(a, b);
    // Best mean over all injections of a's components into b's (every ordered choice).
    std::vector<index_t> cols(static_cast<std::size_t>(rb));
    std::iota(cols.begin(), cols.end(), index_t{0});
    double best = 0.0;
    do {
      double s = 0.0;
      for (index_t i = 0; i < ra; ++i)
        s += c[static_cast<std::size_t>(i)]
              [static_cast<std::size_t>(cols[static_cast<std::size_t>(i)])];
      best = std::max(best, s / static_cast<double>(ra));
    } while (std::next_permutation(cols.begin(), cols.end()));
    // Greedy: repeatedly take the largest remaining entry.
    std::vector<bool> row_used(static_cast<std::size_t>(ra)),
        col_used(static_cast<std::size_t>(rb));
    double greedy = 0.0;
    for (index_t step = 0; step < ra; ++step) {
      double top = -1.0;
      std::size_t ti = 0, tj = 0;
      for (std::size_t i = 0; i < c.size(); ++i)
        for (std::size_t j = 0; j < c[i].size(); ++j)
          if (!row_used[i] && !col_used[j] && c[i][j] > top) {
            top = c[i][j];
            ti = i;
            tj = j;
          }
      row_used[ti] = col_used[tj] = true;
      greedy += top / static_cast<double>(ra);
    }
    EXPECT_NEAR(factor_match_score(a, b), best, 1e-14) << "seed " << seed;
    EXPECT_NEAR(factor_match_score(b, a), best, 1e-14) << "seed " << seed;
    if (greedy < best - 1e-9) ++greedy_suboptimal;
  }
  // The instances are hard enough that a greedy matching would fail this test.
  EXPECT_GT(greedy_suboptimal, 0);
}

TEST(FactorMatch, RejectsBadModels) {
  const KTensor<double> a = random_ktensor<double>({3, 4}, 2, 1);
  expect_throw_with<DimensionMismatch>(
      [&] {
        factor_match_score(a, random_ktensor<double>({3, 5}, 2, 1));
      },
      "(3, 4) and (3, 5)");
  EXPECT_THROW(factor_match_score(a, random_ktensor<double>({3, 4, 2}, 2, 1)), DimensionMismatch);
  KTensor<double> bad = a;
  bad.factors[0](0, 0) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(factor_match_score(a, bad), InvalidArgument);
  EXPECT_THROW(factor_match_score(KTensor<double>(), a), InvalidArgument);
}

// --- planted problems -------------------------------------------------------------

TYPED_TEST(Models, RandomCpHasPrescribedCollinearityAndNoise) {
  using T = TypeParam;
  const double tol = std::is_same_v<T, double> ? 1e-13 : 1e-6;
  for (double c : {0.0, 0.5, 0.9}) {
    for (double noise : {0.0, 0.1}) {
      RandomCpOptions o;
      o.dims = {6, 5, 4, 3};
      o.rank = 3;
      o.collinearity = c;
      o.noise = noise;
      o.seed = 7;
      const RandomCpProblem<T> p = random_cp_tensor<T>(o);
      ASSERT_EQ(p.tensor.dims(), o.dims);
      ASSERT_EQ(p.truth.rank(), 3);
      ASSERT_EQ(p.truth.dims(), o.dims);
      for (const Matrix<T>& f : p.truth.factors)
        for (index_t i = 0; i < 3; ++i)
          for (index_t j = 0; j < 3; ++j) {
            double d = 0.0;
            for (index_t l = 0; l < f.rows(); ++l) d += static_cast<double>(f(l, i)) * f(l, j);
            EXPECT_NEAR(d, i == j ? 1.0 : c, tol) << "c " << c << " (" << i << ", " << j << ")";
          }
      for (T w : p.truth.weights) {
        EXPECT_GE(w, T(1));
        EXPECT_LT(w, T(2));
      }
      // ||X - X_true|| = noise ||X_true||, and noise_norm reports it.
      const std::vector<double> truth = naive_full(p.truth);
      double tt = 0.0, dd = 0.0;
      for (index_t i = 0; i < p.tensor.numel(); ++i) {
        const double d = p.tensor[i] - truth[static_cast<std::size_t>(i)];
        tt += truth[static_cast<std::size_t>(i)] * truth[static_cast<std::size_t>(i)];
        dd += d * d;
      }
      EXPECT_NEAR(std::sqrt(dd), noise * std::sqrt(tt), tol * std::sqrt(tt));
      EXPECT_NEAR(p.noise_norm, std::sqrt(dd), tol * std::sqrt(tt));
    }
  }
}

TEST(RandomCp, DeterministicPerSeedAndTruthIndependentOfNoise) {
  RandomCpOptions o;
  o.dims = {5, 4, 3};
  o.rank = 2;
  o.noise = 0.2;
  o.seed = 11;
  const auto a = random_cp_tensor<double>(o), b = random_cp_tensor<double>(o);
  EXPECT_EQ(a.tensor.values(), b.tensor.values());
  EXPECT_EQ(a.truth.weights, b.truth.weights);
  o.noise = 0.0;
  const auto c = random_cp_tensor<double>(o);
  EXPECT_EQ(c.truth.weights, a.truth.weights);
  for (std::size_t n = 0; n < 3; ++n)
    EXPECT_EQ(c.truth.factors[n].values(), a.truth.factors[n].values());
  EXPECT_EQ(c.noise_norm, 0.0);
  EXPECT_NE(c.tensor.values(), a.tensor.values());
  o.seed = 12;
  EXPECT_NE(random_cp_tensor<double>(o).tensor.values(), c.tensor.values());
}

TEST(RandomCp, RejectsBadOptions) {
  const auto with = [](auto change) {
    RandomCpOptions o;
    o.dims = {4, 3, 5};
    o.rank = 2;
    change(o);
    return o;
  };
  const auto rejects = [](const RandomCpOptions& o, const std::string& needle) {
    expect_throw_with<InvalidArgument>([&] { random_cp_tensor<double>(o); }, needle);
  };
  rejects(with([](RandomCpOptions& o) { o.dims = {4}; }), "order >= 2, got order 1");
  rejects(with([](RandomCpOptions& o) { o.dims = {4, 0, 5}; }), "size 0 of mode 1");
  rejects(with([](RandomCpOptions& o) { o.dims = {4, -3, 5}; }), "size -3 of mode 1");
  rejects(with([](RandomCpOptions& o) { o.dims = {kHuge, kHuge, 2}; }), "64-bit");
  rejects(with([](RandomCpOptions& o) { o.rank = 0; }), "rank must be at least 1, got 0");
  rejects(with([](RandomCpOptions& o) { o.rank = 4; }), "rank 4 exceeds the size 3 of mode 1");
  rejects(with([](RandomCpOptions& o) { o.collinearity = 1.0; }), "collinearity must be in [0, 1)");
  rejects(with([](RandomCpOptions& o) { o.collinearity = -0.1; }), "collinearity");
  rejects(with([](RandomCpOptions& o) { o.collinearity = std::nan(""); }), "collinearity");
  rejects(with([](RandomCpOptions& o) { o.noise = -1.0; }), "noise must be finite and >= 0");
  rejects(with([](RandomCpOptions& o) { o.noise = HUGE_VAL; }), "noise");
}

}  // namespace
}  // namespace tenfold::test
