// Every Compute<T> primitive of each backend (cpu, and cuda when a device is present)
// against the reference backend on the same random data, for float and double, edge
// sizes included (1, odd, tall, wide, empty where allowed); and the failure and NaN
// contracts of lib/core/compute.hpp on every backend, the reference included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backend_test_util.hpp"
#include "core/compute.hpp"
#include "cp_test_util.hpp"
#include "tenfold/error.hpp"

namespace tenfold::test {
namespace {

using detail::ColumnNorm;
using detail::Compute;
using detail::Op;
template <class T>
using Host = std::vector<std::vector<T>>;

// Copies `data` to backend memory, runs f(c, pointers), and returns the data copied back.
template <class T, class F>
Host<T> run_on(Compute<T>& c, Host<T> data, F f) {
  std::vector<detail::Buffer<T>> buffers;
  std::vector<T*> p;
  for (const std::vector<T>& v : data) {
    buffers.emplace_back(c, v.size());
    c.upload(buffers.back().get(), v.data(), v.size());
    p.push_back(buffers.back().get());
  }
  f(c, p);
  c.synchronize();
  for (std::size_t i = 0; i < data.size(); ++i) c.download(data[i].data(), p[i], data[i].size());
  return data;
}

// f on backend b and on the reference, from the same data: every operand agrees to tol.
template <class T, class F>
void compare(Backend b, const Host<T>& data, F f, double tol, const std::string& what) {
  const auto test = detail::make_compute<T>(b);
  const auto ref = detail::make_compute<T>(Backend::reference);
  const Host<T> got = run_on(*test, data, f), want = run_on(*ref, data, f);
  for (std::size_t i = 0; i < data.size(); ++i)
    EXPECT_LT(rel_diff(got[i], want[i]), tol) << what << ", operand " << i;
}

// n random values, at least one so that every operand has memory.
template <class T>
std::vector<T> values(index_t n, std::uint64_t seed) {
  return random_values<T>(static_cast<std::size_t>(std::max<index_t>(n, 1)), seed);
}

class Primitives : public ::testing::TestWithParam<Backend> {};

template <class T>
void gemm_cases(Backend b) {
  // m, n, k: ones, odd, tall, wide, a long inner dimension, empty sides; a TTM's short and
  // wide product over a tensor's first mode (A^T B, B tensor-sized, many tiles).
  const std::vector<std::tuple<index_t, index_t, index_t>> shapes = {
      {1, 1, 1}, {7, 5, 9}, {301, 3, 5}, {3, 301, 5},    {4, 3, 700},
      {5, 6, 0}, {0, 4, 3}, {5, 0, 2},   {10, 2000, 150}};
  std::uint64_t seed = 1;
  // (plain variables, not structured bindings: the lambdas below capture them)
  for (const auto& shape : shapes) {
    const index_t m = std::get<0>(shape), n = std::get<1>(shape), k = std::get<2>(shape);
    for (Op ta : {Op::none, Op::trans})
      for (Op tb : {Op::none, Op::trans})
        for (double beta : {0.0, -0.5}) {
          const index_t lda = (ta == Op::none ? m : k) + 2, ldb = (tb == Op::none ? k : n) + 1,
                        ldc = m + 3;
          const index_t ca = ta == Op::none ? k : m, cb = tb == Op::none ? n : k;
          const std::string what = "gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                                   std::to_string(k) + " ta " + std::to_string(int(ta)) + " tb " +
                                   std::to_string(int(tb)) + " beta " + std::to_string(beta);
          compare<T>(
              b,
              {values<T>(lda * ca, ++seed), values<T>(ldb * cb, ++seed),
               values<T>(ldc * n, ++seed)},
              [&](Compute<T>& c, const std::vector<T*>& p) {
                c.gemm(ta, tb, m, n, k, T(1.5), p[0], lda, p[1], ldb, T(beta), p[2], ldc);
              },
              kernel_tol<T>(), what);
        }
  }
}

TEST_P(Primitives, Gemm) {
  gemm_cases<float>(GetParam());
  gemm_cases<double>(GetParam());
}

template <class T>
void batched_cases(Backend b) {
  for (const auto& shape : std::vector<std::tuple<index_t, index_t, index_t, index_t>>{
           {1, 1, 1, 1}, {5, 3, 7, 4}, {40, 2, 3, 33}, {3, 4, 5, 0}}) {
    const index_t m = std::get<0>(shape), n = std::get<1>(shape), k = std::get<2>(shape),
                  batch = std::get<3>(shape);
    for (Op ta : {Op::none, Op::trans}) {
      const index_t lda = ta == Op::none ? m : k, sa = lda * (ta == Op::none ? k : m) + 2;
      const index_t sb = k * n + 1, sc = m * n + 3;
      compare<T>(
          b, {values<T>(sa * batch, 7), values<T>(sb * batch, 8), values<T>(sc * batch, 9)},
          [&](Compute<T>& c, const std::vector<T*>& p) {
            c.gemm_strided_batched(ta, Op::none, m, n, k, T(0.5), p[0], lda, sa, p[1], k, sb, T(2),
                                   p[2], m, sc, batch);
          },
          kernel_tol<T>(), "batched gemm batch " + std::to_string(batch));
    }
  }
}

TEST_P(Primitives, GemmStridedBatched) {
  batched_cases<float>(GetParam());
  batched_cases<double>(GetParam());
}

template <class T>
void syrk_cases(Backend b) {
  for (const auto& shape : std::vector<std::pair<index_t, index_t>>{
           {1, 1}, {7, 13}, {40, 3}, {3, 900}, {6, 0}, {0, 4}}) {
    const index_t n = shape.first, k = shape.second;
    for (Op trans : {Op::none, Op::trans})
      for (double beta : {0.0, 2.0}) {
        const index_t lda = (trans == Op::trans ? k : n) + 1, ldc = n + 2;
        compare<T>(
            b, {values<T>(lda * (trans == Op::trans ? n : k), 20), values<T>(ldc * n, 21)},
            [&](Compute<T>& c, const std::vector<T*>& p) {
              c.syrk(trans, n, k, T(0.75), p[0], lda, T(beta), p[1], ldc);
            },
            kernel_tol<T>(), "syrk " + std::to_string(n) + "x" + std::to_string(k));
      }
  }
}

TEST_P(Primitives, Syrk) {
  syrk_cases<float>(GetParam());
  syrk_cases<double>(GetParam());
}

template <class T>
void cholesky_cases(Backend b) {
  for (const auto& shape :
       std::vector<std::pair<index_t, index_t>>{{1, 1}, {5, 7}, {33, 2}, {40, 130}, {3, 0}}) {
    const index_t n = shape.first, m = shape.second;
    const index_t ld = n + 1, ldb = m + 2;
    // potrf, then potrs_right: B (L L^T)^{-1}, or one triangular solve: B L^{-T} or B L^{-1};
    // the strict upper triangle is not compared.
    const std::optional<Op> potrs;
    for (const std::optional<Op> op : {potrs, std::optional(Op::trans), std::optional(Op::none)}) {
      const std::string step = !op                ? "potrs_right"
                               : *op == Op::trans ? "solve_lower_right L^T"
                                                  : "solve_lower_right L";
      const auto solve = [&](Compute<T>& c, const std::vector<T*>& p) {
        ASSERT_TRUE(c.potrf(n, p[0], ld));
        if (op) {
          c.solve_lower_right(*op, n, p[0], ld, m, p[1], ldb);
        } else {
          c.potrs_right(n, p[0], ld, m, p[1], ldb);
        }
      };
      Host<T> data = {random_spd<T>(n, ld, 30), values<T>(ldb * n, 31)};
      const auto test = detail::make_compute<T>(b);
      const auto ref = detail::make_compute<T>(Backend::reference);
      Host<T> got = run_on(*test, data, solve), want = run_on(*ref, data, solve);
      for (Host<T>* h : {&got, &want})
        for (index_t j = 0; j < n; ++j)
          for (index_t i = 0; i < j; ++i) (*h)[0][static_cast<std::size_t>(i + j * ld)] = T(0);
      EXPECT_LT(rel_diff(got[0], want[0]), kernel_tol<T>() * 10) << "potrf n " << n;
      EXPECT_LT(rel_diff(got[1], want[1]), kernel_tol<T>() * 10)
          << step << " n " << n << " m " << m;
    }
  }
}

TEST_P(Primitives, CholeskyAndSolve) {
  cholesky_cases<float>(GetParam());
  cholesky_cases<double>(GetParam());
}

template <class T>
void eigen_cases(Backend b) {
  for (const index_t n : {1, 6, 31}) {
    const index_t ld = n + 2;
    // Symmetric A with well separated eigenvalues: a random symmetric matrix plus
    // diag(0, 1, ..., n-1) * 4, so eigenvectors are defined up to sign.
    auto a = values<T>(ld * n, 40 + static_cast<std::uint64_t>(n));
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < j; ++i)
        a[static_cast<std::size_t>(i + j * ld)] = a[static_cast<std::size_t>(j + i * ld)];
    for (index_t i = 0; i < n; ++i) a[static_cast<std::size_t>(i + i * ld)] += T(4 * i);
    std::vector<T> w_test(static_cast<std::size_t>(n)), w_ref(w_test.size());
    const auto test = detail::make_compute<T>(b);
    const auto ref = detail::make_compute<T>(Backend::reference);
    const Host<T> q_test = run_on<T>(*test, {a}, [&](Compute<T>& c, const std::vector<T*>& p) {
      c.syevd(n, p[0], ld, w_test.data());
    });
    const Host<T> q_ref = run_on<T>(*ref, {a}, [&](Compute<T>& c, const std::vector<T*>& p) {
      c.syevd(n, p[0], ld, w_ref.data());
    });
    EXPECT_LT(rel_diff(w_test, w_ref), kernel_tol<T>() * 10) << "eigenvalues n " << n;
    for (index_t j = 0; j < n; ++j) {
      double d = 0.0;
      for (index_t i = 0; i < n; ++i)
        d += static_cast<double>(q_test[0][static_cast<std::size_t>(i + j * ld)]) *
             q_ref[0][static_cast<std::size_t>(i + j * ld)];
      EXPECT_NEAR(std::abs(d), 1.0, kernel_tol<T>() * 100) << "eigenvector " << j << " n " << n;
    }
  }
}

TEST_P(Primitives, SymmetricEigensolver) {
  eigen_cases<float>(GetParam());
  eigen_cases<double>(GetParam());
}

template <class T>
void elementwise_cases(Backend b) {
  const auto exact = [&](const std::string& what, const Host<T>& data, auto f) {
    compare<T>(b, data, f, 0.0 + std::numeric_limits<double>::min(), what);
  };
  for (const index_t n : {1, 63, 1000, 70001}) {
    exact("hadamard", {values<T>(n, 50), values<T>(n, 51)},
          [&](Compute<T>& c, const std::vector<T*>& p) {
            c.hadamard(static_cast<std::size_t>(n), p[0], p[1]);
          });
    compare<T>(
        b, {values<T>(n, 52), values<T>(n, 53)},
        [&](Compute<T>& c, const std::vector<T*>& p) {
          c.axpy(static_cast<std::size_t>(n), T(-0.3), p[0], p[1]);
        },
        kernel_tol<T>(), "axpy");
  }
  for (const auto& shape : std::vector<std::tuple<index_t, index_t, index_t>>{
           {1, 1, 1}, {4, 3, 5}, {300, 2, 3}, {2, 300, 7}, {3, 4, 0}}) {
    const index_t ma = std::get<0>(shape), mb = std::get<1>(shape), r = std::get<2>(shape);
    exact("khatri_rao", {values<T>(ma * r, 54), values<T>(mb * r, 55), values<T>(ma * mb * r, 56)},
          [&](Compute<T>& c, const std::vector<T*>& p) {
            c.khatri_rao(ma, mb, r, p[0], p[1], p[2]);
          });
  }
  for (const auto& shape :
       std::vector<std::pair<index_t, index_t>>{{1, 1}, {5, 4}, {1000, 3}, {3, 700}, {4, 0}}) {
    const index_t m = shape.first, n = shape.second;
    const index_t lda = m + 2;
    auto a = values<T>(lda * n, 57);
    if (n > 1)
      for (index_t i = 0; i < m; ++i) a[static_cast<std::size_t>(i + lda)] = T(0);  // zero column
    for (ColumnNorm kind : {ColumnNorm::two, ColumnNorm::max_or_one})
      compare<T>(
          b, {a, values<T>(n, 58)},
          [&](Compute<T>& c, const std::vector<T*>& p) {
            c.normalize_columns(kind, m, n, p[0], lda, p[1]);
          },
          kernel_tol<T>(), "normalize_columns " + std::to_string(m) + "x" + std::to_string(n));
    exact("scale_columns", {a, values<T>(n, 59)},
          [&](Compute<T>& c, const std::vector<T*>& p) { c.scale_columns(m, n, p[0], lda, p[1]); });
    exact("add_diagonal", {a}, [&](Compute<T>& c, const std::vector<T*>& p) {
      c.add_diagonal(std::min(m, n), p[0], lda, T(2.5));
    });
  }
}

TEST_P(Primitives, ElementwiseAndColumns) {
  elementwise_cases<float>(GetParam());
  elementwise_cases<double>(GetParam());
}

template <class T>
void reduction_cases(Backend b) {
  const auto test = detail::make_compute<T>(b);
  const auto ref = detail::make_compute<T>(Backend::reference);
  for (const index_t n : {0, 1, 63, 1000, 40001}) {
    double dot[2] = {}, ss[2] = {};
    int i = 0;
    for (Compute<T>* c : {test.get(), ref.get()}) {
      run_on<T>(*c, {values<T>(n, 60), values<T>(n, 61)},
                [&](Compute<T>& cc, const std::vector<T*>& p) {
                  dot[i] = cc.dot(static_cast<std::size_t>(n), p[0], p[1]);
                  ss[i] = cc.sum_squares(static_cast<std::size_t>(n), p[0]);
                });
      ++i;
    }
    // Products of floats are exact in double: only the summation order differs.
    EXPECT_NEAR(dot[0], dot[1], 1e-12 * (ss[1] + 1.0)) << "dot n " << n;
    EXPECT_NEAR(ss[0], ss[1], 1e-12 * (ss[1] + 1.0)) << "sum_squares n " << n;
  }
}

template <class T>
void masked_fill_cases(Backend b) {
  const auto test = detail::make_compute<T>(b);
  const auto ref = detail::make_compute<T>(Backend::reference);
  for (const index_t n : {0, 1, 63, 1000, 40001}) {
    // w: about a third missing; wx = w .* x
    std::vector<T> w = values<T>(n, 62), wx = values<T>(n, 63);
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = std::abs(w[i]) < T(0.35) ? T(0) : T(1);
      wx[i] *= w[i];
    }
    double r2[2] = {};
    Host<T> out[2];
    int i = 0;
    for (Compute<T>* c : {test.get(), ref.get()}) {
      out[i] = run_on<T>(*c, {w, wx, values<T>(n, 64), values<T>(n, 65)},
                         [&](Compute<T>& cc, const std::vector<T*>& p) {
                           r2[i] =
                               cc.masked_fill(static_cast<std::size_t>(n), p[0], p[1], p[2], p[3]);
                         });
      ++i;
    }
    // f: the same arithmetic per entry on both; the sum differs only in its order.
    EXPECT_LT(rel_diff(out[0][3], out[1][3]), kernel_tol<T>()) << "masked_fill n " << n;
    EXPECT_NEAR(r2[0], r2[1], 1e-12 * (r2[1] + 1.0)) << "masked_fill sum n " << n;
    for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) {
      if (w[j] == T(1)) ASSERT_EQ(out[1][3][j], wx[j]) << "observed entry " << j;
      if (w[j] == T(0)) ASSERT_EQ(out[1][3][j], out[1][2][j]) << "missing entry " << j;
    }
  }
}

TEST_P(Primitives, MaskedFill) {
  masked_fill_cases<float>(GetParam());
  masked_fill_cases<double>(GetParam());
}

TEST_P(Primitives, DotAndSumSquares) {
  reduction_cases<float>(GetParam());
  reduction_cases<double>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(AgainstReference, Primitives, ::testing::ValuesIn(compared_backends()),
                         backend_name);

// --- contracts of compute.hpp, on every backend ---------------------------------------

class Contracts : public OnEachBackend {};

template <class T>
void potrf_failures(Backend b) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  // Indefinite, singular, and a NaN entry: "not positive definite", never a throw.
  for (const std::vector<T>& a : {std::vector<T>{2, 1, 1, -3}, std::vector<T>{1, 1, 1, 1},
                                  std::vector<T>{4, nan, 0, 4}, std::vector<T>{nan, 0, 0, 4}}) {
    bool ok = true;
    run_on<T>(*detail::make_compute<T>(b), {a},
              [&](Compute<T>& c, const std::vector<T*>& p) { ok = c.potrf(2, p[0], 2); });
    EXPECT_FALSE(ok) << a[0] << " " << a[1] << " " << a[3];
  }
}

TEST_P(Contracts, CholeskyReportsIndefiniteSingularAndNaN) {
  potrf_failures<float>(backend());
  potrf_failures<double>(backend());
}

template <class T>
void syevd_nan(Backend b) {
  std::vector<T> w(2);
  expect_throw_with<NumericalError>(
      [&] {
        run_on<T>(*detail::make_compute<T>(b), {{1, 0, 0, std::numeric_limits<T>::quiet_NaN()}},
                  [&](Compute<T>& c, const std::vector<T*>& p) { c.syevd(2, p[0], 2, w.data()); });
      },
      "2x2 matrix, which has a NaN entry");
}

TEST_P(Contracts, EigensolverRejectsNaN) {
  syevd_nan<float>(backend());
  syevd_nan<double>(backend());
}

template <class T>
void memory_contracts(Backend b) {
  const auto c = detail::make_compute<T>(b);
  EXPECT_EQ(c->kind(), b);
  EXPECT_EQ(c->allocate(0), nullptr);
  c->deallocate(nullptr);
  // n * sizeof(T) wraps around to 0 in size_t: must fail, not hand out a tiny block.
  EXPECT_ANY_THROW(c->allocate(std::numeric_limits<std::size_t>::max() / sizeof(T) + 1));
  const std::vector<T> src = random_values<T>(37, 1);
  const Host<T> back =
      run_on<T>(*c, {src, std::vector<T>(37)},
                [&](Compute<T>& cc, const std::vector<T*>& p) { cc.copy(p[1], p[0], 37); });
  EXPECT_EQ(back[1], src);
  EXPECT_GT(c->available_bytes(), 0u);
}

TEST_P(Contracts, MemoryPrimitives) {
  memory_contracts<float>(backend());
  memory_contracts<double>(backend());
}

TENFOLD_ON_EACH_BACKEND(Contracts);

}  // namespace
}  // namespace tenfold::test
