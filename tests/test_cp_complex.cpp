// CP-ALS of complex tensors: the cpu backend's complex primitives and the dense MTTKRP
// against plain loops in std::complex<double>, planted recovery in float and double, the
// fit against the reconstruction, the arrangement of phases, and the refused options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <random>
#include <vector>

#include "core/compute.hpp"
#include "cp/dense_operand.hpp"
#include "expect_throw.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/threads.hpp"

namespace tenfold::test {
namespace {

using detail::Op;
using Z = std::complex<double>;

template <class T>
std::vector<T> random_complex(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v)
    x = T(static_cast<typename T::value_type>(u(gen)), static_cast<typename T::value_type>(u(gen)));
  return v;
}

// ||a - b|| / ||b|| in double.
template <class A, class B>
double rel_diff(const A& a, const B& b) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num += std::norm(Z(a[i]) - Z(b[i]));
    den += std::norm(Z(b[i]));
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

// A few hundred units in the last place of T's real type.
template <class T>
double tol() {
  return 300.0 * std::numeric_limits<typename T::value_type>::epsilon();
}

template <class T>
class ComplexTest : public ::testing::Test {};
using ComplexTypes = ::testing::Types<std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(ComplexTest, ComplexTypes);

// op(A)(i, j) for a column-major A with leading dimension ld (plain transpose for trans).
template <class T>
T at(Op op, const std::vector<T>& a, index_t ld, index_t i, index_t j) {
  return op == Op::none ? a[static_cast<std::size_t>(i + j * ld)]
                        : a[static_cast<std::size_t>(j + i * ld)];
}

TYPED_TEST(ComplexTest, GemmIsThePlainProductInEveryShape) {
  using T = TypeParam;
  auto c = detail::make_compute<T>(Backend::cpu);
  std::uint64_t seed = 1;
  // Small (one call), matrix-vector, and above 4e6 flops (with two or more threads)
  // blocked over C and cut along a long inner dimension.
  const index_t shapes[][3] = {{5, 4, 3}, {7, 1, 9}, {600, 40, 100}, {8, 8, 40000}};
  for (const auto& s : shapes) {
    for (Op ta : {Op::none, Op::trans}) {
      for (Op tb : {Op::none, Op::trans}) {
        const index_t m = s[0], n = s[1], k = s[2];
        const index_t lda = ta == Op::none ? m : k, ldb = tb == Op::none ? k : n;
        const auto a = random_complex<T>(static_cast<std::size_t>(m * k), ++seed);
        const auto b = random_complex<T>(static_cast<std::size_t>(k * n), ++seed);
        std::vector<T> out(static_cast<std::size_t>(m * n));
        const T alpha(0.5, -1.0);
        c->gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, T(0), out.data(), m);
        std::vector<Z> expect(out.size());
        for (index_t i = 0; i < m; ++i)
          for (index_t j = 0; j < n; ++j) {
            Z sum = 0;
            for (index_t p = 0; p < k; ++p)
              sum += Z(at(ta, a, lda, i, p)) * Z(at(tb, b, ldb, p, j));
            expect[static_cast<std::size_t>(i + j * m)] = Z(alpha) * sum;
          }
        EXPECT_LT(rel_diff(out, expect), tol<T>()) << m << "x" << n << "x" << k;
      }
    }
  }
}

TYPED_TEST(ComplexTest, SyrkIsTheConjugateGramBothWays) {
  using T = TypeParam;
  auto c = detail::make_compute<T>(Backend::cpu);
  const index_t n = 6, k = 11;
  const auto a = random_complex<T>(static_cast<std::size_t>(n * k), 7);
  for (Op op : {Op::trans, Op::none}) {
    // trans: A is k x n, C = A^T conj(A); none: A is n x k, C = A conj(A)^T = A A^H.
    const index_t lda = op == Op::trans ? k : n;
    std::vector<T> out(static_cast<std::size_t>(n * n), T(9, 9));
    c->syrk(op, n, k, T(1), a.data(), lda, T(0), out.data(), n);
    std::vector<Z> expect(out.size());
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < n; ++j) {
        Z sum = 0;
        for (index_t p = 0; p < k; ++p) {
          const T x = op == Op::trans ? a[static_cast<std::size_t>(p + i * lda)]
                                      : a[static_cast<std::size_t>(i + p * lda)];
          const T y = op == Op::trans ? a[static_cast<std::size_t>(p + j * lda)]
                                      : a[static_cast<std::size_t>(j + p * lda)];
          sum += Z(x) * std::conj(Z(y));
        }
        expect[static_cast<std::size_t>(i + j * n)] = sum;
      }
    EXPECT_LT(rel_diff(out, expect), tol<T>());
    // beta = 1 adds to C.
    std::vector<T> twice = out;
    c->syrk(op, n, k, T(1), a.data(), lda, T(1), twice.data(), n);
    for (Z& e : expect) e *= 2.0;
    EXPECT_LT(rel_diff(twice, expect), tol<T>());
  }
}

TYPED_TEST(ComplexTest, CholeskySolveAndEigensolverOfAHermitianMatrix) {
  using T = TypeParam;
  using R = typename T::value_type;
  auto c = detail::make_compute<T>(Backend::cpu);
  const index_t n = 40, m = 3000;  // n > 32: the blocked solve; m n^2 > 4e6: row blocks
  // V = G^T conj(G) + n I, Hermitian positive definite.
  const auto g = random_complex<T>(static_cast<std::size_t>(n * n), 3);
  std::vector<T> v(static_cast<std::size_t>(n * n));
  c->syrk(Op::trans, n, n, T(1), g.data(), n, T(0), v.data(), n);
  c->add_diagonal(n, v.data(), n, T(static_cast<R>(n)));
  // B V^{-1}: (B V^{-1}) V = B.
  const auto b = random_complex<T>(static_cast<std::size_t>(m * n), 4);
  std::vector<T> l = v, x = b;
  ASSERT_TRUE(c->potrf(n, l.data(), n));
  c->potrs_right(n, l.data(), n, m, x.data(), m);
  std::vector<T> back(b.size());
  c->gemm(Op::none, Op::none, m, n, n, T(1), x.data(), m, v.data(), n, T(0), back.data(), m);
  EXPECT_LT(rel_diff(back, b), tol<T>() * 10);
  // V Q = Q diag(w), w ascending and real.
  std::vector<T> q = v;
  std::vector<R> w(static_cast<std::size_t>(n));
  c->syevd(n, q.data(), n, w.data());
  EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));
  std::vector<T> vq(q.size()), qw = q;
  c->gemm(Op::none, Op::none, n, n, n, T(1), v.data(), n, q.data(), n, T(0), vq.data(), n);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) qw[static_cast<std::size_t>(i + j * n)] *= w[j];
  EXPECT_LT(rel_diff(vq, qw), tol<T>() * 10);
}

TYPED_TEST(ComplexTest, CholeskyQrWithThePlainTransposeSolve) {
  using T = TypeParam;
  auto c = detail::make_compute<T>(Backend::cpu);
  // G = U^T conj(U) = L L^H; Q = U L^{-T} has Q^H Q = I (and U = Q L^T); n > 32 and n <= 32.
  for (index_t n : {40, 5}) {
    const index_t m = 3 * n;
    const auto u = random_complex<T>(static_cast<std::size_t>(m * n), 12 + n);
    std::vector<T> l(static_cast<std::size_t>(n * n)), q = u;
    c->syrk(Op::trans, n, m, T(1), u.data(), m, T(0), l.data(), n);
    ASSERT_TRUE(c->potrf(n, l.data(), n));
    c->solve_lower_right(Op::trans, n, l.data(), n, m, q.data(), m);
    std::vector<Z> qhq(static_cast<std::size_t>(n * n)), eye(qhq.size(), 0.0);
    for (index_t i = 0; i < n; ++i) {
      eye[static_cast<std::size_t>(i + i * n)] = 1.0;
      for (index_t j = 0; j < n; ++j) {
        Z sum = 0;
        for (index_t k = 0; k < m; ++k)
          sum += std::conj(Z(q[static_cast<std::size_t>(k + i * m)])) *
                 Z(q[static_cast<std::size_t>(k + j * m)]);
        qhq[static_cast<std::size_t>(i + j * n)] = sum;
      }
    }
    EXPECT_LT(rel_diff(qhq, eye), tol<T>() * 10) << n;
    // Op::none: B L^{-1} undoes B L.
    std::vector<T> bl(q.size()), lower(l.size(), T(0));
    for (index_t j = 0; j < n; ++j)
      for (index_t i = j; i < n; ++i)
        lower[static_cast<std::size_t>(i + j * n)] = l[static_cast<std::size_t>(i + j * n)];
    c->gemm(Op::none, Op::none, m, n, n, T(1), u.data(), m, lower.data(), n, T(0), bl.data(), m);
    c->solve_lower_right(Op::none, n, l.data(), n, m, bl.data(), m);
    EXPECT_LT(rel_diff(bl, u), tol<T>() * 10) << n;
  }
}

TYPED_TEST(ComplexTest, DotIsTheRealPartOfTheInnerProduct) {
  using T = TypeParam;
  auto c = detail::make_compute<T>(Backend::cpu);
  const auto x = random_complex<T>(1000, 5), y = random_complex<T>(1000, 6);
  Z inner = 0;
  double squares = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    inner += std::conj(Z(x[i])) * Z(y[i]);
    squares += std::norm(Z(x[i]));
  }
  EXPECT_NEAR(c->dot(x.size(), x.data(), y.data()), inner.real(), 1e-12 * 1000);
  EXPECT_NEAR(c->sum_squares(x.size(), x.data()), squares, 1e-12 * 1000);
  std::vector<T> cx = x;
  c->conjugate(cx.size(), cx.data());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(cx[i], std::conj(x[i]));
}

// out(i_n, r) = sum_i x(i) prod_{m != n} conj(U_m(i_m, r)), by definition.
template <class T>
std::vector<Z> naive_conj_mttkrp(const Tensor<T>& x, const std::vector<std::vector<T>>& u,
                                 index_t r, int n) {
  const auto& dims = x.dims();
  std::vector<Z> out(static_cast<std::size_t>(dims[static_cast<std::size_t>(n)] * r), 0.0);
  std::vector<index_t> idx(dims.size(), 0);
  for (index_t lin = 0; lin < x.numel(); ++lin) {
    index_t rest = lin;
    for (std::size_t m = 0; m < dims.size(); ++m) {
      idx[m] = rest % dims[m];
      rest /= dims[m];
    }
    for (index_t q = 0; q < r; ++q) {
      Z p = Z(x[lin]);
      for (std::size_t m = 0; m < dims.size(); ++m)
        if (static_cast<int>(m) != n)
          p *= std::conj(Z(u[m][static_cast<std::size_t>(idx[m] + q * dims[m])]));
      out[static_cast<std::size_t>(idx[static_cast<std::size_t>(n)] +
                                   q * dims[static_cast<std::size_t>(n)])] += p;
    }
  }
  return out;
}

TYPED_TEST(ComplexTest, DenseMttkrpConjugatesTheKhatriRaoProduct) {
  using T = TypeParam;
  auto c = detail::make_compute<T>(Backend::cpu);
  const index_t r = 3;
  for (const std::vector<index_t>& dims :
       {std::vector<index_t>{5, 4, 3}, std::vector<index_t>{4, 3, 2, 5},
        std::vector<index_t>{6, 7}}) {
    Tensor<T> x(dims);
    const auto values = random_complex<T>(static_cast<std::size_t>(x.numel()), 11);
    std::copy(values.begin(), values.end(), x.data());
    std::vector<std::vector<T>> u;
    std::vector<const T*> ptrs;
    for (std::size_t m = 0; m < dims.size(); ++m)
      u.push_back(random_complex<T>(static_cast<std::size_t>(dims[m] * r), 20 + m));
    for (auto& f : u) ptrs.push_back(f.data());
    detail::DenseOperand<T> op(*c, x.view());
    // Every mode twice (the second from the cached partial contraction).
    for (int pass = 0; pass < 2; ++pass) {
      for (int n = 0; n < static_cast<int>(dims.size()); ++n) {
        std::vector<T> out(static_cast<std::size_t>(dims[static_cast<std::size_t>(n)] * r));
        op.mttkrp(n, ptrs, r, out.data());
        EXPECT_LT(rel_diff(out, naive_conj_mttkrp(x, u, r, n)), tol<T>()) << "mode " << n;
      }
    }
  }
}

// A planted complex model (weights 1..R, factor entries uniform in the unit square).
template <class T>
KTensor<T> planted(const std::vector<index_t>& dims, index_t r, std::uint64_t seed) {
  KTensor<T> k;
  for (index_t j = 0; j < r; ++j) k.weights.push_back(T(static_cast<double>(j + 1)));
  for (std::size_t m = 0; m < dims.size(); ++m) {
    const auto v = random_complex<T>(static_cast<std::size_t>(dims[m] * r), seed + m);
    k.factors.emplace_back(dims[m], r, v);
  }
  return k;
}

// ||X - full(model)|| / ||X|| from the dense reconstruction, in double.
template <class T>
double exact_error(const Tensor<T>& x, const KTensor<T>& model) {
  const Tensor<T> m = model.full();
  double num = 0.0, den = 0.0;
  for (index_t i = 0; i < x.numel(); ++i) {
    num += std::norm(Z(x[i]) - Z(m[i]));
    den += std::norm(Z(x[i]));
  }
  return std::sqrt(num / den);
}

// max over true components of the best |congruence| product over modes (1 = recovered up to
// phase and scale): prod_n |a_n^H b_n| / (|a_n| |b_n|).
template <class T>
double worst_match(const KTensor<T>& truth, const KTensor<T>& model) {
  double worst = 1.0;
  for (index_t j = 0; j < truth.rank(); ++j) {
    double best = 0.0;
    for (index_t q = 0; q < model.rank(); ++q) {
      double score = 1.0;
      for (int n = 0; n < truth.order(); ++n) {
        const Matrix<T>& a = truth.factors[static_cast<std::size_t>(n)];
        const Matrix<T>& b = model.factors[static_cast<std::size_t>(n)];
        Z ip = 0;
        double na = 0.0, nb = 0.0;
        for (index_t i = 0; i < a.rows(); ++i) {
          ip += std::conj(Z(a(i, j))) * Z(b(i, q));
          na += std::norm(Z(a(i, j)));
          nb += std::norm(Z(b(i, q)));
        }
        score *= std::abs(ip) / std::sqrt(na * nb);
      }
      best = std::max(best, score);
    }
    worst = std::min(worst, best);
  }
  return worst;
}

TYPED_TEST(ComplexTest, RecoversAPlantedModel) {
  using T = TypeParam;
  const bool is_float = std::is_same_v<T, std::complex<float>>;
  for (const std::vector<index_t>& dims :
       {std::vector<index_t>{10, 9, 8}, std::vector<index_t>{6, 5, 4, 7}}) {
    const KTensor<T> truth = planted<T>(dims, 3, 100);
    const Tensor<T> x = truth.full();
    for (CpInit init : {CpInit::nvecs, CpInit::random}) {
      CpOptions o;
      o.rank = 3;
      o.init = init;
      o.max_iters = 500;
      o.tol = is_float ? 1e-7 : 1e-12;
      o.n_starts = init == CpInit::random ? 3 : 1;
      const CpResult<T> res = cp_als(x, o);
      const double err = exact_error(x, res.model);
      EXPECT_LT(err, is_float ? 1e-3 : 1e-6) << to_string(init);
      // The reported fit is the fit of the returned model.
      EXPECT_NEAR(res.relative_error, err, is_float ? 1e-3 : 1e-7);
      EXPECT_GT(worst_match(truth, res.model), is_float ? 0.999 : 1.0 - 1e-8);
      // Weights real, positive, descending.
      for (std::size_t j = 0; j < res.model.weights.size(); ++j) {
        EXPECT_EQ(res.model.weights[j].imag(), 0);
        EXPECT_GT(res.model.weights[j].real(), 0);
        if (j > 0) EXPECT_LE(res.model.weights[j].real(), res.model.weights[j - 1].real());
      }
    }
  }
}

TYPED_TEST(ComplexTest, RowMajorLayoutFitsTheModelCopiedOrInPlace) {
  using T = TypeParam;
  const bool is_float = std::is_same_v<T, std::complex<float>>;
  const KTensor<T> truth = planted<T>({7, 6, 5}, 2, 300);
  const Tensor<T> x = truth.full();  // a C-order (5, 6, 7) array seen reversed
  for (RowMajorInput input : {RowMajorInput::copy, RowMajorInput::in_place}) {
    CpOptions o;
    o.rank = 2;
    o.max_iters = 300;
    o.tol = 1e-12;
    o.layout = Layout::row_major;
    o.row_major_input = input;
    const CpResult<T> res = cp_als(x, o);
    ASSERT_EQ(res.model.factors[0].rows(), 7);  // the input's mode order
    EXPECT_LT(exact_error(x, res.model), is_float ? 1e-3 : 1e-6);
  }
}

TYPED_TEST(ComplexTest, ArrangementPutsEachColumnsPhaseIntoOneMode) {
  using T = TypeParam;
  const KTensor<T> truth = planted<T>({8, 7, 6}, 2, 400);
  const Tensor<T> x = truth.full();
  CpOptions o;
  o.rank = 2;
  o.tol = 1e-12;
  o.max_iters = 300;
  const CpResult<T> res = cp_als(x, o);
  const double eps = 100.0 * std::numeric_limits<typename T::value_type>::epsilon();
  for (index_t j = 0; j < 2; ++j) {
    // The largest entry of column j in each mode, and the mode where it is smallest.
    std::vector<T> peaks;
    for (const Matrix<T>& f : res.model.factors) {
      index_t imax = 0;
      for (index_t i = 1; i < f.rows(); ++i)
        if (std::abs(f(i, j)) > std::abs(f(imax, j))) imax = i;
      peaks.push_back(f(imax, j));
    }
    const auto keep = std::min_element(peaks.begin(), peaks.end(),
                                       [](T a, T b) { return std::abs(a) < std::abs(b); }) -
                      peaks.begin();
    // Real and positive in every other mode.
    for (std::size_t n = 0; n < peaks.size(); ++n) {
      if (static_cast<std::ptrdiff_t>(n) == keep) continue;
      EXPECT_GT(peaks[n].real(), 0) << "mode " << n;
      EXPECT_LE(std::abs(peaks[n].imag()), eps * std::abs(peaks[n])) << "mode " << n;
    }
  }
  EXPECT_LT(exact_error(x, res.model), 1e-3);
}

TYPED_TEST(ComplexTest, CallbackSeesTheComplexModel) {
  using T = TypeParam;
  const KTensor<T> truth = planted<T>({5, 4, 3}, 2, 500);
  const Tensor<T> x = truth.full();
  CpOptions o;
  o.rank = 2;
  o.max_iters = 3;
  o.tol = 0.0;
  int calls = 0;
  o.callback = [&](const CpProgress& p) {
    EXPECT_FALSE(p.model);
    EXPECT_TRUE(p.complex_model);
    const KTensor<Z> m = p.complex_model();
    EXPECT_EQ(m.factors.size(), 3u);
    EXPECT_EQ(m.factors[0].rows(), 5);
    // The model the callback sees has the fit it reports.
    Tensor<Z> xd(x.dims());
    for (index_t i = 0; i < x.numel(); ++i) xd[i] = Z(x[i]);
    EXPECT_NEAR(1.0 - exact_error(xd, m), p.fit, 1e-3);
    ++calls;
    return true;
  };
  cp_als(x, o);
  EXPECT_EQ(calls, 3);
}

TYPED_TEST(ComplexTest, LineSearchFixedModesAndRidgeRunThroughTheSameLoop) {
  using T = TypeParam;
  const bool is_float = std::is_same_v<T, std::complex<float>>;
  const KTensor<T> truth = planted<T>({9, 8, 7}, 3, 800);
  const Tensor<T> x = truth.full();
  CpOptions o;
  o.rank = 3;
  o.max_iters = 400;
  o.tol = 1e-12;
  o.init = CpInit::random;
  o.n_starts = 3;
  o.line_search = true;
  const CpResult<T> ls = cp_als(x, o);
  EXPECT_LT(exact_error(x, ls.model), is_float ? 1e-3 : 1e-6);
  EXPECT_GT(ls.line_search_accepted, 0);
  // Fixed modes come back bit for bit; the others fit to them.
  std::vector<Matrix<T>> start = truth.factors;
  start[0] = Matrix<T>(9, 3, random_complex<T>(27, 801));
  o = CpOptions();
  o.rank = 3;
  o.max_iters = 400;
  o.tol = 1e-12;
  o.fixed_modes = {1, 2};
  const CpResult<T> fixed = cp_als(x, o, start);
  for (int n : {1, 2}) {
    const auto& got = fixed.model.factors[static_cast<std::size_t>(n)].values();
    const auto& want = truth.factors[static_cast<std::size_t>(n)].values();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << "mode " << n;
  }
  EXPECT_LT(exact_error(x, fixed.model), is_float ? 1e-3 : 1e-6);
  // A ridge shrinks the model a little and still fits.
  o = CpOptions();
  o.rank = 3;
  o.ridge = 1e-6;
  o.max_iters = 400;
  EXPECT_LT(exact_error(x, cp_als(x, o).model), 1e-3);
}

TYPED_TEST(ComplexTest, AStartWithDependentComponentsIsRefused) {
  using T = TypeParam;
  const Tensor<T> x = planted<T>({5, 4, 3}, 2, 900).full();
  std::vector<Matrix<T>> start = planted<T>({5, 4, 3}, 2, 901).factors;
  // Component 1 equals component 0 times a complex scale in the modes read first (1, 2).
  for (int n : {1, 2}) {
    Matrix<T>& f = start[static_cast<std::size_t>(n)];
    for (index_t i = 0; i < f.rows(); ++i) f(i, 1) = T(0.5, -2) * f(i, 0);
  }
  CpOptions o;
  o.rank = 2;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o, start); },
                                     "component 1 of the initial factors is a linear combination");
  // Independent over the complex numbers although each entry has the same modulus: runs.
  for (int n : {1, 2}) {
    Matrix<T>& f = start[static_cast<std::size_t>(n)];
    for (index_t i = 0; i < f.rows(); ++i) f(i, 1) = std::conj(f(i, 0));
  }
  EXPECT_NO_THROW(cp_als(x, o, start));
}

TYPED_TEST(ComplexTest, OptionsWithoutMeaningForComplexTensorsAreRefused) {
  using T = TypeParam;
  const Tensor<T> x = planted<T>({4, 3, 2}, 1, 600).full();
  CpOptions o;
  o.rank = 1;
  o.nonnegative = true;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "nonnegative");
  o.nonnegative = false;
  o.compress = CpCompress::on;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "compress = on");
  o.compress = CpCompress::automatic;
  o.solver = CpSolver::sampled;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "sampled is not available");
  o.solver = CpSolver::exact;
  o.backend = Backend::reference;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "cpu backend only");
}

TYPED_TEST(ComplexTest, NonFiniteEntriesAreNamed) {
  using T = TypeParam;
  Tensor<T> x = planted<T>({4, 3, 2}, 1, 700).full();
  x[5] = T(1, std::numeric_limits<typename T::value_type>::infinity());
  CpOptions o;
  o.rank = 1;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "non-finite entry (Inf)");
}

}  // namespace
}  // namespace tenfold::test
