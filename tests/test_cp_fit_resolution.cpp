// The resolution of CP-ALS's closed-form fit: its error against the dense
// reconstruction stays within the bound the tests assume (fit_rounding_units), in
// double and float, with and without compression first; and fit_resolution is the
// change of fit that an error of that bound makes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cp_test_util.hpp"
#include "tenfold/cp.hpp"

namespace tenfold::test {

// --- the closed-form fit's resolution ------------------------------------------------

namespace {

// |lambda|^T (*_n |F_n^T F_n|) |lambda|: the model's sum of absolute terms.
template <class T>
double absolute_model_norm2(const KTensor<T>& k) {
  double sum = 0.0;
  for (index_t i = 0; i < k.rank(); ++i) {
    for (index_t j = 0; j < k.rank(); ++j) {
      double v = std::abs(static_cast<double>(k.weights[static_cast<std::size_t>(i)]) *
                          k.weights[static_cast<std::size_t>(j)]);
      for (const Matrix<T>& f : k.factors) {
        double g = 0.0;
        for (index_t a = 0; a < f.rows(); ++a) g += static_cast<double>(f(a, i)) * f(a, j);
        v *= std::abs(g);
      }
      sum += v;
    }
  }
  return sum;
}

// The error of the reported ||X - model||^2 against the dense reconstruction's, in units
// of eps(T) (||X||^2 + |lambda|^T (*_n |G_n|) |lambda|), stays within the bound that the
// tests assume (fit_rounding_units), with and without compression first, after a
// few and after many sweeps. CI runs this under every OpenBLAS kernel of its processor.
template <class T>
void expect_closed_form_within_bound() {
  double worst = 0.0;
  for (const std::vector<index_t>& dims :
       std::vector<std::vector<index_t>>{{20, 12}, {12, 9, 7}, {5, 4, 3, 6}, {40, 30, 20}}) {
    for (std::uint64_t seed : {0u, 7u}) {
      const Tensor<T> x = random_tensor<T>(dims, seed);
      double norm_x2 = 0.0;
      for (T v : x.values()) norm_x2 += static_cast<double>(v) * v;
      for (index_t rank : {2, 4, 8}) {
        for (CpCompress compress : {CpCompress::off, CpCompress::on}) {
          for (int sweeps : {3, 30}) {
            CpOptions o;
            o.rank = rank;
            o.seed = seed;
            o.init = CpInit::random;
            o.max_iters = sweeps;
            o.tol = 0.0;
            o.compress = compress;
            const CpResult<T> r = cp_als(x, o);
            const double exact = exact_relative_error(x, r.model);
            const double reported = 1.0 - r.fit;
            const double units =
                std::abs(reported * reported - exact * exact) * norm_x2 /
                (std::numeric_limits<T>::epsilon() * (norm_x2 + absolute_model_norm2(r.model)));
            worst = std::max(worst, units);
          }
        }
      }
    }
  }
  EXPECT_LE(worst, fit_rounding_units<T>());
  // The bound is not slack by orders of magnitude either.
  EXPECT_GE(worst, fit_rounding_units<T>() / 64.0);
}

}  // namespace

TEST(CpFitResolution, ClosedFormErrorWithinTheBoundDouble) {
  expect_closed_form_within_bound<double>();
}

TEST(CpFitResolution, ClosedFormErrorWithinTheBoundFloat) {
  expect_closed_form_within_bound<float>();
}

TEST(CpFitResolution, IsTheChangeOfFitThatAnErrorOfTheBoundMakes) {
  // resid2 = 0.01 ||X||^2 (fit 0.9): e / (2 ||X|| ||X - model||); exact model: sqrt(e) / ||X||.
  const double e = fit_rounding_units<double>() * std::numeric_limits<double>::epsilon();
  EXPECT_NEAR(fit_resolution<double>(0.01, 1.0, 1.0), e / 0.2, 1e-6 * e / 0.2);
  EXPECT_NEAR(fit_resolution<double>(0.0, 4.0, 4.0), std::sqrt(4.0 * e) / 2.0, 1e-12);
}

}  // namespace tenfold::test
