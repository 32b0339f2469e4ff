// Tucker: mode-product kernels against loop references, the Tucker model, the
// three algorithms (exact recovery, the eps guarantee, HOOI vs ST-HOSVD vs HOSVD),
// CP-ALS through a Tucker model, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_test_util.hpp"
#include "core/multilinear.hpp"
#include "cp/dense_operand.hpp"
#include "tenfold/error.hpp"
#include "tenfold/ktensor.hpp"
#include "cp/tucker_operand.hpp"
#include "tucker_test_util.hpp"

namespace tenfold::test {
namespace {

using detail::Op;

template <class T>
double tol() {
  return std::is_same_v<T, double> ? 1e-12 : 1e-5;
}

// Kernels and models in both precisions, on the cpu backend.
template <class T>
class TuckerTyped : public ::testing::Test {
 protected:
  detail::Compute<T>& cpu() { return *cpu_; }

 private:
  std::unique_ptr<detail::Compute<T>> cpu_ = detail::make_compute<T>(Backend::cpu);
};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TuckerTyped, Precisions);

const std::vector<std::vector<index_t>> kShapes = {
    {5, 4}, {1, 6}, {3, 1, 4}, {4, 3, 5}, {2, 3, 1, 4}, {3, 2, 2, 1, 3}, {1, 1, 1}};

// --- kernels ----------------------------------------------------------------

TYPED_TEST(TuckerTyped, TtmMatchesReference) {
  using T = TypeParam;
  std::uint64_t seed = 1;
  for (const auto& dims : kShapes) {
    const Tensor<T> x = random_tensor<T>(dims, seed++);
    for (int n = 0; n < x.order(); ++n) {
      const index_t in = x.dim(n);
      for (index_t j : {index_t{1}, index_t{3}, in + 1}) {
        const Matrix<T> a = random_matrix<T>(j, in, seed++);  // op(U), j x I_n
        const Tensor<T> want = ttm_ref(x, n, a);
        for (Op op : {Op::none, Op::trans}) {
          // U stored with two rows of padding: j x I_n (none) or I_n x j (trans).
          const index_t rows = op == Op::none ? j : in, cols = op == Op::none ? in : j;
          const index_t ldu = rows + 2;
          std::vector<T> u(static_cast<std::size_t>(ldu * cols), T(99));
          for (index_t q = 0; q < cols; ++q)
            for (index_t p = 0; p < rows; ++p)
              u[static_cast<std::size_t>(p + q * ldu)] = op == Op::none ? a(p, q) : a(q, p);
          std::vector<T> y(static_cast<std::size_t>(want.numel()));
          detail::ttm(this->cpu(), x.data(), x.dims(), n, op, u.data(), ldu, j, y.data());
          EXPECT_LT(rel_diff(y, want.values()), tol<T>())
              << "mode " << n << " of order " << x.order() << ", j " << j;
        }
      }
    }
  }
}

TYPED_TEST(TuckerTyped, ModeGramMatchesReference) {
  using T = TypeParam;
  std::uint64_t seed = 50;
  for (const auto& dims : kShapes) {
    const Tensor<T> x = random_tensor<T>(dims, seed++);
    const Tensor<T> y = random_tensor<T>(dims, seed++);
    for (int n = 0; n < x.order(); ++n) {
      const index_t in = x.dim(n);
      const Matrix<double> xn = unfold_ref(x, n), yn = unfold_ref(y, n);
      const Matrix<double> gram = matmul_ref(xn, false, xn, true);
      const Matrix<double> cross = matmul_ref(xn, false, yn, true);
      std::vector<T> out(static_cast<std::size_t>(in * in), T(7));
      detail::mode_gram(this->cpu(), x.data(), x.dims(), n, out.data());
      EXPECT_LT(rel_diff(out, gram.values()), tol<T>()) << "Gram of mode " << n;
      detail::mode_gram(this->cpu(), x.data(), x.dims(), n, out.data(), y.data());
      EXPECT_LT(rel_diff(out, cross.values()), tol<T>()) << "cross Gram of mode " << n;
    }
  }
}

TYPED_TEST(TuckerTyped, TtmChainAppliesEveryProduct) {
  using T = TypeParam;
  const Tensor<T> x = random_tensor<T>({5, 6, 4, 3}, 3);
  // Shrink two modes, grow one, leave one: the chain reorders but must not change the result.
  const Matrix<T> a0 = random_matrix<T>(2, 5, 4), a2 = random_matrix<T>(7, 4, 5);
  const Matrix<T> a3 = random_matrix<T>(1, 3, 6);
  const Tensor<T> want = ttm_ref(ttm_ref(ttm_ref(x, 0, a0), 2, a2), 3, a3);
  std::vector<detail::ModeProduct<T>> products = {{2, Op::none, a2.data(), 7, 7},
                                                  {0, Op::none, a0.data(), 2, 2},
                                                  {3, Op::none, a3.data(), 1, 1}};
  detail::Buffer<T> w0, w1;
  std::vector<index_t> shape = x.dims();
  const T* y = detail::ttm_chain<T>(this->cpu(), x.data(), shape, products, w0, w1);
  EXPECT_EQ(shape, want.dims());
  EXPECT_LT(rel_diff(std::vector<T>(y, y + want.numel()), want.values()), tol<T>());
  shape = x.dims();
  EXPECT_EQ(detail::ttm_chain<T>(this->cpu(), x.data(), shape, {}, w0, w1), x.data());
}

// The dense CP operand on the same shapes (size-1 modes included), against the
// definition M(i_n, r) = sum over all entries of x(i) prod_{m != n} A_m(i_m, r).
TYPED_TEST(TuckerTyped, DenseMttkrpMatchesReference) {
  using T = TypeParam;
  std::uint64_t seed = 80;
  for (std::vector<index_t> dims : kShapes) {
    dims.push_back(2);  // order 3 to 6, so both blocks of the dimension tree are exercised
    const Tensor<T> x = random_tensor<T>(dims, seed++);
    const index_t rank = 3;
    std::vector<Matrix<T>> a;
    std::vector<const T*> ptrs;
    for (index_t d : dims) {
      a.push_back(random_matrix<T>(d, rank, seed++));
      ptrs.push_back(a.back().data());
    }
    detail::DenseOperand<T> op(this->cpu(), x.view());
    for (int n = 0; n < x.order(); ++n) {
      Matrix<double> want(x.dim(n), rank);
      for (index_t lin = 0; lin < x.numel(); ++lin) {
        for (index_t r = 0; r < rank; ++r) {
          double p = x[lin];
          index_t rest = lin, in = 0;
          for (int m = 0; m < x.order(); ++m) {
            const index_t i = rest % x.dim(m);
            rest /= x.dim(m);
            if (m == n) {
              in = i;
            } else {
              p *= a[static_cast<std::size_t>(m)](i, r);
            }
          }
          want(in, r) += p;
        }
      }
      std::vector<T> got(static_cast<std::size_t>(want.size()));
      op.mttkrp(n, ptrs, rank, got.data());
      EXPECT_LT(rel_diff(got, want.values()), tol<T>())
          << "mode " << n << " of shape " << ::testing::PrintToString(dims);
    }
  }
}

// --- the Tucker model --------------------------------------------------------

TYPED_TEST(TuckerTyped, TTensorFullNormInner) {
  using T = TypeParam;
  const TTensor<T> m = random_ttensor<T>({6, 5, 4, 3}, {3, 2, 4, 2}, 7);
  Tensor<T> want = m.core;
  for (int n = 0; n < m.order(); ++n)
    want = ttm_ref(want, n, m.factors[static_cast<std::size_t>(n)]);
  const Tensor<T> full = m.full();
  EXPECT_EQ(full.dims(), m.dims());
  EXPECT_EQ(m.ranks(), (std::vector<index_t>{3, 2, 4, 2}));
  EXPECT_LT(rel_diff(full.values(), want.values()), tol<T>());
  // The factors are not orthonormal: ||X|| != ||G||.
  const double nx = norm<T>(want.view());
  EXPECT_NEAR(m.norm(), nx, tol<T>() * nx);
  const Tensor<T> y = random_tensor<T>(m.dims(), 8);
  double dot = 0.0;
  for (index_t i = 0; i < y.numel(); ++i) dot += static_cast<double>(y[i]) * want[i];
  EXPECT_NEAR(m.inner(y.view()), dot, tol<T>() * nx * norm<T>(y.view()));
}

TEST(TuckerModel, ValidateNamesTheProblem) {
  TTensor<double> m = random_ttensor<double>({4, 3, 2}, {2, 2, 1}, 9);
  m.factors[1] = Matrix<double>(3, 3);
  expect_error<DimensionMismatch>([&] { m.validate(); }, "factor 1 has 3 columns");
  m = random_ttensor<double>({4, 3, 2}, {2, 2, 1}, 9);
  m.factors.pop_back();
  expect_error<DimensionMismatch>([&] { m.validate(); }, "2 factors, but its core has order 3");
  m = random_ttensor<double>({4, 3, 2}, {2, 2, 1}, 9);
  m.core[1] = std::numeric_limits<double>::quiet_NaN();
  expect_error<InvalidArgument>([&] { m.validate(); }, "NaN");
  expect_error<InvalidArgument>([] { TTensor<double>().validate(); }, "no factor");
  m = random_ttensor<double>({4, 3, 2}, {2, 2, 1}, 9);
  expect_error<DimensionMismatch>(
      [&] {
        m.inner(random_tensor<double>({4, 3, 3}, 1).view());
      },
      "(4, 3, 3)");
}

// --- exact multilinear rank ---------------------------------------------------

TYPED_TEST(TuckerTyped, RecoversExactMultilinearRank) {
  using T = TypeParam;
  const std::vector<std::pair<std::vector<index_t>, std::vector<index_t>>> cases = {
      {{10, 7}, {3, 3}}, {{12, 10, 8}, {3, 4, 2}}, {{7, 6, 5, 4}, {2, 3, 2, 1}}};
  std::uint64_t seed = 20;
  for (const auto& [dims, ranks] : cases) {
    const Tensor<T> x = random_ttensor<T>(dims, ranks, seed++).full();
    for (TuckerMethod method : {TuckerMethod::sthosvd, TuckerMethod::hosvd, TuckerMethod::hooi}) {
      TuckerOptions o;
      o.method = method;
      o.ranks = ranks;
      const TuckerResult<T> r = tucker(x, o);
      const std::string what =
          std::string(to_string(method)) + " order " + std::to_string(dims.size());
      EXPECT_EQ(r.model.ranks(), ranks) << what;
      EXPECT_LT(true_relative_error(x, r.model), tol<T>()) << what;
      EXPECT_LT(orthonormality_defect(r.model), tol<T>()) << what;
      // Reported error: from the residual below sqrt(epsilon), as exact as the true one.
      EXPECT_LT(r.relative_error, tol<T>()) << what;
      // The eigenvalues past the rank are round-off.
      for (std::size_t n = 0; n < dims.size(); ++n) {
        const auto& lam = r.eigenvalues[n];
        ASSERT_EQ(static_cast<index_t>(lam.size()), dims[n]);
        EXPECT_TRUE(std::is_sorted(lam.rbegin(), lam.rend())) << what;
        EXPECT_LT(lam[static_cast<std::size_t>(ranks[n])], tol<T>() * lam[0]) << what;
      }
    }
    if constexpr (std::is_same_v<T, double>) {
      // A tiny tolerance finds the ranks.
      TuckerOptions o;
      o.eps = 1e-6;
      EXPECT_EQ(tucker(x, o).model.ranks(), ranks);
    }
  }
}

// --- errors and ranks below sqrt(epsilon) ------------------------------------------

TYPED_TEST(TuckerTyped, TinyEpsFindsTheSmallestRanksAndReportsTheTrueError) {
  using T = TypeParam;
  // x(i, j, k) = i + 3 j + 12 k (np.arange(60.).reshape(3, 4, 5) in Fortran order) has
  // multilinear rank (2, 2, 2) exactly. The eps budget lies far below the accuracy of the
  // Gram eigenvalues (about epsilon ||X||^2), which kept round-off as rank: (3, 3, 4).
  Tensor<T> x({3, 4, 5});
  for (index_t i = 0; i < x.numel(); ++i) x[i] = static_cast<T>(i);
  const double eps = std::is_same_v<T, double> ? 1e-10 : 1e-5;
  for (TuckerMethod method : {TuckerMethod::sthosvd, TuckerMethod::hosvd, TuckerMethod::hooi}) {
    TuckerOptions o;
    o.method = method;
    o.eps = eps;
    const TuckerResult<T> r = tucker(x, o);
    const std::string what(to_string(method));
    EXPECT_EQ(r.model.ranks(), (std::vector<index_t>{2, 2, 2})) << what;
    EXPECT_LE(r.relative_error, eps) << what;
    EXPECT_NEAR(r.relative_error, true_relative_error(x, r.model),
                100 * std::numeric_limits<T>::epsilon())
        << what;
  }
}

TEST(TuckerErrors, ReportedErrorIsAccurateFarBelowSqrtEpsilon) {
  // A multilinear rank (2, 2, 2) tensor plus noise of relative norm 1e-10: the error of
  // the rank (2, 2, 2) model is about 1e-10, which sqrt(||X||^2 - ||G||^2) cannot resolve
  // (its round-off is about 1e-8).
  Tensor<double> x = random_ttensor<double>({8, 7, 6}, {2, 2, 2}, 40).full();
  const Tensor<double> noise = random_tensor<double>({8, 7, 6}, 41);
  const double scale = 1e-10 * norm<double>(x.view()) / norm<double>(noise.view());
  for (index_t i = 0; i < x.numel(); ++i) x[i] += scale * noise[i];
  for (TuckerMethod method : {TuckerMethod::sthosvd, TuckerMethod::hosvd, TuckerMethod::hooi}) {
    TuckerOptions o;
    o.method = method;
    o.ranks = {2, 2, 2};
    const TuckerResult<double> r = tucker(x, o);
    const double truth = true_relative_error(x, r.model);
    EXPECT_GT(truth, 1e-11) << to_string(method);
    EXPECT_NEAR(r.relative_error, truth, 1e-13) << to_string(method);
  }
}

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

// --- CP through a Tucker model --------------------------------------------------------

// The Tucker operand gives what a dense operand on the formed tensor gives.
TYPED_TEST(TuckerTyped, TuckerOperandMatchesDense) {
  using T = TypeParam;
  for (const auto& [dims, ranks] :
       std::vector<std::pair<std::vector<index_t>, std::vector<index_t>>>{
           {{6, 5}, {3, 2}}, {{6, 5, 4}, {3, 2, 4}}, {{5, 4, 3, 4}, {2, 3, 1, 2}}}) {
    const TTensor<T> m = random_ttensor<T>(dims, ranks, 900);  // not orthonormal
    const Tensor<T> x = m.full();
    detail::TuckerOperand<T> tucker_op(this->cpu(), m);
    detail::DenseOperand<T> dense_op(this->cpu(), x.view());
    EXPECT_NEAR(tucker_op.norm_squared(), dense_op.norm_squared(),
                tol<T>() * dense_op.norm_squared());
    const index_t rank = 3;
    std::vector<Matrix<T>> a;
    std::vector<const T*> ptrs;
    for (std::size_t n = 0; n < dims.size(); ++n) {
      a.push_back(random_matrix<T>(dims[n], rank, 910 + n));
      ptrs.push_back(a.back().data());
    }
    for (int sweep = 0; sweep < 2; ++sweep) {
      for (int n = 0; n < static_cast<int>(dims.size()); ++n) {
        const index_t in = dims[static_cast<std::size_t>(n)];
        std::vector<T> got(static_cast<std::size_t>(in * rank)), want(got.size());
        tucker_op.mttkrp(n, ptrs, rank, got.data());
        dense_op.mttkrp(n, ptrs, rank, want.data());
        EXPECT_LT(rel_diff(got, want), tol<T>()) << "mttkrp mode " << n;
        // Change factor n as ALS would, and say so.
        for (T& v : a[static_cast<std::size_t>(n)].values()) v = static_cast<T>(v * 0.5 + 0.25);
        tucker_op.factor_changed(n);
        dense_op.factor_changed(n);
        std::vector<T> g(static_cast<std::size_t>(in * in)), h(g.size());
        tucker_op.mode_gram(n, g.data());
        dense_op.mode_gram(n, h.data());
        EXPECT_LT(rel_diff(g, h), tol<T>()) << "mode Gram " << n;
      }
    }
  }
}

// CP on a lossless Tucker compression follows CP on the tensor itself.
class TuckerThenCp : public OnEachBackend {
 protected:
  // Tucker of x at the given ranks (ST-HOSVD) on the backend under test.
  TuckerResult<double> compress(const Tensor<double>& x, std::vector<index_t> ranks) const {
    TuckerOptions o;
    o.backend = backend();
    o.ranks = std::move(ranks);
    return tucker(x, o);
  }
};

TEST_P(TuckerThenCp, LosslessCompressionGivesTheSameFit) {
  const Tensor<double> x = random_cp<double>({20, 16, 12}, 4, 0.0, 1000);
  const TuckerResult<double> t = compress(x, {4, 4, 4});
  ASSERT_LT(true_relative_error(x, t.model), 1e-12);
  for (CpInit init : {CpInit::random, CpInit::nvecs}) {
    CpOptions co;
    co.backend = backend();
    co.rank = 2;  // below the true rank: an inexact fit
    co.init = init;
    co.seed = 3;
    co.tol = 1e-10;
    co.max_iters = 200;
    const CpResult<double> on_full = cp_als(x, co);
    const CpResult<double> on_tucker = cp_als(t.model, co);
    EXPECT_GT(on_full.relative_error, 0.01);
    EXPECT_NEAR(on_tucker.fit, on_full.fit, 1e-9) << to_string(init);
    // The fit it reports is the fit of X itself.
    EXPECT_NEAR(1.0 - rel_diff(on_tucker.model.full().values(), x.values()), on_full.fit, 1e-9)
        << to_string(init);
    EXPECT_LT(rel_diff(on_tucker.model.full().values(), on_full.model.full().values()), 1e-7)
        << to_string(init);
  }
}

// A lossy compression: CP fits the Tucker approximation X^, and since the CP model lies
// in the Tucker subspaces, ||X - M||^2 = ||X - X^||^2 + ||X^ - M||^2.
TEST_P(TuckerThenCp, LossyCompressionIsCloseAndErrorsAddUp) {
  const Tensor<double> x = random_cp<double>({30, 25, 20}, 3, 0.05, 1100);
  const TuckerResult<double> t = compress(x, {6, 6, 6});
  const Tensor<double> xhat = t.model.full();
  CpOptions co;
  co.backend = backend();
  co.rank = 3;
  co.tol = 1e-10;
  co.max_iters = 300;
  co.init = CpInit::nvecs;
  const CpResult<double> on_full = cp_als(x, co);
  const CpResult<double> on_tucker = cp_als(t.model, co);
  const Tensor<double> m = on_tucker.model.full();
  const double nx = norm<double>(x.view()), nxhat = norm<double>(xhat.view());
  const double e_x = rel_diff(m.values(), x.values()) * nx;          // ||X - M||
  const double e_hat = rel_diff(m.values(), xhat.values()) * nxhat;  // ||X^ - M||
  const double e_t = t.relative_error * nx;                          // ||X - X^||
  EXPECT_NEAR(on_tucker.relative_error, e_hat / nxhat, 1e-7);
  EXPECT_NEAR(e_x * e_x, e_t * e_t + e_hat * e_hat, 1e-10 * nx * nx);
  // The model moves by a fraction of the noise (5%) outside the subspaces; the fit of
  // X, stationary at the optimum, only to second order (far below 0.05^2).
  ASSERT_TRUE(on_full.converged && on_tucker.converged);
  EXPECT_LT(rel_diff(m.values(), on_full.model.full().values()), 1e-3);
  EXPECT_NEAR(1.0 - e_x / nx, on_full.fit, 1e-5);
}

TEST_P(TuckerThenCp, BadInput) {
  TTensor<double> m = random_ttensor<double>({4, 3, 2}, {2, 2, 1}, 1200);
  CpOptions co;
  co.backend = backend();
  co.rank = 0;
  expect_error<InvalidArgument>([&] { cp_als(m, co); }, "rank must be at least 1, got 0");
  co.rank = 2;
  m.factors[2] = Matrix<double>(2, 2);
  expect_error<DimensionMismatch>([&] { cp_als(m, co); }, "factor 2 has 2 columns");
}

TENFOLD_ON_EACH_BACKEND(Tucker);
TENFOLD_ON_EACH_BACKEND(TuckerThenCp);

}  // namespace
}  // namespace tenfold::test
