// Helpers shared by the Tucker test suites: random tensors and models, simple
// reference implementations of unfolding and mode products, error checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/random.hpp"
#include "expect_throw.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::test {

/// The agreement of an exact result with its reference: about 1e4 unit round-offs.
template <class T>
double exact_tol() {
  return std::is_same_v<T, double> ? 1e-12 : 1e-5;
}

template <class T>
Tensor<T> random_tensor(const std::vector<index_t>& dims, std::uint64_t seed) {
  detail::Rng rng(seed);
  Tensor<T> x(dims);
  for (T& v : x.values()) v = static_cast<T>(rng.normal());
  return x;
}

template <class T>
Matrix<T> random_matrix(index_t rows, index_t cols, std::uint64_t seed) {
  detail::Rng rng(seed);
  Matrix<T> a(rows, cols);
  for (T& v : a.values()) v = static_cast<T>(rng.normal());
  return a;
}

/// Tucker model with a Gaussian core and Gaussian (not orthonormal) factors.
template <class T>
TTensor<T> random_ttensor(const std::vector<index_t>& dims, const std::vector<index_t>& ranks,
                          std::uint64_t seed) {
  TTensor<T> m;
  m.core = random_tensor<T>(ranks, seed);
  for (std::size_t n = 0; n < dims.size(); ++n) {
    m.factors.push_back(random_matrix<T>(dims[n], ranks[n], seed + 101 * (n + 1)));
  }
  return m;
}

/// A rank-R CP tensor with Gaussian factors plus Gaussian noise of relative norm `noise`.
template <class T>
Tensor<T> random_cp(const std::vector<index_t>& dims, index_t rank, double noise,
                    std::uint64_t seed) {
  KTensor<T> k;
  k.weights.assign(static_cast<std::size_t>(rank), T(1));
  for (std::size_t n = 0; n < dims.size(); ++n) {
    k.factors.push_back(random_matrix<T>(dims[n], rank, seed + 7 * (n + 1)));
  }
  Tensor<T> x = k.full();
  const Tensor<T> e = random_tensor<T>(dims, seed + 1000);
  const double scale = noise * norm<T>(x.view()) / norm<T>(e.view());
  for (index_t i = 0; i < x.numel(); ++i) x[i] += static_cast<T>(scale * e[i]);
  return x;
}

/// Where the entry at column-major position `lin` of a tensor of shape dims stands in
/// the Kolda-Bader unfolding X_(n): (i_n, sum_{m != n} i_m prod_{k < m, k != n} I_k).
inline std::pair<index_t, index_t> unfolded_at(const std::vector<index_t>& dims, int n,
                                               index_t lin) {
  index_t rest = lin, col = 0, stride = 1, row = 0;
  for (std::size_t m = 0; m < dims.size(); ++m) {
    const index_t i = rest % dims[m];
    rest /= dims[m];
    if (static_cast<int>(m) == n) {
      row = i;
    } else {
      col += i * stride;
      stride *= dims[m];
    }
  }
  return {row, col};
}

/// Kolda-Bader unfolding X_(n) (I_n x prod_{m != n} I_m), by loops over multi-indices.
template <class T>
Matrix<double> unfold_ref(const Tensor<T>& x, int n) {
  const index_t in = x.dim(n);
  Matrix<double> u(in, x.numel() / in);
  for (index_t lin = 0; lin < x.numel(); ++lin) {
    const auto [row, col] = unfolded_at(x.dims(), n, lin);
    u(row, col) = x[lin];
  }
  return u;
}

/// Inverse of unfold_ref: the tensor of shape dims whose mode-n unfolding is u.
template <class T>
Tensor<T> fold_ref(const Matrix<double>& u, const std::vector<index_t>& dims, int n) {
  Tensor<T> x(dims);
  for (index_t lin = 0; lin < x.numel(); ++lin) {
    const auto [row, col] = unfolded_at(dims, n, lin);
    x[lin] = static_cast<T>(u(row, col));
  }
  return x;
}

/// C = A B (or A^T B, A B^T) by triple loops in double.
template <class TA, class TB>
Matrix<double> matmul_ref(const Matrix<TA>& a, bool ta, const Matrix<TB>& b, bool tb) {
  const index_t m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols();
  const index_t n = tb ? b.rows() : b.cols();
  Matrix<double> c(m, n);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < m; ++i) {
      double s = 0.0;
      for (index_t l = 0; l < k; ++l) {
        s += static_cast<double>(ta ? a(l, i) : a(i, l)) *
             static_cast<double>(tb ? b(j, l) : b(l, j));
      }
      c(i, j) = s;
    }
  return c;
}

/// X x_n A (A is J x I_n), through the unfoldings.
template <class T>
Tensor<T> ttm_ref(const Tensor<T>& x, int n, const Matrix<T>& a) {
  std::vector<index_t> dims = x.dims();
  dims[static_cast<std::size_t>(n)] = a.rows();
  return fold_ref<T>(matmul_ref(a, false, unfold_ref(x, n), false), dims, n);
}

/// ||a - b|| / ||b|| in double.
template <class T, class U>
double rel_diff(const std::vector<T>& a, const std::vector<U>& b) {
  double d = 0.0, s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double bi = static_cast<double>(b[i]);
    d += (static_cast<double>(a[i]) - bi) * (static_cast<double>(a[i]) - bi);
    s += bi * bi;
  }
  return s > 0.0 ? std::sqrt(d / s) : std::sqrt(d);
}

/// ||X - model|| / ||X||, with the model formed densely.
template <class T>
double true_relative_error(const Tensor<T>& x, const TTensor<T>& model) {
  return rel_diff(model.full().values(), x.values());
}

/// The float run f of `method` agrees with the double run d on x to float round-off: its
/// reported error, and the true error of its model. The error is stationary in the
/// subspaces, so it agrees even where the subspaces themselves are sensitive (small
/// eigenvalue gaps).
/// The float run reports sqrt(1 - ||G||^2 / ||X||^2) from a core G rounded in float
/// through the TTMs: an error of u eps(float) in ||G||^2 / ||X||^2 moves an error e by
/// u eps / (sqrt(e^2 + u eps) + e) (about u eps / (2 e)). u = 64, the closed-form bound of
/// CP's closed form (fit_rounding_units<double>, cp_test_util.hpp); measured on COVID-19 (sums of
/// up to 438 terms) under the Prescott, Haswell, SkylakeX and Cooperlake kernels: up to 23 units.
inline void expect_float_agrees(const Tensor<double>& x, const TuckerResult<double>& d,
                                const TuckerResult<float>& f, TuckerMethod method) {
  const double u = 64.0 * std::numeric_limits<float>::epsilon();
  const double e = d.relative_error;
  EXPECT_NEAR(f.relative_error, e, u / (std::sqrt(e * e + u) + e)) << to_string(method);
  const Tensor<float> ff = f.model.full();
  EXPECT_NEAR(rel_diff(convert<double, float>(ff.view()).values(), x.values()),
              true_relative_error(x, d.model), 1e-5)
      << to_string(method);
}

/// max |U^T U - I| over the factors.
template <class T>
double orthonormality_defect(const TTensor<T>& model) {
  double worst = 0.0;
  for (const Matrix<T>& u : model.factors) {
    const Matrix<double> g = matmul_ref(u, true, u, false);
    for (index_t j = 0; j < g.cols(); ++j)
      for (index_t i = 0; i < g.rows(); ++i)
        worst = std::max(worst, std::abs(g(i, j) - (i == j ? 1.0 : 0.0)));
  }
  return worst;
}

/// Expects fn() to throw E whose message contains `needle` (expect_throw_with).
template <class E>
void expect_error(const std::function<void()>& fn, const std::string& needle) {
  expect_throw_with<E>(fn, needle);
}

}  // namespace tenfold::test
