// PARAFAC2: its steps against plain loops on random data (every backend), recovery of
// planted models (complete, and 30 % missing at 1 % noise), and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend_test_util.hpp"
#include "core/compute.hpp"
#include "core/host_lapack.hpp"
#include "cp/parafac2_steps.hpp"
#include "expect_throw.hpp"
#include "random_matrix.hpp"
#include "tenfold/error.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/parafac2.hpp"

namespace tenfold::test {
namespace {

// A planted PARAFAC2 model and its slices X_k = P_k B diag(a_k) C^T (+ noise).
struct Planted {
  Matrix<double> a, b, c;
  std::vector<Matrix<double>> p;
  std::vector<Matrix<double>> x;
};

Planted planted(const std::vector<index_t>& rows, index_t j, index_t r, double noise,
                std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  Planted m;
  const auto k = static_cast<index_t>(rows.size());
  m.a = Matrix<double>(k, r);
  for (double& v : m.a.values()) v = u(gen);
  m.b = gaussian<double>(r, r, 1.0, gen);
  m.c = gaussian<double>(j, r, 1.0, gen);
  std::normal_distribution<double> n(0.0, 1.0);
  for (index_t s = 0; s < k; ++s) {
    const index_t ik = rows[static_cast<std::size_t>(s)];
    m.p.push_back(orthonormal(ik, r, gen));
    Matrix<double> xs(ik, j);
    double ss = 0.0;
    for (index_t i = 0; i < ik; ++i)
      for (index_t jj = 0; jj < j; ++jj) {
        double v = 0.0;
        for (index_t q = 0; q < r; ++q) {
          double pb = 0.0;
          for (index_t l = 0; l < r; ++l) pb += m.p.back()(i, l) * m.b(l, q);
          v += pb * m.a(s, q) * m.c(jj, q);
        }
        xs(i, jj) = v;
        ss += v * v;
      }
    const double scale = noise * std::sqrt(ss / static_cast<double>(ik * j));
    for (double& v : xs.values()) v += scale * n(gen);
    m.x.push_back(std::move(xs));
  }
  return m;
}

template <class T>
std::vector<Matrix<T>> cast(const std::vector<Matrix<double>>& x) {
  std::vector<Matrix<T>> out;
  for (const auto& m : x) {
    Matrix<T> c(m.rows(), m.cols());
    for (index_t i = 0; i < m.size(); ++i) c.data()[i] = static_cast<T>(m.data()[i]);
    out.push_back(std::move(c));
  }
  return out;
}

template <class T>
std::vector<TensorView<const T>> views(const std::vector<Matrix<T>>& x) {
  std::vector<TensorView<const T>> v;
  for (const auto& m : x) v.emplace_back(m.data(), std::vector<index_t>{m.rows(), m.cols()});
  return v;
}

// Factor match score of the CP modes A and C.
template <class T>
double fms_ac(const Parafac2Model<T>& m, const Planted& p) {
  KTensor<double> got, want;
  got.weights.assign(static_cast<std::size_t>(m.a.cols()), 1.0);
  for (const Matrix<T>* f : {&m.a, &m.c}) {
    Matrix<double> d(f->rows(), f->cols());
    for (index_t i = 0; i < f->size(); ++i) d.data()[i] = static_cast<double>(f->data()[i]);
    got.factors.push_back(std::move(d));
  }
  want.weights.assign(got.weights.size(), 1.0);
  want.factors = {p.a, p.c};
  return factor_match_score(got, want);
}

class Parafac2Steps : public OnEachBackend {};

// P_k = polar factor of X_k C diag(a_k) B^T: orthonormal columns and P_k^T Z_k symmetric
// positive semidefinite; Y_k = P_k^T X_k and the error against plain loops.
TEST_P(Parafac2Steps, ProjectionsAndErrorMatchPlainLoops) {
  const std::vector<index_t> rows = {7, 3, 9};
  const index_t j = 6, r = 4;
  const Planted m = planted(rows, j, r, 0.3, 11);
  Parafac2Options o;
  o.rank = r;
  auto c = detail::make_compute<double>(backend());
  const auto v = views(m.x);
  detail::Parafac2Slices<double> x(*c, v, {}, Layout::col_major);
  detail::Parafac2Steps<double> steps(*c, x, r);
  std::mt19937_64 gen(5);
  detail::Parafac2Factors<double> f;
  f.by_mode = {gaussian<double>(r, r, 1.0, gen), gaussian<double>(j, r, 1.0, gen),
               gaussian<double>(3, r, 1.0, gen)};
  auto pr = steps.make_projection();
  steps.project(f, pr);
  steps.materialise(pr);
  std::vector<double> y(static_cast<std::size_t>(r * j * 3));
  c->download(y.data(), pr.y.get(), y.size());
  double err2 = 0.0;
  for (index_t s = 0; s < 3; ++s) {
    const index_t ik = rows[static_cast<std::size_t>(s)], off = x.offset(s);
    const auto p = [&](index_t i, index_t q) {
      return pr.host[static_cast<std::size_t>(off + i + x.rows() * q)];
    };
    // Z = X_k C diag(a_k) B^T
    Matrix<double> z(ik, r);
    for (index_t i = 0; i < ik; ++i)
      for (index_t q = 0; q < r; ++q)
        for (index_t l = 0; l < r; ++l)
          for (index_t jj = 0; jj < j; ++jj)
            z(i, q) +=
                m.x[static_cast<std::size_t>(s)](i, jj) * f.c()(jj, l) * f.a()(s, l) * f.b()(q, l);
    // P^T P = I (P P^T = I for the short slice) and P^T Z symmetric
    const index_t small = std::min(ik, r);
    for (index_t q = 0; q < r; ++q)
      for (index_t l = 0; l < r; ++l) {
        double ptp = 0.0, ptz = 0.0, ptz_t = 0.0;
        for (index_t i = 0; i < ik; ++i) {
          ptp += p(i, q) * p(i, l);
          ptz += p(i, q) * z(i, l);
          ptz_t += p(i, l) * z(i, q);
        }
        if (ik >= r) EXPECT_NEAR(ptp, q == l ? 1.0 : 0.0, 1e-12);
        EXPECT_NEAR(ptz, ptz_t, 1e-10 * (1.0 + std::abs(ptz)));
      }
    if (ik < r) {
      for (index_t i = 0; i < small; ++i)
        for (index_t i2 = 0; i2 < small; ++i2) {
          double ppt = 0.0;
          for (index_t q = 0; q < r; ++q) ppt += p(i, q) * p(i2, q);
          EXPECT_NEAR(ppt, i == i2 ? 1.0 : 0.0, 1e-12);
        }
    }
    for (index_t q = 0; q < r; ++q)
      for (index_t jj = 0; jj < j; ++jj) {
        double want = 0.0;
        for (index_t i = 0; i < ik; ++i) want += p(i, q) * m.x[static_cast<std::size_t>(s)](i, jj);
        EXPECT_NEAR(y[static_cast<std::size_t>(q + r * (jj + j * s))], want, 1e-12);
      }
    // ||X_k - P_k B diag(a_k) C^T||^2
    for (index_t i = 0; i < ik; ++i)
      for (index_t jj = 0; jj < j; ++jj) {
        double model = 0.0;
        for (index_t q = 0; q < r; ++q) {
          double pb = 0.0;
          for (index_t l = 0; l < r; ++l) pb += p(i, l) * f.b()(l, q);
          model += pb * f.a()(s, q) * f.c()(jj, q);
        }
        const double d = m.x[static_cast<std::size_t>(s)](i, jj) - model;
        err2 += d * d;
      }
  }
  EXPECT_NEAR(steps.error2(f, pr, false), err2, 1e-10 * err2);
  // The masked path (every entry observed) forms the model instead of the closed form.
  std::vector<std::vector<std::uint8_t>> ones;
  std::vector<TensorView<const std::uint8_t>> masks;
  for (const auto& s : m.x) ones.emplace_back(static_cast<std::size_t>(s.size()), 1);
  for (std::size_t s = 0; s < ones.size(); ++s)
    masks.emplace_back(ones[s].data(), std::vector<index_t>{m.x[s].rows(), j});
  detail::Parafac2Slices<double> xm(*c, v, masks, Layout::col_major);
  detail::Parafac2Steps<double> masked(*c, xm, r);
  auto pm = masked.make_projection();
  masked.project(f, pm);
  EXPECT_NEAR(masked.error2(f, pm, false), err2, 1e-10 * err2);
  // Both routes give the same projections and Y.
  std::vector<double> ym(y.size());
  c->download(ym.data(), pm.y.get(), ym.size());
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(ym[i], y[i], 1e-12);
  for (std::size_t i = 0; i < pr.host.size(); ++i) EXPECT_NEAR(pm.host[i], pr.host[i], 1e-12);
}
TENFOLD_ON_EACH_BACKEND(Parafac2Steps);

template <class T>
class Parafac2Recovery : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Parafac2Recovery, Precisions);

TYPED_TEST(Parafac2Recovery, PlantedModelIsFound) {
  using T = TypeParam;
  std::vector<index_t> rows;
  for (int k = 0; k < 20; ++k) rows.push_back(12 + (k * 7) % 9);
  const Planted m = planted(rows, 15, 3, 0.0, 3);
  const auto x = cast<T>(m.x);
  const auto before = x;
  Parafac2Options o;
  o.rank = 3;
  o.tol = 1e-10;
  const Parafac2Result<T> r = parafac2<T>(views(x), o);
  // float: the fit is resolved to about sqrt(eps) of ||X||
  const double eps = std::numeric_limits<T>::epsilon();
  EXPECT_LT(r.relative_error, 1e3 * std::sqrt(eps));
  EXPECT_GE(fms_ac(r.model, m), 1.0 - 1e3 * std::sqrt(eps));
  ASSERT_EQ(r.model.projections.size(), rows.size());
  EXPECT_EQ(r.model.projections[4].rows(), rows[4]);
  EXPECT_EQ(r.error_history.size() + static_cast<std::size_t>(r.line_search_accepted) >= 1, true);
  for (std::size_t k = 0; k < x.size(); ++k) EXPECT_EQ(x[k].values(), before[k].values());
}

TYPED_TEST(Parafac2Recovery, ThirtyPercentMissingAtOnePercentNoise) {
  using T = TypeParam;
  std::vector<index_t> rows;
  for (int k = 0; k < 30; ++k) rows.push_back(20 + (k * 5) % 11);
  const Planted m = planted(rows, 25, 3, 0.01, 8);
  auto x = cast<T>(m.x);
  std::mt19937_64 gen(21);
  std::bernoulli_distribution missing(0.3);
  std::vector<std::vector<std::uint8_t>> w;
  std::vector<TensorView<const std::uint8_t>> masks;
  for (auto& s : x) {
    w.emplace_back(static_cast<std::size_t>(s.size()));
    for (index_t i = 0; i < s.size(); ++i) {
      w.back()[static_cast<std::size_t>(i)] = missing(gen) ? 0 : 1;
      if (w.back()[static_cast<std::size_t>(i)] == 0)
        s.data()[i] = std::numeric_limits<T>::quiet_NaN();
    }
    masks.emplace_back(w.back().data(), std::vector<index_t>{s.rows(), s.cols()});
  }
  Parafac2Options o;
  o.rank = 3;
  o.max_iters = 500;
  const Parafac2Result<T> r = parafac2<T>(views(x), masks, o);
  EXPECT_GE(fms_ac(r.model, m), 0.95);
  EXPECT_LT(r.relative_error, 0.05);
}

TEST(Parafac2, RowMajorSlicesGiveTheSameModel) {
  const Planted m = planted({8, 10, 9, 11}, 7, 2, 0.05, 4);
  std::vector<Matrix<double>> t;  // the C-order arrays (I_k, J) as J x I_k
  for (const auto& s : m.x) {
    Matrix<double> c(s.cols(), s.rows());
    for (index_t i = 0; i < s.rows(); ++i)
      for (index_t j = 0; j < s.cols(); ++j) c(j, i) = s(i, j);
    t.push_back(std::move(c));
  }
  Parafac2Options o;
  o.rank = 2;
  o.max_iters = 30;
  const auto a = parafac2<double>(views(m.x), o);
  o.layout = Layout::row_major;
  const auto b = parafac2<double>(views(t), o);
  ASSERT_EQ(a.error_history.size(), b.error_history.size());
  for (std::size_t i = 0; i < a.error_history.size(); ++i)
    EXPECT_NEAR(a.error_history[i], b.error_history[i], 1e-10);
}

TEST(Parafac2, LineSearchAndNormalisationKeepTheErrorFalling) {
  const Planted m = planted({15, 18, 16, 17, 19, 15}, 12, 3, 0.02, 9);
  Parafac2Options o;
  o.rank = 3;
  o.max_iters = 40;
  o.init = Parafac2Init::random;
  o.tol = 0.0;
  o.normalize = true;
  const auto r = parafac2<double>(views(m.x), o);
  for (std::size_t i = 1; i < r.error_history.size(); ++i)
    EXPECT_LE(r.error_history[i], r.error_history[i - 1] * (1 + 1e-9));
  for (const Matrix<double>* f : {&r.model.a, &r.model.b, &r.model.c})
    for (index_t q = 0; q < 3; ++q) {
      double s = 0.0;
      for (index_t i = 0; i < f->rows(); ++i) s += (*f)(i, q) * (*f)(i, q);
      EXPECT_NEAR(s, 1.0, 1e-12);
    }
  EXPECT_NEAR(r.relative_error, r.error_history.back(), 1e-9);
}

TEST(Parafac2, NonNegativeModesStayNonNegative) {
  Planted m = planted({10, 12, 11, 13, 12}, 9, 2, 0.0, 6);
  Parafac2Options o;
  o.rank = 2;
  o.max_iters = 10;
  o.nonnegative_modes = {0, 2};
  o.init = Parafac2Init::random;
  const auto r = parafac2<double>(views(m.x), o);
  for (double v : r.model.a.values()) EXPECT_GE(v, 0.0);
  for (double v : r.model.c.values()) EXPECT_GE(v, 0.0);
}

TEST(Parafac2, BadInputGetsOneClearLine) {
  const Planted m = planted({5, 6}, 4, 2, 0.0, 1);
  Parafac2Options o;
  o.rank = 2;
  auto x = m.x;
  expect_throw_with<InvalidArgument>([&] { parafac2<double>({}, o); }, "at least one slice");
  std::vector<Matrix<double>> ragged = {m.x[0], Matrix<double>(6, 5)};
  expect_throw_with<DimensionMismatch>([&] { parafac2<double>(views(ragged), o); },
                                       "slice 1 has 5 columns, slice 0 has 4");
  std::vector<Matrix<double>> empty = {m.x[0], Matrix<double>(0, 4)};
  expect_throw_with<InvalidArgument>([&] { parafac2<double>(views(empty), o); },
                                     "slice 1 is empty");
  o.rank = 0;
  expect_throw_with<InvalidOption>([&] { parafac2<double>(views(x), o); },
                                   "rank must be between 1");
  o.rank = 5;
  expect_throw_with<InvalidOption>([&] { parafac2<double>(views(x), o); }, "J = 4, got 5");
  o.rank = 2;
  x[1](2, 3) = std::nan("");
  expect_throw_with<InvalidArgument>([&] { parafac2<double>(views(x), o); },
                                     "slice 1 has a non-finite entry at (2, 3)");
  std::vector<std::uint8_t> ones(100, 1);
  std::vector<TensorView<const std::uint8_t>> masks = {
      TensorView<const std::uint8_t>(ones.data(), {5, 4}),
      TensorView<const std::uint8_t>(ones.data(), {5, 4})};
  expect_throw_with<DimensionMismatch>([&] { parafac2<double>(views(x), masks, o); },
                                       "mask 1 has shape 5 x 4, slice 1 6 x 4");
  masks.pop_back();
  expect_throw_with<DimensionMismatch>([&] { parafac2<double>(views(x), masks, o); },
                                       "got 1 masks for 2 slices");
  const std::vector<Matrix<double>> start = {Matrix<double>(2, 2), Matrix<double>(2, 2),
                                             Matrix<double>(3, 2)};
  o.init = Parafac2Init::given;
  expect_throw_with<DimensionMismatch>([&] { parafac2<double>(views(m.x), o, start); },
                                       "start factor C has shape 3 x 2, expected 4 x 2");
  o.init = Parafac2Init::svd;
  o.nonnegative_modes = {3};
  expect_throw_with<InvalidOption>([&] { parafac2<double>(views(m.x), o); }, "nonnegative_modes");
  o.nonnegative_modes = {};
  std::vector<Matrix<double>> zero = {Matrix<double>(5, 4), Matrix<double>(6, 4)};
  expect_throw_with<InvalidArgument>([&] { parafac2<double>(views(zero), o); }, "slices are zero");
}

}  // namespace
}  // namespace tenfold::test

namespace tenfold::test {
namespace {

// The polar factor by the Gram (well conditioned) and by the SVD (ill conditioned, and
// fewer rows than columns): orthonormal columns (rows) and P^T A symmetric positive
// semidefinite, as U V^T of A = U S V^T.
TEST(Parafac2, PolarFactorOnEitherPath) {
  std::mt19937_64 gen(12);
  for (const double spread : {1.0, 1e-5}) {
    for (const index_t m : {9, 2}) {
      const index_t n = 3;
      Matrix<double> a = gaussian<double>(m, n, 1.0, gen);
      for (index_t i = 0; i < m; ++i) a(i, 2) = a(i, 0) + spread * a(i, 2);
      const std::vector<double> p = detail::polar_factor(m, n, a.values());
      ASSERT_EQ(p.size(), static_cast<std::size_t>(m * n));
      const index_t k = std::min(m, n);
      for (index_t q = 0; q < n; ++q)
        for (index_t l = 0; l < n; ++l) {
          double ptp = 0.0, pta = 0.0, pta_t = 0.0;
          for (index_t i = 0; i < m; ++i) {
            ptp += p[static_cast<std::size_t>(i + m * q)] * p[static_cast<std::size_t>(i + m * l)];
            pta += p[static_cast<std::size_t>(i + m * q)] * a(i, l);
            pta_t += p[static_cast<std::size_t>(i + m * l)] * a(i, q);
          }
          if (m >= n) EXPECT_NEAR(ptp, q == l ? 1.0 : 0.0, 1e-11);
          EXPECT_NEAR(pta, pta_t, 1e-11);
          if (q == l) EXPECT_GE(pta, -1e-12);
        }
      EXPECT_GE(k, 1);
    }
  }
}

}  // namespace
}  // namespace tenfold::test
