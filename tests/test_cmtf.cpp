// CMTF: one iteration against the normal equations written out (every backend), recovery
// of planted coupled models (complete, and 30 % missing at 1 % noise), and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend_test_util.hpp"
#include "expect_throw.hpp"
#include "random_matrix.hpp"
#include "tenfold/cmtf.hpp"
#include "tenfold/error.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold::test {
namespace {

struct Coupled {
  Matrix<double> a, b, c, v;
  Tensor<double> x;
  Matrix<double> y;
};

Coupled planted(index_t i, index_t j, index_t k, index_t m, index_t r, double noise,
                std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  Coupled p;
  p.a = gaussian<double>(i, r, 1.0, gen);
  p.b = gaussian<double>(j, r, 1.0, gen);
  p.c = gaussian<double>(k, r, 1.0, gen);
  p.v = gaussian<double>(m, r, 1.0, gen);
  p.x = KTensor<double>(std::vector<double>(static_cast<std::size_t>(r), 1.0), {p.a, p.b, p.c})
            .full();
  p.y = Matrix<double>(i, m);
  for (index_t q = 0; q < r; ++q)
    for (index_t c = 0; c < m; ++c)
      for (index_t a = 0; a < i; ++a) p.y(a, c) += p.a(a, q) * p.v(c, q);
  std::normal_distribution<double> n(0.0, 1.0);
  const auto add_noise = [&](double* d, index_t size) {
    double ss = 0.0;
    for (index_t q = 0; q < size; ++q) ss += d[q] * d[q];
    const double s = noise * std::sqrt(ss / static_cast<double>(size));
    for (index_t q = 0; q < size; ++q) d[q] += s * n(gen);
  };
  add_noise(p.x.data(), p.x.numel());
  add_noise(p.y.data(), p.y.size());
  return p;
}

// out = M G^{-1} for SPD G (R x R) by Gauss-Jordan on the host: the least-squares update.
Matrix<double> solve_right(const Matrix<double>& mm, Matrix<double> g) {
  const index_t r = g.rows();
  Matrix<double> out = mm;
  // out G = M  <=>  G^T out^T = M^T; G symmetric: eliminate on columns of [G | M^T]
  Matrix<double> rhs(r, mm.rows());
  for (index_t a = 0; a < mm.rows(); ++a)
    for (index_t q = 0; q < r; ++q) rhs(q, a) = mm(a, q);
  for (index_t p = 0; p < r; ++p) {
    const double d = g(p, p);
    for (index_t q = 0; q < r; ++q) g(p, q) /= d;
    for (index_t a = 0; a < rhs.cols(); ++a) rhs(p, a) /= d;
    for (index_t e = 0; e < r; ++e) {
      if (e == p) continue;
      const double f = g(e, p);
      for (index_t q = 0; q < r; ++q) g(e, q) -= f * g(p, q);
      for (index_t a = 0; a < rhs.cols(); ++a) rhs(e, a) -= f * rhs(p, a);
    }
  }
  for (index_t a = 0; a < mm.rows(); ++a)
    for (index_t q = 0; q < r; ++q) out(a, q) = rhs(q, a);
  return out;
}

Matrix<double> gram(const Matrix<double>& u) {
  Matrix<double> g(u.cols(), u.cols());
  for (index_t p = 0; p < u.cols(); ++p)
    for (index_t q = 0; q < u.cols(); ++q)
      for (index_t a = 0; a < u.rows(); ++a) g(p, q) += u(a, p) * u(a, q);
  return g;
}

class CmtfSteps : public OnEachBackend {};

// One iteration from a given start: V = Y^T A (A^T A)^{-1}, then C, B, A by their normal
// equations (A's with the matrix term), as plain loops.
TEST_P(CmtfSteps, OneIterationMatchesTheNormalEquations) {
  const index_t i = 6, j = 5, k = 4, m = 7, r = 3;
  const Coupled p = planted(i, j, k, m, r, 0.5, 2);
  std::mt19937_64 gen(3);
  std::vector<Matrix<double>> start = {gaussian<double>(i, r, 1.0, gen),
                                       gaussian<double>(j, r, 1.0, gen),
                                       gaussian<double>(k, r, 1.0, gen)};
  CmtfOptions o;
  o.rank = r;
  o.max_iters = 1;
  o.init = CmtfInit::given;
  o.backend = backend();
  const CmtfResult<double> got =
      cmtf<double>(p.x.view(), TensorView<const double>(p.y.data(), {i, m}), o, start);
  Matrix<double> a = start[0], b = start[1], c = start[2];
  // V: Y^T A (A^T A)^{-1}
  Matrix<double> yta(m, r);
  for (index_t q = 0; q < r; ++q)
    for (index_t e = 0; e < m; ++e)
      for (index_t s = 0; s < i; ++s) yta(e, q) += p.y(s, e) * a(s, q);
  const Matrix<double> v = solve_right(yta, gram(a));
  // mode updates: U_n = X_(n) KR (*_{m != n} G_m)^{-1}
  const auto update = [&](int n) {
    const index_t dims[3] = {i, j, k};
    Matrix<double> mm(dims[n], r);
    for (index_t q = 0; q < r; ++q)
      for (index_t z = 0; z < k; ++z)
        for (index_t y = 0; y < j; ++y)
          for (index_t x = 0; x < i; ++x) {
            const double val = p.x(x, y, z);
            if (n == 0) mm(x, q) += val * b(y, q) * c(z, q);
            if (n == 1) mm(y, q) += val * a(x, q) * c(z, q);
            if (n == 2) mm(z, q) += val * a(x, q) * b(y, q);
          }
    const Matrix<double>* f[3] = {&a, &b, &c};
    Matrix<double> g(r, r);
    for (index_t s = 0; s < r; ++s)
      for (index_t q = 0; q < r; ++q) g(s, q) = 1.0;
    for (int e = 0; e < 3; ++e) {
      if (e == n) continue;
      const Matrix<double> ge = gram(*f[e]);
      for (index_t s = 0; s < r * r; ++s) g.data()[s] *= ge.data()[s];
    }
    if (n == 0) {  // + Y V and + V^T V
      const Matrix<double> gv = gram(v);
      for (index_t s = 0; s < r * r; ++s) g.data()[s] += gv.data()[s];
      for (index_t q = 0; q < r; ++q)
        for (index_t e = 0; e < m; ++e)
          for (index_t x = 0; x < i; ++x) mm(x, q) += p.y(x, e) * v(e, q);
    }
    return solve_right(mm, g);
  };
  c = update(2);
  b = update(1);
  a = update(0);
  const Matrix<double>* want[3] = {&a, &b, &c};
  for (int n = 0; n < 3; ++n)
    for (index_t s = 0; s < want[n]->size(); ++s)
      EXPECT_NEAR(got.tensor_model.factors[static_cast<std::size_t>(n)].data()[s],
                  want[n]->data()[s], 1e-9 * (1.0 + std::abs(want[n]->data()[s])));
  for (index_t s = 0; s < v.size(); ++s)
    EXPECT_NEAR(got.matrix_model.factors[1].data()[s], v.data()[s],
                1e-9 * (1.0 + std::abs(v.data()[s])));
  // The error of the model with the new A and the V it used: ||X - [[A,B,C]]||^2 + ||Y - A V^T||^2
  double e2 = 0.0;
  for (index_t z = 0; z < k; ++z)
    for (index_t y = 0; y < j; ++y)
      for (index_t x = 0; x < i; ++x) {
        double mval = 0.0;
        for (index_t q = 0; q < r; ++q) mval += a(x, q) * b(y, q) * c(z, q);
        e2 += (p.x(x, y, z) - mval) * (p.x(x, y, z) - mval);
      }
  for (index_t e = 0; e < m; ++e)
    for (index_t x = 0; x < i; ++x) {
      double mval = 0.0;
      for (index_t q = 0; q < r; ++q) mval += a(x, q) * v(e, q);
      e2 += (p.y(x, e) - mval) * (p.y(x, e) - mval);
    }
  ASSERT_EQ(got.error_history.size(), 1u);
  EXPECT_NEAR(got.error_history[0], e2, 1e-9 * e2);
}
TENFOLD_ON_EACH_BACKEND(CmtfSteps);

double fms(const KTensor<double>& got, const Coupled& p) {
  KTensor<double> want(std::vector<double>(got.weights.size(), 1.0), {p.a, p.b, p.c});
  return factor_match_score(got, want);
}

template <class T>
KTensor<double> widened(const KTensor<T>& k) {
  KTensor<double> out;
  out.weights.assign(k.weights.begin(), k.weights.end());
  for (const Matrix<T>& f : k.factors) {
    Matrix<double> d(f.rows(), f.cols());
    for (index_t s = 0; s < f.size(); ++s) d.data()[s] = static_cast<double>(f.data()[s]);
    out.factors.push_back(std::move(d));
  }
  return out;
}

template <class T>
class CmtfRecovery : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CmtfRecovery, Precisions);

TYPED_TEST(CmtfRecovery, PlantedCoupledModelIsFound) {
  using T = TypeParam;
  const Coupled p = planted(20, 12, 10, 15, 3, 0.0, 7);
  std::vector<T> x(p.x.values().begin(), p.x.values().end());
  std::vector<T> y(p.y.values().begin(), p.y.values().end());
  const auto x0 = x, y0 = y;
  CmtfOptions o;
  o.rank = 3;
  o.max_iters = 500;
  o.tol = 1e-12;
  const auto r = cmtf<T>(TensorView<const T>(x.data(), {20, 12, 10}),
                         TensorView<const T>(y.data(), {20, 15}), o);
  const double eps = std::numeric_limits<T>::epsilon();
  EXPECT_LT(r.relative_error, 1e3 * std::sqrt(eps));
  EXPECT_GE(fms(widened(r.tensor_model), p), 0.99);
  EXPECT_EQ(x, x0);
  EXPECT_EQ(y, y0);
}

TYPED_TEST(CmtfRecovery, ThirtyPercentMissingAtOnePercentNoise) {
  using T = TypeParam;
  const Coupled p = planted(30, 15, 12, 20, 3, 0.01, 9);
  std::vector<T> x(p.x.values().begin(), p.x.values().end());
  std::vector<T> y(p.y.values().begin(), p.y.values().end());
  std::mt19937_64 gen(4);
  std::bernoulli_distribution missing(0.3);
  std::vector<std::uint8_t> wx(x.size()), wy(y.size());
  for (std::size_t s = 0; s < x.size(); ++s)
    if (!(wx[s] = missing(gen) ? 0 : 1)) x[s] = std::numeric_limits<T>::quiet_NaN();
  for (std::size_t s = 0; s < y.size(); ++s)
    if (!(wy[s] = missing(gen) ? 0 : 1)) y[s] = std::numeric_limits<T>::quiet_NaN();
  CmtfOptions o;
  o.rank = 3;
  o.max_iters = 500;
  o.tol = 1e-9;
  const auto r =
      cmtf<T>(TensorView<const T>(x.data(), {30, 15, 12}), TensorView<const T>(y.data(), {30, 20}),
              TensorView<const std::uint8_t>(wx.data(), {30, 15, 12}),
              TensorView<const std::uint8_t>(wy.data(), {30, 20}), o);
  EXPECT_GE(fms(widened(r.tensor_model), p), 0.95);
  EXPECT_LT(r.relative_error, 0.05);
}

TEST(Cmtf, RowMajorInputGivesTheSameModel) {
  const Coupled p = planted(8, 6, 5, 7, 2, 0.1, 5);
  // the C-order arrays (I, J, K) and (I, M): column-major (K, J, I) and (M, I)
  Tensor<double> xt({5, 6, 8});
  Matrix<double> yt(7, 8);
  for (index_t a = 0; a < 8; ++a) {
    for (index_t b = 0; b < 6; ++b)
      for (index_t c = 0; c < 5; ++c) xt(c, b, a) = p.x(a, b, c);
    for (index_t c = 0; c < 7; ++c) yt(c, a) = p.y(a, c);
  }
  CmtfOptions o;
  o.rank = 2;
  o.max_iters = 20;
  const auto a = cmtf<double>(p.x.view(), TensorView<const double>(p.y.data(), {8, 7}), o);
  o.layout = Layout::row_major;
  const auto b = cmtf<double>(xt.view(), TensorView<const double>(yt.data(), {7, 8}), o);
  ASSERT_EQ(a.error_history.size(), b.error_history.size());
  for (std::size_t s = 0; s < a.error_history.size(); ++s)
    EXPECT_NEAR(a.error_history[s], b.error_history[s], 1e-10 * a.error_history[0]);
}

TEST(Cmtf, BadInputGetsOneClearLine) {
  const Coupled p = planted(6, 5, 4, 3, 2, 0.0, 1);
  const TensorView<const double> y(p.y.data(), {6, 3});
  CmtfOptions o;
  o.rank = 2;
  Matrix<double> short_y(5, 3);
  expect_throw_with<DimensionMismatch>(
      [&] {
        cmtf<double>(p.x.view(), TensorView<const double>(short_y.data(), {5, 3}), o);
      },
      "the matrix has 5 rows, the tensor's first mode 6");
  expect_throw_with<InvalidArgument>(
      [&] {
        cmtf<double>(TensorView<const double>(p.x.data(), {6, 20}), y, o);
      },
      "3-way");
  o.rank = 0;
  expect_throw_with<InvalidOption>([&] { cmtf<double>(p.x.view(), y, o); },
                                   "rank must be between 1");
  o.rank = 2;
  Tensor<double> nan = p.x;
  nan(1, 2, 3) = std::nan("");
  expect_throw_with<InvalidArgument>([&] { cmtf<double>(nan.view(), y, o); },
                                     "the tensor has a non-finite entry at (1, 2, 3)");
  std::vector<std::uint8_t> ones(200, 1);
  expect_throw_with<DimensionMismatch>(
      [&] {
        cmtf<double>(p.x.view(), y, TensorView<const std::uint8_t>(ones.data(), {6, 5, 3}),
                     TensorView<const std::uint8_t>(ones.data(), {6, 3}), o);
      },
      "the tensor's mask has another shape");
  const std::vector<Matrix<double>> start = {Matrix<double>(6, 2), Matrix<double>(4, 2),
                                             Matrix<double>(4, 2)};
  o.init = CmtfInit::given;
  expect_throw_with<DimensionMismatch>([&] { cmtf<double>(p.x.view(), y, o, start); },
                                       "start factor B has shape 4 x 2, expected 5 x 2");
}

}  // namespace
}  // namespace tenfold::test
