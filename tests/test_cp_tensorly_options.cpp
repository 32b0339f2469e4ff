// CP-ALS with TensorLy's options, against ALS by definition as TensorLy's parafac runs
// it: orthogonalised sweeps (the QR of the factors in the first sweeps), TensorLy's
// line-search rule, TensorLy's sparsity error (robust CP), and the refusals of these
// options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cp_test_util.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace tenfold::test {
namespace {

// --- orthogonalise (TensorLy's QR of the factors before the first sweeps) ----------------

// Q of the thin QR by modified Gram-Schmidt (R with a positive diagonal), column-major.
std::vector<double> gram_schmidt_q(std::vector<double> u, index_t rows, index_t cols) {
  const auto at = [rows](index_t i, index_t j) { return static_cast<std::size_t>(i + j * rows); };
  for (index_t j = 0; j < cols; ++j) {
    for (index_t k = 0; k < j; ++k) {
      double d = 0.0;
      for (index_t i = 0; i < rows; ++i) d += u[at(i, k)] * u[at(i, j)];
      for (index_t i = 0; i < rows; ++i) u[at(i, j)] -= d * u[at(i, k)];
    }
    double s = 0.0;
    for (index_t i = 0; i < rows; ++i) s += u[at(i, j)] * u[at(i, j)];
    for (index_t i = 0; i < rows; ++i) u[at(i, j)] /= std::sqrt(s);
  }
  return u;
}

// The relative error of the model [[1; U_0, ..., U_{N-1}]] from its dense form.
double model_error(const Tensor<double>& x, const std::vector<std::vector<double>>& u, index_t r) {
  KTensor<double> model;
  model.weights.assign(static_cast<std::size_t>(r), 1.0);
  for (std::size_t n = 0; n < u.size(); ++n) model.factors.emplace_back(x.dims()[n], r, u[n]);
  return exact_relative_error(x, model);
}

// Plain ALS in double by definition on unnormalised factors, as TensorLy's parafac
// (normal equations by Gaussian elimination on V^T): the factors replaced by their Q
// where I_n >= R at the start of the first `orth` sweeps; with line_search TensorLy's
// jump at its iterations 6, 8, ... (0-based), kept when its error is below the previous
// sweep's. Returns the relative error after each sweep and leaves the last model in `u`.
std::vector<double> reference_als(const Tensor<double>& x, std::vector<std::vector<double>>& u,
                                  index_t r, int sweeps, int orth, bool line_search = false) {
  const auto& dims = x.dims();
  const int order = static_cast<int>(dims.size());
  std::vector<double> errors;
  double power = 2.0;
  int failures = 0;
  for (int it = 1; it <= sweeps; ++it) {
    const bool jump = line_search && it > 6 && (it - 1) % 2 == 0;
    const std::vector<std::vector<double>> before = u;
    for (int n = 0; n < order && it <= orth; ++n) {
      if (dims[static_cast<std::size_t>(n)] >= r)
        u[static_cast<std::size_t>(n)] =
            gram_schmidt_q(u[static_cast<std::size_t>(n)], dims[static_cast<std::size_t>(n)], r);
    }
    for (int n = 0; n < order; ++n) {
      const index_t in = dims[static_cast<std::size_t>(n)];
      std::vector<const double*> ptrs;
      for (auto& f : u) ptrs.push_back(f.data());
      std::vector<double> m = naive_mttkrp(x, ptrs, r, n);
      // V = *_{m != n} U_m^T U_m, then U_n V = M row by row (V symmetric).
      std::vector<double> v(static_cast<std::size_t>(r * r), 1.0);
      for (int k = 0; k < order; ++k) {
        if (k == n) continue;
        const index_t ik = dims[static_cast<std::size_t>(k)];
        for (index_t a = 0; a < r; ++a)
          for (index_t b = 0; b < r; ++b) {
            double g = 0.0;
            for (index_t i = 0; i < ik; ++i)
              g += u[static_cast<std::size_t>(k)][static_cast<std::size_t>(i + a * ik)] *
                   u[static_cast<std::size_t>(k)][static_cast<std::size_t>(i + b * ik)];
            v[static_cast<std::size_t>(a + b * r)] *= g;
          }
      }
      for (index_t i = 0; i < in; ++i) {
        std::vector<double> a = v, y(static_cast<std::size_t>(r));
        for (index_t j = 0; j < r; ++j)
          y[static_cast<std::size_t>(j)] = m[static_cast<std::size_t>(i + j * in)];
        for (index_t p = 0; p < r; ++p) {  // elimination without pivoting (V is SPD)
          for (index_t q = p + 1; q < r; ++q) {
            const double f =
                a[static_cast<std::size_t>(q + p * r)] / a[static_cast<std::size_t>(p + p * r)];
            for (index_t c = p; c < r; ++c)
              a[static_cast<std::size_t>(q + c * r)] -= f * a[static_cast<std::size_t>(p + c * r)];
            y[static_cast<std::size_t>(q)] -= f * y[static_cast<std::size_t>(p)];
          }
        }
        for (index_t p = r - 1; p >= 0; --p) {
          double t = y[static_cast<std::size_t>(p)];
          for (index_t c = p + 1; c < r; ++c)
            t -= a[static_cast<std::size_t>(p + c * r)] * y[static_cast<std::size_t>(c)];
          y[static_cast<std::size_t>(p)] = t / a[static_cast<std::size_t>(p + p * r)];
        }
        for (index_t j = 0; j < r; ++j)
          u[static_cast<std::size_t>(n)][static_cast<std::size_t>(i + j * in)] =
              y[static_cast<std::size_t>(j)];
      }
    }
    double error = model_error(x, u, r);
    if (jump) {
      // C_n = P_n + j (U_n - P_n), j = (it - 1)^(1/power)
      const double j = std::pow(static_cast<double>(it - 1), 1.0 / power);
      std::vector<std::vector<double>> c = u;
      for (std::size_t n = 0; n < c.size(); ++n)
        for (std::size_t i = 0; i < c[n].size(); ++i)
          c[n][i] = before[n][i] + j * (u[n][i] - before[n][i]);
      const double jumped = model_error(x, c, r);
      if (jumped < errors.back()) {
        u = c;
        error = jumped;
        failures = 0;
      } else if (++failures == 4) {
        power += 1.0;
        failures = 0;
      }
    }
    errors.push_back(error);
  }
  return errors;
}

TEST(CpOrthogonalise, FollowsAlsWithQrOfTheFactorsInTheFirstSweeps) {
  // Mode 2 (I = 3 < R = 4) is never orthogonalised; rank 4 > the planted 3 leaves the
  // factors ill-conditioned when the second sweep's QR takes them.
  const auto p = planted({6, 8, 3}, 3, 0.5, 0.05, 41);
  const index_t r = 4;
  std::vector<Matrix<double>> start;
  for (std::size_t n = 0; n < 3; ++n)
    start.push_back(random_matrix<double>(p.tensor.dims()[n], r, 50 + n));
  for (int orth : {1, 3}) {
    CpOptions o;
    o.rank = r;
    o.max_iters = 6;
    o.tol = 0.0;
    o.orthogonalise = orth;
    const CpResult<double> res = cp_als(p.tensor, o, start);
    std::vector<std::vector<double>> u;
    for (const auto& f : start) u.emplace_back(f.data(), f.data() + f.size());
    const std::vector<double> errors = reference_als(p.tensor, u, r, 6, orth);
    ASSERT_EQ(res.fit_history.size(), errors.size());
    for (std::size_t i = 0; i < errors.size(); ++i)
      EXPECT_NEAR(res.fit_history[i], 1.0 - errors[i], 1e-9)
          << "orthogonalise " << orth << ", sweep " << i + 1;
    KTensor<double> ref;
    ref.weights.assign(static_cast<std::size_t>(r), 1.0);
    for (std::size_t n = 0; n < 3; ++n) ref.factors.emplace_back(p.tensor.dims()[n], r, u[n]);
    EXPECT_LT(rel_diff(naive_full(res.model), naive_full(ref)), 1e-9) << "orthogonalise " << orth;
  }
  // The QR changes the trajectory: without it the errors differ after the first sweep.
  CpOptions o;
  o.rank = r;
  o.max_iters = 2;
  o.tol = 0.0;
  std::vector<std::vector<double>> u;
  for (const auto& f : start) u.emplace_back(f.data(), f.data() + f.size());
  EXPECT_GT(std::abs(cp_als(p.tensor, o, start).fit_history[1] -
                     (1.0 - reference_als(p.tensor, u, r, 2, 2)[1])),
            1e-6);
}

TEST(CpOrthogonalise, RankDeficientFactorsStillConverge) {
  // An exact rank-3 tensor at R = 4: after one sweep every factor has rank 3 (its Gram
  // is singular to working precision) when the second and third sweeps take its QR; the
  // run still reaches the exact model, as TensorLy's does.
  const auto p = planted({6, 8, 7}, 3, 0.0, 0.0, 43);
  CpOptions o;
  o.rank = 4;
  o.init = CpInit::random;
  o.max_iters = 200;
  o.tol = 1e-12;
  o.orthogonalise = 3;
  const CpResult<double> res = cp_als(p.tensor, o);
  for (double f : res.fit_history) EXPECT_TRUE(std::isfinite(f));
  EXPECT_LT(exact_relative_error(p.tensor, res.model), 1e-4);
}

TEST(CpLineSearch, TensorlyRuleFollowsTensorlysJumpsOnUnnormalisedFactors) {
  // Collinear components: ALS crawls, and most jumps are taken.
  const auto p = planted({9, 8, 7}, 3, 0.8, 0.02, 47);
  const index_t r = 3;
  std::vector<Matrix<double>> start;
  for (std::size_t n = 0; n < 3; ++n)
    start.push_back(random_matrix<double>(p.tensor.dims()[n], r, 60 + n));
  std::vector<std::vector<double>> u;
  for (const auto& f : start) u.emplace_back(f.data(), f.data() + f.size());
  const std::vector<double> errors = reference_als(p.tensor, u, r, 40, 2, true);
  CpOptions o;
  o.rank = r;
  o.max_iters = 40;
  o.tol = 0.0;
  o.orthogonalise = 2;
  o.line_search = true;
  o.line_search_rule = CpLineSearchRule::tensorly;
  const CpResult<double> res = cp_als(p.tensor, o, start);
  EXPECT_GE(res.line_search_accepted, 5);
  ASSERT_EQ(res.fit_history.size(), errors.size());
  for (std::size_t i = 0; i < errors.size(); ++i)
    EXPECT_NEAR(res.fit_history[i], 1.0 - errors[i], 1e-9) << "sweep " << i + 1;
  // Tenfold's rule (the weights in the last factor, the sweep's error to beat) jumps
  // elsewhere.
  o.line_search_rule = CpLineSearchRule::tenfold;
  EXPECT_GT(std::abs(cp_als(p.tensor, o, start).fit_history[12] - res.fit_history[12]), 1e-7);
  EXPECT_EQ(parse_cp_line_search_rule(to_string(CpLineSearchRule::tensorly)),
            CpLineSearchRule::tensorly);
  expect_throw_with<InvalidArgument>(
      [] { parse_cp_line_search_rule("bro"); },
      "unknown line search rule 'bro' (expected tenfold or tensorly)");
}

// TensorLy's sparsity error by definition: ||R - S|| for R = X - M and S the entries of R
// with |r| >= the k-th largest |r| (sorting all magnitudes).
double sparsity_error(const Tensor<double>& x, const std::vector<std::vector<double>>& u, index_t r,
                      std::size_t k) {
  KTensor<double> model;
  model.weights.assign(static_cast<std::size_t>(r), 1.0);
  for (std::size_t n = 0; n < u.size(); ++n) model.factors.emplace_back(x.dims()[n], r, u[n]);
  const std::vector<double> m = naive_full(model);
  std::vector<double> mags;
  for (index_t i = 0; i < x.numel(); ++i)
    mags.push_back(std::abs(x[i] - m[static_cast<std::size_t>(i)]));
  std::vector<double> sorted = mags;
  std::sort(sorted.begin(), sorted.end());
  const double bound = sorted[sorted.size() - k];
  double e = 0.0, norm = 0.0;
  for (index_t i = 0; i < x.numel(); ++i) {
    norm += x[i] * x[i];
    if (mags[static_cast<std::size_t>(i)] < bound)
      e += mags[static_cast<std::size_t>(i)] * mags[static_cast<std::size_t>(i)];
  }
  return std::sqrt(e / norm);
}

TEST(CpSparsity, ErrorWithoutTheLargestResidualEntriesAlongPlainAlsSweeps) {
  // Rank 3 plus 10 large outliers: the sweeps are plain ALS on X, the error of each
  // is that of X - M - S.
  auto p = planted({7, 6, 5}, 3, 0.3, 0.01, 49);
  for (index_t i = 0; i < 10; ++i) p.tensor[i * 17] += 5.0 * (i % 2 == 0 ? 1.0 : -1.0);
  const index_t r = 3;
  std::vector<Matrix<double>> start;
  for (std::size_t n = 0; n < 3; ++n)
    start.push_back(random_matrix<double>(p.tensor.dims()[n], r, 70 + n));
  CpOptions o;
  o.rank = r;
  o.max_iters = 8;
  o.tol = 0.0;
  o.sparsity = 12;
  const CpResult<double> res = cp_als(p.tensor, o, start);
  o.sparsity = 0;
  const CpResult<double> plain = cp_als(p.tensor, o, start);
  std::vector<std::vector<double>> u;
  for (const auto& f : start) u.emplace_back(f.data(), f.data() + f.size());
  ASSERT_EQ(res.fit_history.size(), 8U);
  for (int it = 1; it <= 8; ++it) {
    reference_als(p.tensor, u, r, 1, 0);
    EXPECT_NEAR(res.fit_history[static_cast<std::size_t>(it - 1)],
                1.0 - sparsity_error(p.tensor, u, r, 12), 1e-10)
        << "sweep " << it;
    EXPECT_GT(res.fit_history[static_cast<std::size_t>(it - 1)],
              plain.fit_history[static_cast<std::size_t>(it - 1)] + 1e-3);
  }
  EXPECT_LT(rel_diff(naive_full(res.model), naive_full(plain.model)), 1e-12);
  // A C-order array read in place (its modes reversed behind a view): the errors of its
  // column-major copy (the same sweeps in NumPy axis order).
  o.sparsity = 12;
  o.layout = Layout::row_major;
  o.row_major_input = RowMajorInput::copy;
  const CpResult<double> copied = cp_als(p.tensor, o, start);
  o.row_major_input = RowMajorInput::in_place;
  const CpResult<double> in_place = cp_als(p.tensor, o, start);
  ASSERT_EQ(in_place.fit_history.size(), copied.fit_history.size());
  for (std::size_t i = 0; i < copied.fit_history.size(); ++i)
    EXPECT_NEAR(in_place.fit_history[i], copied.fit_history[i], 1e-10) << "sweep " << i + 1;
  o.row_major_input = RowMajorInput::automatic;
  o.layout = Layout::col_major;
  // As many sparse entries as the tensor has: S is the whole residual.
  o.sparsity = p.tensor.numel();
  EXPECT_EQ(cp_als(p.tensor, o, start).fit, 1.0);
}

TEST(CpSparsity, Rejected) {
  Tensor<double> x = random_tensor<double>({3, 4, 2}, 5);
  CpOptions o;
  o.rank = 2;
  o.sparsity = -1;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "sparsity must be >= 0");
  o.sparsity = 3;
  o.compress = CpCompress::on;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); },
                                     "compress = on cannot be combined with sparsity");
  o.compress = CpCompress::automatic;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(x.numel()), 1);
  expect_throw_with<InvalidArgument>(
      [&] { cp_als(x, TensorView<const std::uint8_t>(mask.data(), x.dims()), o); },
      "sparsity applies to dense tensors without a mask, not to a tensor with missing entries");
  expect_throw_with<InvalidArgument>([&] { cp_als(random_ktensor<double>(x.dims(), 2, 3), o); },
                                     "not to a tensor given in CP or Tucker form");
}

TEST(CpOrthogonalise, Rejected) {
  Tensor<double> x = random_tensor<double>({3, 4, 2}, 5);
  CpOptions o;
  o.rank = 2;
  o.orthogonalise = -1;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "orthogonalise must be >= 0");
  o.orthogonalise = 2;
  o.nonnegative = true;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); },
                                     "orthogonalise cannot be combined with nonnegative");
  o.nonnegative = false;
  o.compress = CpCompress::on;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); },
                                     "compress = on cannot be combined with orthogonalise");
  o.compress = CpCompress::automatic;
  o.fixed_modes = {0};
  std::vector<Matrix<double>> start;
  for (index_t d : x.dims()) start.push_back(random_matrix<double>(d, 2, 7 + d));
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o, start); },
                                     "orthogonalise cannot be combined with fixed modes");
}

}  // namespace
}  // namespace tenfold::test
