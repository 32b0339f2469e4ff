// A C-order array read in place (Layout::row_major, RowMajorInput::in_place) goes
// through the start and the sweeps of its Fortran-order copy: CP (given starts, missing
// values) and Tucker agree with it to rounding; which arrays automatic copies; the
// signs of CP and Tucker results depend on the model only.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/layout.hpp"
#include "cp/cp_als.hpp"
#include "layout_test_util.hpp"
#include "relative_difference.hpp"
#include "same_bits.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/tucker.hpp"
#include "tucker/steps.hpp"

using namespace tenfold;
using tenfold::test::c_order;
using tenfold::test::cp_both_ways;
using tenfold::test::fortran_array;
using tenfold::test::random_matrix;
using tenfold::test::relative_difference;
using tenfold::test::same_bits;
using tenfold::test::tucker_both_ways;

// --- C-order arrays read in place ----------------------------------------------

namespace {

// Read in place, a C-order array goes through the start and the sweeps of its
// Fortran-order copy; only the sums over the tensor run in another (memory) order. On
// these problems the results then agree to within 1e-12 (a few thousand units of
// rounding, accumulated over up to 40 sweeps); kRounding = 2^-30 leaves a margin of
// about 1000 and still fails at once on a wrong start or sweep order (those differ in
// the first digits).
constexpr double kRounding = 0x1p-30;

void expect_close_cp(const CpResult<double>& f, const CpResult<double>& c,
                     const std::string& what) {
  EXPECT_EQ(f.compressed, c.compressed) << what;
  EXPECT_EQ(f.compression_ranks, detail::reversed(c.compression_ranks)) << what;
  const int order = f.model.order();
  ASSERT_EQ(c.model.order(), order) << what;
  // The sweeps agree to rounding; where the stopping decision is taken on a change of fit
  // at its threshold, rounding may decide it one way or the other: then both converged,
  // the common sweeps agree and so do the final fits and models.
  const std::size_t common = std::min(f.fit_history.size(), c.fit_history.size());
  EXPECT_LE(relative_difference(
                std::vector<double>(f.fit_history.begin(), f.fit_history.begin() + common),
                std::vector<double>(c.fit_history.begin(), c.fit_history.begin() + common)),
            kRounding)
      << what;
  if (f.iterations != c.iterations) {
    EXPECT_EQ(f.stop, CpStop::converged) << what;
    EXPECT_EQ(c.stop, CpStop::converged) << what;
    EXPECT_NEAR(f.fit, c.fit, 1e-9) << what;
    EXPECT_LE(relative_difference(f.model.full().values(), c_order(c.model.full()).values()), 1e-6)
        << what;
    return;
  }
  EXPECT_EQ(f.stop, c.stop) << what;
  EXPECT_LE(relative_difference(f.model.weights, c.model.weights), kRounding) << what;
  for (int a = 0; a < order; ++a) {
    EXPECT_LE(
        relative_difference(f.model.factors[static_cast<std::size_t>(a)].values(),
                            c.model.factors[static_cast<std::size_t>(order - 1 - a)].values()),
        kRounding)
        << what << ", axis " << a;
  }
}

}  // namespace

TEST(Layout, RowMajorInputIsCopiedUpToTheLimitInAutomatic) {
  using detail::copies_to_axis_order;
  const index_t limit = static_cast<index_t>(kRowMajorCopyMaxBytes / sizeof(double));
  EXPECT_TRUE(copies_to_axis_order(Layout::row_major, RowMajorInput::automatic, limit, 8));
  EXPECT_FALSE(copies_to_axis_order(Layout::row_major, RowMajorInput::automatic, limit + 1, 8));
  EXPECT_TRUE(copies_to_axis_order(Layout::row_major, RowMajorInput::copy, 4 * limit, 8));
  EXPECT_FALSE(copies_to_axis_order(Layout::row_major, RowMajorInput::in_place, 16, 8));
  EXPECT_FALSE(copies_to_axis_order(Layout::col_major, RowMajorInput::copy, 16, 8));
}

TEST(Layout, CpInPlaceAgreesWithFortranOrder) {
  cp_both_ways(RowMajorInput::in_place, true, expect_close_cp);
}

TEST(Layout, CpFromAGivenStartInPlaceAgreesWithFortranOrder) {
  std::mt19937_64 gen(8);
  const Tensor<double> f = fortran_array<double>({12, 9, 7}, 8);
  const Tensor<double> c = c_order(f);
  std::vector<Matrix<double>> start;
  for (index_t d : f.dims()) start.push_back(random_matrix<double>(d, 4, gen));
  const std::vector<Matrix<double>> start_c = detail::reversed(start);
  for (CpCompress compress : {CpCompress::off, CpCompress::on}) {
    CpOptions o;
    o.rank = 4;
    o.init = CpInit::given;
    o.max_iters = 30;
    o.tol = 0.0;
    o.compress = compress;
    const CpResult<double> rf = cp_als(f, o, start);
    o.layout = Layout::row_major;
    o.row_major_input = RowMajorInput::in_place;
    expect_close_cp(rf, cp_als(c, o, start_c),
                    "given start, compress " + std::string(to_string(compress)));
  }
}

TEST(Layout, CpWithMissingValuesInPlaceAgreesWithFortranOrder) {
  const Tensor<double> f = fortran_array<double>({9, 7, 5, 4}, 6);
  Tensor<std::uint8_t> observed(f.dims());
  std::mt19937_64 gen(6);
  for (std::uint8_t& v : observed.values()) v = gen() % 4 != 0;
  const Tensor<double> c = c_order(f);
  const Tensor<std::uint8_t> observed_c = detail::reverse_modes<std::uint8_t>(observed.view());
  for (CpMissingSolver solver : {CpMissingSolver::em, CpMissingSolver::weighted}) {
    CpOptions o;
    o.rank = 3;
    o.max_iters = 30;
    o.tol = 0.0;
    o.missing_solver = solver;
    const CpResult<double> rf = cp_als(f, observed.view(), o);
    o.layout = Layout::row_major;
    o.row_major_input = RowMajorInput::in_place;
    expect_close_cp(rf, cp_als(c, observed_c.view(), o),
                    "missing values, " + std::string(to_string(solver)));
  }
}

TEST(Layout, TuckerInPlaceAgreesWithFortranOrder) {
  tucker_both_ways(RowMajorInput::in_place, [](const TuckerResult<double>& rf,
                                               const TuckerResult<double>& rc, int order,
                                               const std::string& what) {
    // The ranks, eigenvalues and factors of every axis (signs fixed), the model as a
    // tensor, and the error history.
    EXPECT_EQ(rf.model.ranks(), detail::reversed(rc.model.ranks())) << what;
    EXPECT_LE(relative_difference(rf.model.full().values(), c_order(rc.model.full()).values()),
              kRounding)
        << what;
    // A rank above the product of the others (eps here truncates the 3-way array to
    // ranks (2, 1, 1)) leaves HOOI a column that is any unit vector orthogonal to the
    // first, chosen by rounding: the first sweeps and that column then differ by more,
    // the model and the final error do not.
    const std::vector<index_t> ranks = rf.model.ranks();
    index_t all = 1;
    for (index_t r : ranks) all *= r;
    const bool free_column =
        std::any_of(ranks.begin(), ranks.end(), [&](index_t r) { return r * r > all; });
    for (int a = 0; a < order; ++a) {
      const auto fa = static_cast<std::size_t>(a), ca = static_cast<std::size_t>(order - 1 - a);
      EXPECT_LE(relative_difference(rf.eigenvalues[fa], rc.eigenvalues[ca]), kRounding)
          << what << ", axis " << a;
      if (free_column) continue;
      EXPECT_LE(relative_difference(rf.model.factors[fa].values(), rc.model.factors[ca].values()),
                kRounding)
          << what << ", axis " << a;
    }
    if (free_column) {
      EXPECT_LE(std::abs(rf.relative_error - rc.relative_error), kRounding) << what;
    } else {
      EXPECT_LE(relative_difference(rf.error_history, rc.error_history), kRounding) << what;
    }
  });
}

TEST(Layout, SignsOfTheResultDependOnTheModelOnly) {
  // Two runs that reach the same model to rounding may end with different signs in
  // pairs of modes (a C-order array read in place, an eigenvector of the start): the
  // arranged model must not depend on them. Every even set of flipped columns of
  // every component gives the bits of the unflipped model.
  std::mt19937_64 gen(21);
  std::normal_distribution<double> g(0.0, 1.0);
  for (int order : {3, 4}) {
    KTensor<double> m;
    m.weights = {3.0, 2.0, 1.0};
    for (int n = 0; n < order; ++n) {
      Matrix<double> f(5 + n, 3);
      for (double& v : f.values()) v = g(gen);
      m.factors.push_back(std::move(f));
    }
    KTensor<double> expected = m;
    detail::arrange(expected);
    for (unsigned mask = 0; mask < (1u << order); ++mask) {
      if (std::popcount(mask) % 2 != 0) continue;
      for (index_t j = 0; j < 3; ++j) {
        KTensor<double> flipped = m;
        for (int n = 0; n < order; ++n) {
          if ((mask >> n & 1u) == 0) continue;
          Matrix<double>& f = flipped.factors[static_cast<std::size_t>(n)];
          for (index_t i = 0; i < f.rows(); ++i) f(i, j) = -f(i, j);
        }
        detail::arrange(flipped);
        for (int n = 0; n < order; ++n) {
          EXPECT_TRUE(same_bits(flipped.factors[static_cast<std::size_t>(n)].values(),
                                expected.factors[static_cast<std::size_t>(n)].values()))
              << order << "-way, flips " << mask << " of component " << j << ", mode " << n;
        }
      }
    }
  }
}

TEST(Layout, TuckerSignsDependOnTheModelOnly) {
  // Negating a factor column with its core slice leaves the model as it is; the fixed
  // signs are those of the unflipped model, bit for bit, and the tensor is unchanged.
  std::mt19937_64 gen(22);
  std::normal_distribution<double> g(0.0, 1.0);
  TTensor<double> m(fortran_array<double>({3, 2, 4}, 9), {});
  for (index_t d : {6, 5, 7}) {
    m.factors.emplace_back(d, m.core.dim(static_cast<int>(m.factors.size())));
    for (double& v : m.factors.back().values()) v = g(gen);
  }
  TTensor<double> expected = m;
  detail::fix_signs(expected);
  EXPECT_LE(relative_difference(expected.full().values(), m.full().values()), 1e-15);
  for (int n = 0; n < 3; ++n) {
    for (index_t j = 0; j < m.core.dim(n); ++j) {
      TTensor<double> flipped = m;
      Matrix<double>& u = flipped.factors[static_cast<std::size_t>(n)];
      for (index_t i = 0; i < u.rows(); ++i) u(i, j) = -u(i, j);
      std::vector<index_t> idx(3, 0);
      for (index_t k = 0; k < flipped.core.numel(); ++k) {
        if (idx[static_cast<std::size_t>(n)] == j) flipped.core[k] = -flipped.core[k];
        for (int q = 0; q < 3 && ++idx[static_cast<std::size_t>(q)] == flipped.core.dim(q); ++q)
          idx[static_cast<std::size_t>(q)] = 0;
      }
      detail::fix_signs(flipped);
      EXPECT_TRUE(same_bits(flipped.core.values(), expected.core.values())) << n << ", " << j;
      for (std::size_t q = 0; q < 3; ++q)
        EXPECT_TRUE(same_bits(flipped.factors[q].values(), expected.factors[q].values()))
            << n << ", " << j << ", factor " << q;
    }
  }
}
