// Non-negative Tucker: the cross-unfolding kernel against its loop reference, one
// iteration of each method against a dense reference written as TensorLy writes it (the
// model without U_n formed, TensorLy's hals_nnls and fista), the reference backend as the
// oracle of the cpu one, both layouts, the reported errors, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend_test_util.hpp"
#include "core/multilinear.hpp"
#include "tenfold/error.hpp"
#include "tenfold/nonnegative_tucker.hpp"
#include "tucker_test_util.hpp"

namespace tenfold::test {
namespace {

template <class T>
class NonnegativeTuckerTyped : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(NonnegativeTuckerTyped, Precisions);

TYPED_TEST(NonnegativeTuckerTyped, ModeCrossMatchesReference) {
  using T = TypeParam;
  const auto cpu = detail::make_compute<T>(Backend::cpu);
  std::uint64_t seed = 1;
  for (const std::vector<index_t>& dims :
       std::vector<std::vector<index_t>>{{5, 4}, {3, 1, 4}, {4, 3, 5}, {2, 3, 1, 4}}) {
    const Tensor<T> x = random_tensor<T>(dims, seed++);
    for (int n = 0; n < x.order(); ++n) {
      for (index_t j : {index_t{1}, index_t{3}}) {
        std::vector<index_t> ydims = dims;
        ydims[static_cast<std::size_t>(n)] = j;
        const Tensor<T> y = random_tensor<T>(ydims, seed++);
        const Matrix<double> want = matmul_ref(unfold_ref(x, n), false, unfold_ref(y, n), true);
        std::vector<T> out(static_cast<std::size_t>(x.dim(n) * j), T(7));
        detail::mode_cross(*cpu, x.data(), x.dims(), n, y.data(), j, out.data());
        EXPECT_LT(rel_diff(out, want.values()), exact_tol<T>()) << "mode " << n << ", j " << j;
      }
    }
  }
}

// --- a dense reference of one iteration, as TensorLy computes it -------------------

using Model = TTensor<double>;

Model random_nonnegative_model(const std::vector<index_t>& dims, const std::vector<index_t>& ranks,
                               std::uint64_t seed) {
  Model m = random_ttensor<double>(dims, ranks, seed);
  for (double& a : m.core.values()) a = std::abs(a);
  for (Matrix<double>& f : m.factors)
    for (double& a : f.values()) a = std::abs(a);
  return m;
}

// B^T = [G x_{m != n} U_m]_(n) (r_n x prod_{m != n} I_m)
Matrix<double> model_without(const Model& m, int n) {
  Tensor<double> t = m.core;
  for (int k = 0; k < m.order(); ++k)
    if (k != n) t = ttm_ref(t, k, m.factors[static_cast<std::size_t>(k)]);
  return unfold_ref(t, n);
}

// TensorLy's hals_nnls(UtM, UtU, V, n_iter_max=5) on V = U^T (rows of V = columns of U),
// with its measure of a pass's change: sum_k ||V - newV_k||^2, V - newV_k broadcast over
// all rows of V (before row k's update).
void hals_nnls_ref(const Matrix<double>& mtu, const Matrix<double>& utu, Matrix<double>& u) {
  double first = 0.0;
  for (int it = 0; it < 5; ++it) {
    double change = 0.0;
    for (index_t k = 0; k < utu.rows(); ++k) {
      if (utu(k, k) == 0.0) continue;
      std::vector<double> next(static_cast<std::size_t>(u.rows()));
      for (index_t i = 0; i < u.rows(); ++i) {
        double num = mtu(i, k) + utu(k, k) * u(i, k);
        for (index_t j = 0; j < utu.rows(); ++j) num -= utu(k, j) * u(i, j);
        next[static_cast<std::size_t>(i)] = std::max(num / utu(k, k), 0.0);
      }
      for (index_t j = 0; j < u.cols(); ++j)
        for (index_t i = 0; i < u.rows(); ++i)
          change += (u(i, j) - next[static_cast<std::size_t>(i)]) *
                    (u(i, j) - next[static_cast<std::size_t>(i)]);
      for (index_t i = 0; i < u.rows(); ++i) u(i, k) = next[static_cast<std::size_t>(i)];
    }
    if (it == 0) first = change;
    if (change < 1e-8 * first) break;
  }
}

Tensor<double> times_all(const Tensor<double>& t, const std::vector<Matrix<double>>& mats) {
  Tensor<double> out = t;
  for (std::size_t k = 0; k < mats.size(); ++k) out = ttm_ref(out, static_cast<int>(k), mats[k]);
  return out;
}

std::vector<Matrix<double>> transposes(const std::vector<Matrix<double>>& mats) {
  std::vector<Matrix<double>> t;
  for (const Matrix<double>& a : mats) {
    Matrix<double> at(a.cols(), a.rows());
    for (index_t j = 0; j < a.cols(); ++j)
      for (index_t i = 0; i < a.rows(); ++i) at(j, i) = a(i, j);
    t.push_back(std::move(at));
  }
  return t;
}

void reference_iteration(const Tensor<double>& x, Model& m, NonnegativeTuckerMethod method,
                         int core_iters) {
  const double e = 10e-12;
  for (int n = 0; n < m.order(); ++n) {
    Matrix<double>& u = m.factors[static_cast<std::size_t>(n)];
    const Matrix<double> bt = model_without(m, n);
    const Matrix<double> num = matmul_ref(unfold_ref(x, n), false, bt, true);  // X_(n) B
    const Matrix<double> btb = matmul_ref(bt, false, bt, true);                // B^T B
    if (method == NonnegativeTuckerMethod::multiplicative) {
      const Matrix<double> den = matmul_ref(u, false, btb, false);
      for (index_t i = 0; i < u.size(); ++i) {
        u.values()[static_cast<std::size_t>(i)] *=
            std::max(num.values()[static_cast<std::size_t>(i)], e) /
            std::max(den.values()[static_cast<std::size_t>(i)], e);
      }
    } else {
      hals_nnls_ref(num, btb, u);
    }
  }
  std::vector<Matrix<double>> grams;
  for (const Matrix<double>& f : m.factors) grams.push_back(matmul_ref(f, true, f, false));
  const Tensor<double> est = times_all(x, transposes(m.factors));  // X x U^T
  if (method == NonnegativeTuckerMethod::multiplicative) {
    const Tensor<double> den = times_all(m.core, grams);
    for (index_t i = 0; i < m.core.numel(); ++i)
      m.core[i] *= std::max(est[i], e) / std::max(den[i], e);
    return;
  }
  // fista
  double lr = 1.0;
  for (const Matrix<double>& g : grams) {
    // the largest eigenvalue by power iteration (the Grams are small and positive definite)
    std::vector<double> v(static_cast<std::size_t>(g.rows()), 1.0);
    double lambda = 0.0;
    for (int it = 0; it < 2000; ++it) {
      std::vector<double> w(v.size(), 0.0);
      for (index_t i = 0; i < g.rows(); ++i)
        for (index_t j = 0; j < g.cols(); ++j)
          w[static_cast<std::size_t>(i)] += g(i, j) * v[static_cast<std::size_t>(j)];
      double nw = 0.0;
      for (double a : w) nw += a * a;
      lambda = std::sqrt(nw);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = w[i] / lambda;
    }
    lr /= lambda;
  }
  Tensor<double> xk = m.core, y = m.core;
  double momentum_old = 1.0, norm0 = 0.0;
  for (int it = 0; it < core_iters; ++it) {
    const Tensor<double> grad = times_all(y, grams);
    const double momentum = (1 + std::sqrt(1 + 4 * momentum_old * momentum_old)) / 2;
    double change = 0.0;
    for (index_t i = 0; i < xk.numel(); ++i) {
      const double next = std::max(y[i] - lr * (grad[i] - est[i]), 1e-8);
      y[i] = next + ((momentum_old - 1) / momentum) * (next - xk[i]);
      change += xk[i] - next;
      xk[i] = next;
    }
    momentum_old = momentum;
    if (it == 0) norm0 = std::abs(change);
    if (std::abs(change) < 1e-8 * norm0) break;
  }
  m.core = xk;
}

class NonnegativeTuckerMethods : public ::testing::TestWithParam<NonnegativeTuckerMethod> {};

TEST_P(NonnegativeTuckerMethods, IterationsMatchDenseReference) {
  const std::vector<index_t> dims = {5, 4, 6}, ranks = {2, 3, 2};
  Tensor<double> x = random_nonnegative_model(dims, ranks, 3).full();
  const Tensor<double> noise = random_tensor<double>(dims, 4);
  for (index_t i = 0; i < x.numel(); ++i) x[i] = std::abs(x[i] + 0.3 * noise[i]);
  const Model start = random_nonnegative_model(dims, ranks, 5);
  Model want = start;
  NonnegativeTuckerOptions o;
  o.ranks = ranks;
  o.method = GetParam();
  o.tol = 0.0;
  o.core_iters = 20;
  for (int iters = 1; iters <= 3; ++iters) {
    reference_iteration(x, want, o.method, o.core_iters);
    o.max_iters = iters;
    for (Backend b : test_backends()) {
      o.backend = b;
      const NonnegativeTuckerResult<double> r = nonnegative_tucker(x, o, &start);
      EXPECT_LT(rel_diff(r.model.core.values(), want.core.values()), 1e-10) << iters;
      for (std::size_t n = 0; n < dims.size(); ++n) {
        EXPECT_LT(rel_diff(r.model.factors[n].values(), want.factors[n].values()), 1e-10)
            << "factor " << n << " after " << iters;
      }
      EXPECT_NEAR(r.relative_error, true_relative_error(x, want), 1e-12);
      EXPECT_EQ(r.iterations, iters);
    }
  }
}

TEST_P(NonnegativeTuckerMethods, FitsALowRankNonnegativeTensor) {
  const std::vector<index_t> dims = {8, 7, 6}, ranks = {2, 3, 2};
  const Tensor<double> x = random_nonnegative_model(dims, ranks, 11).full();
  for (Layout layout : {Layout::col_major, Layout::row_major}) {
    NonnegativeTuckerOptions o;
    o.ranks = ranks;
    o.method = GetParam();
    o.max_iters = 300;
    o.tol = 1e-10;
    o.layout = layout;
    const NonnegativeTuckerResult<double> r = nonnegative_tucker(x, o);
    EXPECT_LT(r.relative_error, 0.05);
    EXPECT_NEAR(r.relative_error, true_relative_error(x, r.model), 1e-10);
    for (double a : r.model.core.values()) EXPECT_GE(a, 0.0);
    for (const Matrix<double>& f : r.model.factors)
      for (double a : f.values()) EXPECT_GE(a, 0.0);
    if (o.method == NonnegativeTuckerMethod::multiplicative) {
      for (std::size_t k = 1; k < r.error_history.size(); ++k)
        EXPECT_LE(r.error_history[k], r.error_history[k - 1] + 1e-12) << "iteration " << k;
    }
  }
}

// A C-order array's view swept in NumPy axis order is the Fortran copy swept from mode 0.
TEST_P(NonnegativeTuckerMethods, RowMajorIsTheReversedTensor) {
  const std::vector<index_t> dims = {5, 6, 4}, ranks = {3, 2, 2};
  const Tensor<double> x = random_nonnegative_model(dims, ranks, 21).full();
  const Model start = random_nonnegative_model(dims, ranks, 22);
  Model reversed_start;
  reversed_start.core = transpose<double>(start.core.view());
  reversed_start.factors.assign(start.factors.rbegin(), start.factors.rend());
  NonnegativeTuckerOptions o;
  o.ranks = ranks;
  o.method = GetParam();
  o.max_iters = 5;
  o.tol = 0.0;
  o.layout = Layout::row_major;
  const auto a = nonnegative_tucker(x, o, &start);
  o.layout = Layout::col_major;
  o.ranks.assign(ranks.rbegin(), ranks.rend());
  const auto b = nonnegative_tucker(transpose<double>(x.view()), o, &reversed_start);
  for (std::size_t k = 0; k < a.error_history.size(); ++k)
    EXPECT_NEAR(a.error_history[k], b.error_history[k], 1e-12);
  EXPECT_LT(rel_diff(transpose<double>(a.model.core.view()).values(), b.model.core.values()),
            1e-10);
}

TEST_P(NonnegativeTuckerMethods, FloatAgreesWithDouble) {
  const std::vector<index_t> dims = {6, 5, 4}, ranks = {2, 2, 2};
  const Tensor<double> x = random_nonnegative_model(dims, ranks, 31).full();
  NonnegativeTuckerOptions o;
  o.ranks = ranks;
  o.method = GetParam();
  o.max_iters = 10;
  o.tol = 0.0;
  o.init = NonnegativeTuckerInit::random;
  const auto d = nonnegative_tucker(x, o);
  const auto f = nonnegative_tucker(convert<float, double>(x.view()), o);
  for (std::size_t k = 0; k < d.error_history.size(); ++k)
    EXPECT_NEAR(f.error_history[k], d.error_history[k], 1e-4) << "iteration " << k;
}

TEST_P(NonnegativeTuckerMethods, NormalizedFactorsHaveUnitColumns) {
  const Tensor<double> x = random_nonnegative_model({6, 5, 4}, {2, 2, 2}, 41).full();
  NonnegativeTuckerOptions o;
  o.ranks = {2, 2, 2};
  o.method = GetParam();
  o.max_iters = 4;
  o.tol = 0.0;
  o.normalize_factors = true;
  const auto r = nonnegative_tucker(x, o);
  for (const Matrix<double>& f : r.model.factors) {
    const Matrix<double> g = matmul_ref(f, true, f, false);
    for (index_t j = 0; j < g.cols(); ++j) EXPECT_NEAR(g(j, j), 1.0, 1e-12);
  }
  EXPECT_NEAR(r.relative_error, true_relative_error(x, r.model), 1e-10);
}

// The active-set core is the non-negative least-squares core of the iteration's factors:
// the KKT conditions of min_{G >= 0} ||X - G x_0 U_0 ...||, gradient K g - b zero on G > 0
// and >= 0 (to the solver's tol 1e-7) on G = 0.
TEST(NonnegativeTuckerActiveSet, CoreSatisfiesTheKktConditions) {
  const std::vector<index_t> dims = {6, 5, 7}, ranks = {3, 2, 3};
  Tensor<double> x = random_nonnegative_model(dims, ranks, 51).full();
  const Tensor<double> noise = random_tensor<double>(dims, 52);
  for (index_t i = 0; i < x.numel(); ++i) x[i] = x[i] + 0.5 * noise[i];  // some entries < 0
  NonnegativeTuckerOptions o;
  o.ranks = ranks;
  o.core_solver = NonnegativeTuckerCoreSolver::active_set;
  o.core_iters = 200;
  o.tol = 0.0;
  for (Backend b : test_backends()) {
    o.backend = b;
    for (int iters : {1, 4}) {
      o.max_iters = iters;
      const auto r = nonnegative_tucker(x, o);
      std::vector<Matrix<double>> grams;
      for (const Matrix<double>& f : r.model.factors)
        grams.push_back(matmul_ref(f, true, f, false));
      const Tensor<double> est = times_all(x, transposes(r.model.factors));
      const Tensor<double> kg = times_all(r.model.core, grams);
      double scale = 0.0;
      for (index_t i = 0; i < est.numel(); ++i) scale = std::max(scale, std::abs(est[i]));
      for (index_t i = 0; i < est.numel(); ++i) {
        const double grad = kg[i] - est[i];
        if (r.model.core[i] > 0) {
          EXPECT_NEAR(grad, 0.0, 1e-9 * scale) << "entry " << i;
        } else {
          EXPECT_GE(grad, -1e-7) << "entry " << i;
        }
      }
      EXPECT_NEAR(r.relative_error, true_relative_error(x, r.model), 1e-12);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, NonnegativeTuckerMethods,
                         ::testing::Values(NonnegativeTuckerMethod::multiplicative,
                                           NonnegativeTuckerMethod::hals),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(NonnegativeTuckerBadInput, OneClearLine) {
  const Tensor<double> x = random_tensor<double>({4, 3, 5}, 70);
  const Tensor<double> before = x;
  NonnegativeTuckerOptions o;
  o.ranks = {2, 2};
  expect_error<DimensionMismatch>([&] { nonnegative_tucker(x, o); }, "ranks has 2 entries");
  o.ranks = {2, 0, 2};
  expect_error<InvalidArgument>([&] { nonnegative_tucker(x, o); },
                                "rank of mode 1 must be at least 1, got 0");
  o.ranks = {2, 4, 2};
  expect_error<InvalidArgument>([&] { nonnegative_tucker(x, o); },
                                "rank 4 of mode 1 exceeds the mode size 3");
  o.ranks = {2, 2, 2};
  o.tol = -1;
  expect_error<InvalidOption>([&] { nonnegative_tucker(x, o); }, "must be finite and >= 0");
  o.tol = std::nan("");
  expect_error<InvalidOption>([&] { nonnegative_tucker(x, o); }, "must be finite and >= 0");
  o.tol = 1e-8;
  o.max_iters = -1;
  expect_error<InvalidOption>([&] { nonnegative_tucker(x, o); }, "must be at least 0");
  o.max_iters = 3;
  Model start = random_nonnegative_model({4, 3, 5}, {2, 2, 2}, 71);
  start.factors[1](1, 0) = -0.5;
  expect_error<InvalidArgument>([&] { nonnegative_tucker(x, o, &start); },
                                "start factor 1 has a negative entry (-0.5");
  start = random_nonnegative_model({4, 3, 5}, {2, 2, 3}, 72);
  expect_error<DimensionMismatch>([&] { nonnegative_tucker(x, o, &start); }, "expected shape");
  Tensor<double> bad = x;
  bad[5] = std::nan("");
  expect_error<InvalidArgument>([&] { nonnegative_tucker(bad, o); },
                                "Non-negative Tucker input tensor");
  expect_error<InvalidArgument>([] { parse_nonnegative_tucker_method("mu"); },
                                "expected multiplicative or hals");
  // Negative entries are served (as TensorLy serves them); the input is never modified.
  const auto r = nonnegative_tucker(x, o);
  EXPECT_EQ(r.iterations, 3);
  EXPECT_EQ(x.values(), before.values());
  o.max_iters = 0;
  const auto s = nonnegative_tucker(x, o);
  EXPECT_TRUE(s.error_history.empty());
  EXPECT_NEAR(s.relative_error, true_relative_error(x, s.model), 1e-12);
}

}  // namespace
}  // namespace tenfold::test
