// Tensor train: the model's contractions against loop references, TT-SVD on every backend
// (exact recovery of low-TT-rank tensors, the eps guarantee, TensorLy's rank clipping,
// both sweep directions), the reference backend as the oracle of the cpu one, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend_test_util.hpp"
#include "core/format.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tensor_train.hpp"
#include "tucker_test_util.hpp"

namespace tenfold::test {
namespace {

/// A TT with Gaussian cores of the given ranks (N + 1 of them).
template <class T>
TensorTrain<T> random_train(const std::vector<index_t>& dims, const std::vector<index_t>& ranks,
                            std::uint64_t seed) {
  TensorTrain<T> tt;
  for (std::size_t k = 0; k < dims.size(); ++k) {
    tt.cores.push_back(random_tensor<T>({ranks[k], dims[k], ranks[k + 1]}, seed + 13 * k));
  }
  return tt;
}

/// X(i) = G_0(:, i_0, :) ... G_{N-1}(:, i_{N-1}, :), entry by entry, in double.
template <class T>
std::vector<double> full_ref(const TensorTrain<T>& tt) {
  const std::vector<index_t> dims = tt.dims();
  const index_t numel = checked_numel(dims);
  std::vector<double> x(static_cast<std::size_t>(numel));
  for (index_t lin = 0; lin < numel; ++lin) {
    std::vector<double> row(1, 1.0);  // 1 x r_k
    index_t rest = lin;
    for (const Tensor<T>& g : tt.cores) {
      const index_t i = rest % g.dim(1);
      rest /= g.dim(1);
      std::vector<double> next(static_cast<std::size_t>(g.dim(2)), 0.0);
      for (index_t b = 0; b < g.dim(2); ++b)
        for (index_t a = 0; a < g.dim(0); ++a)
          next[static_cast<std::size_t>(b)] += row[static_cast<std::size_t>(a)] * g(a, i, b);
      row = next;
    }
    x[static_cast<std::size_t>(lin)] = row[0];
  }
  return x;
}

double dot_ref(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

template <class T>
class TensorTrainTyped : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TensorTrainTyped, Precisions);

const std::vector<std::vector<index_t>> kShapes = {
    {5, 4}, {3, 1, 4}, {4, 3, 5}, {2, 3, 1, 4}, {3, 2, 2, 1, 3}};

// --- the model ------------------------------------------------------------------

TYPED_TEST(TensorTrainTyped, ContractionsMatchReference) {
  using T = TypeParam;
  std::uint64_t seed = 1;
  for (const auto& dims : kShapes) {
    std::vector<index_t> ranks(dims.size() + 1, 3), other(dims.size() + 1, 2);
    ranks.front() = ranks.back() = other.front() = other.back() = 1;
    const TensorTrain<T> a = random_train<T>(dims, ranks, seed++);
    const TensorTrain<T> b = random_train<T>(dims, other, seed++);
    const std::vector<double> fa = full_ref(a), fb = full_ref(b);
    const Tensor<T> x = random_tensor<T>(dims, seed++);
    const std::vector<double> fx(x.values().begin(), x.values().end());
    EXPECT_EQ(a.ranks(), ranks);
    EXPECT_EQ(a.dims(), dims);
    EXPECT_LT(rel_diff(a.full().values(), fa), exact_tol<T>()) << detail::shape_string(dims);
    EXPECT_NEAR(a.norm(), std::sqrt(dot_ref(fa, fa)), exact_tol<T>() * std::sqrt(dot_ref(fa, fa)));
    const double ab = dot_ref(fa, fb), scale = std::sqrt(dot_ref(fa, fa) * dot_ref(fb, fb));
    EXPECT_NEAR(a.inner(b), ab, exact_tol<T>() * scale);
    EXPECT_NEAR(b.inner(a), ab, exact_tol<T>() * scale);
    EXPECT_NEAR(a.inner(x.view()), dot_ref(fa, fx),
                exact_tol<T>() * std::sqrt(dot_ref(fa, fa) * dot_ref(fx, fx)));
  }
}

TEST(TensorTrainModel, RefusesMalformedModels) {
  TensorTrain<double> tt = random_train<double>({3, 4, 2}, {1, 2, 3, 1}, 5);
  TensorTrain<double> broken = tt;
  broken.cores[1] = random_tensor<double>({2, 4, 2}, 6);
  expect_error<DimensionMismatch>([&] { broken.validate(); }, "the ranks do not chain");
  broken = tt;
  broken.cores[0] = random_tensor<double>({2, 3, 2}, 6);
  expect_error<InvalidArgument>([&] { broken.full(); }, "boundary ranks must be 1");
  broken = tt;
  broken.cores[2] = random_tensor<double>({3, 2}, 6);
  expect_error<InvalidArgument>([&] { broken.norm(); }, "TT core 2 has order 2");
  broken = tt;
  broken.cores[1][4] = std::nan("");
  expect_error<InvalidArgument>([&] { broken.validate(); }, "TT core 1");
  expect_error<InvalidArgument>([] { TensorTrain<double>().validate(); }, "no cores");
  const Tensor<double> x = random_tensor<double>({3, 4, 3}, 7);
  expect_error<DimensionMismatch>([&] { tt.inner(x.view()); }, "shape (3, 4, 3)");
  const TensorTrain<double> other = random_train<double>({3, 4, 3}, {1, 2, 2, 1}, 8);
  expect_error<DimensionMismatch>([&] { tt.inner(other); }, "tensor trains of shapes");
}

// --- TT-SVD -------------------------------------------------------------------

class TensorTrainSvd : public OnEachBackend {};

template <class T>
TensorTrainResult<T> run(const Tensor<T>& x, std::vector<index_t> ranks, Layout layout,
                         Backend backend) {
  TensorTrainOptions o;
  o.ranks = std::move(ranks);
  o.layout = layout;
  o.backend = backend;
  return tensor_train(x, o);
}

/// max |U^T U - I| over the unfoldings of the cores a sweep left orthonormal: (r_k I_k) x
/// r_{k+1} going forward (all but the last), r_k x (I_k r_{k+1}) backward (all but the first).
template <class T>
double orthonormality_defect(const TensorTrain<T>& tt, Layout layout) {
  double worst = 0.0;
  const bool forward = layout == Layout::col_major;
  for (int k = forward ? 0 : 1; k < tt.order() - (forward ? 1 : 0); ++k) {
    const Tensor<T>& g = tt.cores[static_cast<std::size_t>(k)];
    const index_t rows = forward ? g.dim(0) * g.dim(1) : g.dim(0);
    const index_t cols = forward ? g.dim(2) : g.dim(1) * g.dim(2);
    const Matrix<T> m(rows, cols, g.values());
    const Matrix<double> gram =
        forward ? matmul_ref(m, true, m, false) : matmul_ref(m, false, m, true);
    for (index_t j = 0; j < gram.cols(); ++j)
      for (index_t i = 0; i < gram.rows(); ++i)
        worst = std::max(worst, std::abs(gram(i, j) - (i == j ? 1.0 : 0.0)));
  }
  return worst;
}

template <class T>
void expect_exact_recovery(Backend backend) {
  // Wide and tall unfoldings (the 40-mode in the middle, size-1 and size-2 modes).
  const std::vector<std::pair<std::vector<index_t>, std::vector<index_t>>> cases = {
      {{4, 5, 6, 3}, {1, 2, 3, 2, 1}},
      {{2, 3, 40, 2}, {1, 2, 3, 2, 1}},
      {{6, 1, 5}, {1, 3, 3, 1}},
      {{7, 9}, {1, 4, 1}}};
  std::uint64_t seed = 20;
  for (const auto& [dims, ranks] : cases) {
    const Tensor<T> x = random_train<T>(dims, ranks, seed++).full();
    const Tensor<T> before = x;
    for (Layout layout : {Layout::col_major, Layout::row_major}) {
      const TensorTrainResult<T> r = run(x, ranks, layout, backend);
      EXPECT_EQ(r.model.ranks(), ranks) << detail::shape_string(dims);
      EXPECT_LT(rel_diff(r.model.full().values(), x.values()), exact_tol<T>())
          << detail::shape_string(dims);
      EXPECT_LT(r.relative_error, 16 * exact_tol<T>()) << detail::shape_string(dims);
      EXPECT_LT(orthonormality_defect(r.model, layout), 10 * exact_tol<T>())
          << detail::shape_string(dims);
      EXPECT_EQ(r.singular_values.size(), dims.size() - 1);
    }
    EXPECT_EQ(x.values(), before.values()) << "input modified";
  }
}

TEST_P(TensorTrainSvd, RecoversExactLowRankTrainsInDouble) {
  expect_exact_recovery<double>(backend());
}
TEST_P(TensorTrainSvd, RecoversExactLowRankTrainsInFloat) {
  expect_exact_recovery<float>(backend());
}

TEST_P(TensorTrainSvd, EpsBoundHoldsAndReportedErrorIsTrue) {
  const Tensor<double> x = random_cp<double>({6, 7, 5, 4}, 3, 0.05, 31);
  for (double eps : {0.02, 0.1, 0.5}) {
    for (Layout layout : {Layout::col_major, Layout::row_major}) {
      TensorTrainOptions o;
      o.eps = eps;
      o.layout = layout;
      o.backend = backend();
      const TensorTrainResult<double> r = tensor_train(x, o);
      const double truth = rel_diff(r.model.full().values(), x.values());
      EXPECT_LE(truth, eps) << "eps " << eps;
      EXPECT_NEAR(r.relative_error, truth, 1e-7) << "eps " << eps;
      // The fewest vectors: one fewer at any bond would discard more than the budget.
      const double budget = eps * eps * std::pow(norm<double>(x.view()), 2) / 3;
      for (std::size_t k = 0; k < r.singular_values.size(); ++k) {
        const std::vector<double>& s = r.singular_values[k];
        const std::size_t bond = layout == Layout::col_major ? k + 1 : 3 - k;
        const auto kept = static_cast<std::size_t>(r.model.ranks()[bond]);
        double discarded = 0.0;
        for (std::size_t i = kept - 1; i < s.size(); ++i) discarded += s[i] * s[i];
        EXPECT_TRUE(kept == 1 || discarded > budget) << "bond " << bond;
      }
    }
  }
}

TEST_P(TensorTrainSvd, ClipsRanksAsTensorLy) {
  // TensorLy's test: shape (3, 4, 5, 6, 2, 10), ranks (1, 5, 4, 3, 8, 10, 1): bond k keeps
  // min(r_k, r_{k-1} I_{k-1}, prod_{m >= k} I_m).
  const Tensor<double> x = random_tensor<double>({3, 4, 5, 6, 2, 10}, 41);
  const TensorTrainResult<double> r = run(x, {1, 5, 4, 3, 8, 10, 1}, Layout::col_major, backend());
  EXPECT_EQ(r.model.ranks(), (std::vector<index_t>{1, 3, 4, 3, 8, 10, 1}));
  const TensorTrainResult<double> b = run(x, {1, 5, 4, 3, 8, 10, 1}, Layout::row_major, backend());
  EXPECT_EQ(b.model.ranks(), (std::vector<index_t>{1, 3, 4, 3, 8, 10, 1}));
  // Full ranks: exact.
  const TensorTrainResult<double> f =
      run(x, {1, 1000, 1000, 1000, 1000, 1000, 1}, Layout::col_major, backend());
  EXPECT_LT(rel_diff(f.model.full().values(), x.values()), 1e-12);
}

TEST_P(TensorTrainSvd, FarFromMagnitudeOne) {
  Tensor<double> x = random_train<double>({4, 5, 3}, {1, 2, 2, 1}, 50).full();
  const std::vector<double> plain = x.values();
  for (double& v : x.values()) v *= 1e-200;
  const TensorTrainResult<double> r = run(x, {1, 2, 2, 1}, Layout::col_major, backend());
  std::vector<double> back = r.model.full().values();
  for (double& v : back) v *= 1e200;
  EXPECT_LT(rel_diff(back, plain), 1e-12);
  const double s0 =
      run(Tensor<double>({4, 5, 3}, plain), {1, 2, 2, 1}, Layout::col_major, backend())
          .singular_values[0][0];
  EXPECT_NEAR(r.singular_values[0][0] * 1e200, s0, 1e-12 * s0);
}

// The cpu backend against the reference backend: the same cores (signs fixed alike).
TEST(TensorTrainBackends, CpuMatchesReference) {
  const Tensor<double> x = random_cp<double>({8, 7, 9, 6}, 4, 0.1, 60);
  for (Layout layout : {Layout::col_major, Layout::row_major}) {
    for (Backend b : compared_backends()) {
      const auto want = run(x, {1, 3, 5, 3, 1}, layout, Backend::reference);
      const auto got = run(x, {1, 3, 5, 3, 1}, layout, b);
      for (std::size_t k = 0; k < want.model.cores.size(); ++k) {
        EXPECT_LT(rel_diff(got.model.cores[k].values(), want.model.cores[k].values()), 1e-9)
            << "core " << k;
      }
      EXPECT_NEAR(got.relative_error, want.relative_error, 1e-12);
    }
  }
}

TEST(TensorTrainBadInput, OneClearLine) {
  const Tensor<double> x = random_tensor<double>({3, 4, 5}, 70);
  auto with = [&](std::vector<index_t> ranks, std::optional<double> eps) {
    TensorTrainOptions o;
    o.ranks = std::move(ranks);
    o.eps = eps;
    return [&x, o] { tensor_train(x, o); };
  };
  expect_error<DimensionMismatch>(with({1, 2, 1}, {}), "ranks has 3 entries");
  expect_error<InvalidArgument>(with({1, 0, 2, 1}, {}), "TT rank r_1 must be at least 1, got 0");
  expect_error<InvalidArgument>(with({1, 2, -3, 1}, {}), "TT rank r_2 must be at least 1, got -3");
  expect_error<InvalidArgument>(with({2, 2, 2, 1}, {}), "start and end with 1");
  expect_error<InvalidArgument>(with({1, 2, 2, 1}, 0.1), "not both");
  expect_error<InvalidArgument>(with({}, {}), "needs either ranks");
  for (double eps : {0.0, 1.0, -0.5, std::nan("")}) {
    expect_error<InvalidOption>(with({}, eps), "must be in (0, 1)");
  }
  Tensor<double> bad = x;
  bad[7] = std::numeric_limits<double>::infinity();
  TensorTrainOptions o;
  o.ranks = {1, 2, 2, 1};
  expect_error<InvalidArgument>([&] { tensor_train(bad, o); }, "Tensor train input tensor");
  const Tensor<double> vector({5});
  o.ranks = {1, 1};
  expect_error<InvalidArgument>([&] { tensor_train(vector, o); }, "Tensor train");
  // Huge ranks are clipped, never allocated.
  o.ranks = {1, std::numeric_limits<index_t>::max(), std::numeric_limits<index_t>::max(), 1};
  EXPECT_EQ(tensor_train(x, o).model.ranks(), (std::vector<index_t>{1, 3, 5, 1}));
}

TENFOLD_ON_EACH_BACKEND(TensorTrainSvd);

}  // namespace
}  // namespace tenfold::test
