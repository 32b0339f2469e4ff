// Helpers shared by the CP test files: random data, naive reference
// implementations (in double) and comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/random.hpp"
#include "expect_throw.hpp"
#include "reference/reference_compute.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/tensor.hpp"
#include "tenfold/threads.hpp"

namespace tenfold::test {

// Three worker threads whatever the machine, so that the parallel paths run.
struct ThreeThreads {
  ThreeThreads() { tenfold::set_num_threads(3); }
  ~ThreeThreads() { tenfold::set_num_threads(0); }
};

/// Relative tolerance of a kernel result against a double reference: a few
/// hundred units in the last place of T.
template <class T>
constexpr double kernel_tol() {
  return std::is_same_v<T, double> ? 1e-12 : 1e-5;
}

/// A planted CP problem in double (random_cp_tensor with these options).
inline RandomCpProblem<double> planted(std::vector<index_t> dims, index_t rank, double collinearity,
                                       double noise, std::uint64_t seed = 3) {
  RandomCpOptions p;
  p.dims = std::move(dims);
  p.rank = rank;
  p.collinearity = collinearity;
  p.noise = noise;
  p.seed = seed;
  return random_cp_tensor<double>(p);
}

/// n values uniform in [lo, hi).
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  detail::Rng rng(seed);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(lo + (hi - lo) * rng.uniform());
  return v;
}

template <class T>
Matrix<T> random_matrix(index_t rows, index_t cols, std::uint64_t seed) {
  return Matrix<T>(rows, cols, random_values<T>(static_cast<std::size_t>(rows * cols), seed));
}

template <class T>
Tensor<T> random_tensor(const std::vector<index_t>& dims, std::uint64_t seed) {
  Tensor<T> x(dims);
  x.values() = random_values<T>(static_cast<std::size_t>(x.numel()), seed);
  return x;
}

/// Symmetric positive definite A = G^T G + n I (n x n, leading dimension ld) from a
/// random G.
template <class T>
std::vector<T> random_spd(index_t n, index_t ld, std::uint64_t seed) {
  const auto g = random_values<T>(static_cast<std::size_t>(std::max<index_t>(n * n, 1)), seed);
  std::vector<T> a(static_cast<std::size_t>(std::max<index_t>(ld * n, 1)));
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) {
      double s = i == j ? static_cast<double>(n) : 0.0;
      for (index_t l = 0; l < n; ++l)
        s += static_cast<double>(g[static_cast<std::size_t>(l + i * n)]) *
             g[static_cast<std::size_t>(l + j * n)];
      a[static_cast<std::size_t>(i + j * ld)] = static_cast<T>(s);
    }
  return a;
}

/// Random CP model with weights in [1, 2) and factor entries in [-1, 1).
template <class T>
KTensor<T> random_ktensor(const std::vector<index_t>& dims, index_t rank, std::uint64_t seed) {
  KTensor<T> k;
  k.weights = random_values<T>(static_cast<std::size_t>(rank), seed, 1.0, 2.0);
  for (std::size_t n = 0; n < dims.size(); ++n) {
    k.factors.push_back(random_matrix<T>(dims[n], rank, seed + 101 * (n + 1)));
  }
  return k;
}

/// ||a - b||_2 / ||b||_2 over two sequences, in double (0 when both are zero).
template <class A, class B>
double rel_diff(const A& a, const B& b) {
  EXPECT_EQ(std::size(a), std::size(b));
  double num = 0.0, den = 0.0;
  auto ib = std::begin(b);
  for (auto ia = std::begin(a); ia != std::end(a); ++ia, ++ib) {
    const double d = static_cast<double>(*ia) - static_cast<double>(*ib);
    num += d * d;
    den += static_cast<double>(*ib) * static_cast<double>(*ib);
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// C = alpha op(A) op(B) + beta C in double, by the reference backend.
template <class T>
std::vector<double> ref_gemm(detail::Op ta, detail::Op tb, index_t m, index_t n, index_t k,
                             double alpha, const std::vector<T>& a, index_t lda,
                             const std::vector<T>& b, index_t ldb, double beta,
                             const std::vector<T>& c, index_t ldc) {
  const std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  std::vector<double> out(c.begin(), c.end());
  detail::ReferenceCompute<double>().gemm(ta, tb, m, n, k, alpha, ad.data(), lda, bd.data(), ldb,
                                          beta, out.data(), ldc);
  return out;
}

/// Multi-index of a column-major linear offset.
inline std::vector<index_t> multi_index(const std::vector<index_t>& dims, index_t linear) {
  std::vector<index_t> idx(dims.size());
  for (std::size_t n = 0; n < dims.size(); ++n) {
    idx[n] = linear % dims[n];
    linear /= dims[n];
  }
  return idx;
}

/// MTTKRP by definition: out(i_n, r) = sum over all entries x(i) prod_{m != n} U_m(i_m, r).
template <class T>
std::vector<double> naive_mttkrp(const Tensor<T>& x, const std::vector<const T*>& factors,
                                 index_t rank, int n) {
  const auto& dims = x.dims();
  std::vector<double> out(static_cast<std::size_t>(dims[static_cast<std::size_t>(n)] * rank));
  for (index_t l = 0; l < x.numel(); ++l) {
    const std::vector<index_t> idx = multi_index(dims, l);
    for (index_t r = 0; r < rank; ++r) {
      double p = x[l];
      for (std::size_t m = 0; m < dims.size(); ++m) {
        if (static_cast<int>(m) != n) p *= factors[m][idx[m] + r * dims[m]];
      }
      out[static_cast<std::size_t>(idx[static_cast<std::size_t>(n)] +
                                   r * dims[static_cast<std::size_t>(n)])] += p;
    }
  }
  return out;
}

/// Dense tensor of a CP model by definition, in double.
template <class T>
std::vector<double> naive_full(const KTensor<T>& k) {
  const std::vector<index_t> dims = k.dims();
  index_t numel = 1;
  for (index_t d : dims) numel *= d;
  std::vector<double> x(static_cast<std::size_t>(numel));
  for (index_t l = 0; l < numel; ++l) {
    const std::vector<index_t> idx = multi_index(dims, l);
    double s = 0.0;
    for (index_t r = 0; r < k.rank(); ++r) {
      double p = k.weights[static_cast<std::size_t>(r)];
      for (std::size_t m = 0; m < dims.size(); ++m) p *= k.factors[m](idx[m], r);
      s += p;
    }
    x[static_cast<std::size_t>(l)] = s;
  }
  return x;
}

/// ||X - full(M)|| / ||X||, computed exactly from the dense reconstruction in double.
template <class T>
double exact_relative_error(const Tensor<T>& x, const KTensor<T>& m) {
  return rel_diff(naive_full(m), x.values());
}

/// Rounding units of T in the closed-form residual
///   ||X - model||^2 = ||X||^2 + lambda^T (*_n G_n) lambda - 2 <X, model>:
/// its terms are sums rounded in T whose magnitudes are at most ||X||^2 and
/// |lambda|^T (*_n |G_n|) |lambda| (the model's sum of absolute terms, far above ||model||^2
/// when components nearly cancel), so its absolute error is a small multiple of eps(T)
/// times their sum. Measured on random problems (with and without compression first)
/// under the Prescott, Haswell, SkylakeX and Cooperlake kernels: at most 24 units in
/// double and 4 in float (whose sums accumulate in double); the bound leaves a margin of
/// about 3 (CpFitResolution in test_cp_fit_resolution.cpp).
template <class T>
constexpr double fit_rounding_units() {
  return sizeof(T) >= sizeof(double) ? 64.0 : 16.0;
}

/// The closed-form fit's resolution: fits that differ by less cannot be told apart (tests
/// that compare fits near an exact model allow this much).
/// With `scale` = ||X||^2 + |lambda|^T (*_n |G_n|) |lambda|, an error of
/// e = fit_rounding_units<T>() eps scale in resid2 moves fit = 1 - sqrt(resid2) / ||X|| by at
/// most (sqrt(resid2 + e) - sqrt(resid2)) / ||X||: about sqrt(e) / ||X|| at an exact model,
/// e / (2 ||X|| ||X - model||) away from one.
template <class T>
double fit_resolution(double resid2, double norm_x2, double scale) {
  const double e = fit_rounding_units<T>() * std::numeric_limits<T>::epsilon() * scale;
  const double r = std::sqrt(std::max(resid2, 0.0));
  return e / (std::sqrt(r * r + e) + r) / std::sqrt(norm_x2);
}

}  // namespace tenfold::test
