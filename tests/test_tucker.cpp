// Tucker in both precisions on the cpu backend: mode-product kernels against loop
// references, the Tucker model, exact recovery of a multilinear rank, errors far below
// sqrt(epsilon), and CP-ALS through a Tucker model (on each backend). The three
// algorithms on each backend are in test_tucker_algorithms.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backend_test_util.hpp"
#include "core/multilinear.hpp"
#include "cp/dense_operand.hpp"
#include "cp/tucker_operand.hpp"
#include "tenfold/error.hpp"
#include "tenfold/ktensor.hpp"
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

TENFOLD_ON_EACH_BACKEND(TuckerThenCp);

}  // namespace
}  // namespace tenfold::test
