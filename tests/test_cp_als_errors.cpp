// CP-ALS refuses every bad input with the exception that names it: options (by their
// field), given factors, a start with another init on every kind of input, tensors
// (order, empty modes, non-finite entries), Kruskal inputs, and unknown names.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cp_test_util.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// --- bad input ------------------------------------------------------------------------------

TEST(CpAlsErrors, Options) {
  // Each bad option is an InvalidOption naming its field, which front ends map to their
  // own spelling (--max-iters, n_iter_max); numbers are printed as typed.
  const Tensor<double> x = random_tensor<double>({3, 4, 2}, 1);
  const auto rejects = [&](auto change, const std::string& option, const std::string& problem) {
    CpOptions o;
    o.rank = 2;
    change(o);
    try {
      cp_als(x, o);
      ADD_FAILURE() << "expected " << option << " to be refused";
    } catch (const InvalidOption& e) {
      EXPECT_EQ(e.option(), option) << e.what();
      EXPECT_NE(e.problem().find(problem), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()), option + " " + e.problem());
    }
  };
  rejects([](auto& o) { o.rank = 0; }, "rank", "must be at least 1, got 0");
  rejects([](auto& o) { o.rank = -3; }, "rank", "must be at least 1, got -3");
  rejects([](auto& o) { o.max_iters = -1; }, "max_iters", "must be >= 0, got -1");
  rejects([](auto& o) { o.tol = -1e-3; }, "tol", "must be finite and >= 0, got -0.001");
  rejects([](auto& o) { o.tol = kNaN; }, "tol", "must be finite and >= 0, got nan");
  rejects([](auto& o) { o.tol = HUGE_VAL; }, "tol", "got inf");
  rejects([](auto& o) { o.ridge = -1.0; }, "ridge", "must be finite and >= 0, got -1");
  rejects([](auto& o) { o.ridge = -1e-300; }, "ridge", "got -1e-300");
  rejects([](auto& o) { o.ridge = kNaN; }, "ridge", "got nan");
  rejects([](auto& o) { o.time_limit = -1.0; }, "time_limit", "must be >= 0, got -1");
  rejects([](auto& o) { o.time_limit = kNaN; }, "time_limit", "got nan");
  rejects([](auto& o) { o.n_starts = -1; }, "n_starts",
          "must be at least 0 (0: automatic), got -1");
  // no 3 x 4 x 2 tensor has it
  rejects([](auto& o) { o.rank = index_t{1} << 40; }, "rank", "1099511627776 exceeds 6");
  if (!cuda_compiled()) {
    CpOptions o;
    o.backend = Backend::cuda;
    EXPECT_THROW(cp_als(x, o), NotCompiled);
  }
}

TEST(CpAlsErrors, GivenFactors) {
  const Tensor<double> x = random_tensor<double>({3, 4, 2}, 1);
  CpOptions o;
  o.rank = 2;
  o.init = CpInit::given;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); },
                                     "init = given needs initial factors (one I_n x R matrix per "
                                     "mode), and none were passed");
  std::vector<Matrix<double>> start = {Matrix<double>(3, 2), Matrix<double>(4, 2)};
  expect_throw_with<DimensionMismatch>([&] { cp_als(x, o, start); },
                                       "needs 3 initial factors, got 2");
  start.push_back(Matrix<double>(2, 3));
  expect_throw_with<DimensionMismatch>([&] { cp_als(x, o, start); },
                                       "initial factor 2 is 2x3, expected 2x2");
  start[2] = Matrix<double>(3, 2);
  expect_throw_with<DimensionMismatch>([&] { cp_als(x, o, start); },
                                       "initial factor 2 is 3x2, expected 2x2");
  start[2] = Matrix<double>(2, 2);
  start[1](3, 1) = kNaN;
  expect_throw_with<InvalidArgument>(
      [&] { cp_als(x, o, start); },
      "initial factor 1 has a non-finite entry (NaN) at index (3, 1)");
  // Independent columns (zeros elsewhere are fine; the refused starts are in
  // test_given_starts_and_views.cpp).
  for (Matrix<double>& f : start) {
    f(0, 0) = 1.0;
    f(1, 1) = 1.0;
  }
  start[1](3, 1) = 0.0;
  EXPECT_NO_THROW(cp_als(x, o, start));
  // A start of one's own goes with init given or auto, never with another init.
  for (CpInit init : {CpInit::random, CpInit::nvecs}) {
    o.init = init;
    expect_throw_with<InvalidArgument>([&] { cp_als(x, o, start); },
                                       "init = " + std::string(to_string(init)) +
                                           " cannot start from initial factors; pass init = "
                                           "given or auto with them, or no initial factors");
  }
}

TEST(CpAlsErrors, EveryInputRefusesAStartWithAnotherInit) {
  // The same rule on the dense tensor with a mask, the Kruskal and the Tucker input.
  const Tensor<double> x = random_tensor<double>({3, 4, 2}, 1);
  const std::vector<std::uint8_t> all(static_cast<std::size_t>(x.numel()), 1);
  const TensorView<const std::uint8_t> observed(all.data(), x.dims());
  const KTensor<double> k = random_ktensor<double>({3, 4, 2}, 2, 2);
  const TTensor<double> t(random_tensor<double>({2, 2, 2}, 3),
                          {random_matrix<double>(3, 2, 4), random_matrix<double>(4, 2, 5),
                           random_matrix<double>(2, 2, 6)});
  std::vector<Matrix<double>> start;
  for (index_t d : x.dims()) start.push_back(random_matrix<double>(d, 2, 30 + d));
  CpOptions o;
  o.rank = 2;
  o.init = CpInit::random;
  const std::string says = "init = random cannot start from initial factors";
  expect_throw_with<InvalidArgument>([&] { cp_als(x, observed, o, start); }, says);
  expect_throw_with<InvalidArgument>([&] { cp_als(k, o, start); }, says);
  expect_throw_with<InvalidArgument>([&] { cp_als(t, o, start); }, says);
  o.init = CpInit::given;
  const std::string none = "init = given needs initial factors";
  expect_throw_with<InvalidArgument>([&] { cp_als(x, observed, o); }, none);
  expect_throw_with<InvalidArgument>([&] { cp_als(k, o); }, none);
  expect_throw_with<InvalidArgument>([&] { cp_als(t, o); }, none);
}

TEST(CpAlsErrors, Tensors) {
  CpOptions o;
  o.rank = 2;
  expect_throw_with<InvalidArgument>(
      [&] {
        cp_als(Tensor<double>({3, 0, 2}), o);
      },
      "(3, 0, 2) is empty (mode 1 has size 0)");
  expect_throw_with<InvalidArgument>([&] { cp_als(Tensor<double>({5}), o); },
                                     "order >= 2, got order 1");
  expect_throw_with<InvalidArgument>([&] { cp_als(Tensor<double>(std::vector<index_t>{}), o); },
                                     "got order 0");
  Tensor<double> x = random_tensor<double>({3, 4, 2}, 1);
  x(2, 3, 1) = -std::numeric_limits<double>::infinity();
  x(1, 0, 1) = kNaN;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); },
                                     "non-finite entry (NaN) at index (1, 0, 1)");
  x(1, 0, 1) = 0.0;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "(Inf) at index (2, 3, 1)");
  Tensor<float> xf = random_tensor<float>({2, 2, 3}, 1);
  xf(1, 0, 2) = std::numeric_limits<float>::quiet_NaN();
  expect_throw_with<InvalidArgument>([&] { cp_als(xf, o); }, "(1, 0, 2)");
}

TEST(CpAlsErrors, KruskalInput) {
  CpOptions o;
  o.rank = 2;
  KTensor<double> k = random_ktensor<double>({3, 4}, 2, 1);
  k.factors[1](0, 0) = kNaN;
  expect_throw_with<InvalidArgument>([&] { cp_als(k, o); }, "factor 1 has a non-finite entry");
  expect_throw_with<InvalidArgument>([&] { cp_als(random_ktensor<double>({5}, 2, 1), o); },
                                     "order >= 2, got order 1");
  expect_throw_with<InvalidArgument>([&] { cp_als(KTensor<double>(), o); }, "no factor matrices");
  o.init = CpInit::given;
  const std::vector<Matrix<double>> start = {Matrix<double>(3, 2), Matrix<double>(5, 2)};
  expect_throw_with<DimensionMismatch>(
      [&] {
        cp_als(random_ktensor<double>({3, 4}, 2, 1), o, start);
      },
      "initial factor 1 is 5x2, expected 4x2");
}

TEST(CpAlsErrors, Names) {
  EXPECT_EQ(parse_cp_init("nvecs"), CpInit::nvecs);
  EXPECT_EQ(to_string(CpInit::given), "given");
  EXPECT_EQ(to_string(CpStop::time_limit), "time_limit");
  expect_throw_with<InvalidArgument>([] { parse_cp_init("svd"); }, "unknown init 'svd'");
}

}  // namespace
}  // namespace tenfold::test
