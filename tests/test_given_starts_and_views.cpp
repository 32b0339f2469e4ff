// Given CP starts that cannot move are refused, naming the factor (by NumPy axis for
// C-order input) and the column or component, while the factor of the first update is
// never read; the attention adapter repairs its own such starts; views with a null
// pointer or bad sizes are refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cp/start_check.hpp"
#include "layout_test_util.hpp"
#include "same_bits.hpp"
#include "tenfold/attention.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"

using namespace tenfold;
using tenfold::test::fortran_array;
using tenfold::test::random_matrix;
using tenfold::test::same_bits;

// --- starts that cannot move -------------------------------------------------

namespace {

template <class F>
void expect_invalid(F&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one containing: " << text;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

CpOptions given(index_t rank) {
  CpOptions o;
  o.rank = rank;
  o.init = CpInit::given;
  return o;
}

std::vector<Matrix<double>> given_start(const std::vector<index_t>& dims, index_t rank,
                                        std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<Matrix<double>> start;
  for (index_t d : dims) start.push_back(random_matrix<double>(d, rank, gen));
  return start;
}

}  // namespace

TEST(CpStart, AllZeroStartIsRefused) {
  // It used to "converge" to fit 0 with all-zero factors and six eigen fallbacks.
  const Tensor<double> x = fortran_array<double>({5, 4, 3}, 1);
  std::vector<Matrix<double>> start;
  for (index_t d : x.dims()) start.emplace_back(d, 2);
  expect_invalid([&] { cp_als(x, given(2), start); }, "initial factor 1: column 0 is zero");
}

TEST(CpStart, ZeroColumnIsNamedByNumPyAxis) {
  const Tensor<double> x = fortran_array<double>({5, 4, 3, 6}, 1);
  CpOptions o = given(3);
  std::vector<Matrix<double>> start = given_start(x.dims(), 3, 2);
  for (index_t i = 0; i < 3; ++i) start[2](i, 1) = 0.0;
  expect_invalid([&] { cp_als(x, o, start); }, "initial factor 2: column 1 is zero");
  o.layout = Layout::row_major;
  expect_invalid([&] { cp_als(x, o, start); },
                 "initial factor of NumPy axis 1 (mode 2): column 1 is zero");
}

TEST(CpStart, FactorOfTheFirstUpdateIsNotRead) {
  // The first update (NumPy axis 0) reads only the other factors: a zero column there
  // is harmless, and the result is that of any other start with the same other factors.
  const Tensor<double> x = fortran_array<double>({5, 4, 3}, 1);
  CpOptions o = given(2);
  std::vector<Matrix<double>> start = given_start(x.dims(), 2, 3);
  o.max_iters = 5;
  const CpResult<double> before = cp_als(x, o, start);
  for (index_t i = 0; i < 5; ++i) start[0](i, 0) = 0.0;
  const CpResult<double> zero = cp_als(x, o, start);
  EXPECT_TRUE(same_bits(before.fit_history, zero.fit_history));
  // Row-major: the first update is of the last mode.
  o = given(2);
  start = given_start(x.dims(), 2, 3);
  o.layout = Layout::row_major;
  for (index_t i = 0; i < 3; ++i) start[2](i, 1) = 0.0;
  EXPECT_NO_THROW(cp_als(x, o, start));
  start[2] = given_start(x.dims(), 2, 3)[2];
  for (index_t i = 0; i < 5; ++i) start[0](i, 1) = 0.0;
  expect_invalid([&] { cp_als(x, o, start); },
                 "initial factor of NumPy axis 2 (mode 0): column 1 is zero");
}

TEST(CpStart, DependentComponentsAreRefused) {
  // Components 1 and 2 equal in every factor the first update reads: the normal
  // matrices stay singular and the two can never separate.
  const Tensor<double> x = fortran_array<double>({6, 5, 4}, 1);
  CpOptions o = given(3);
  std::vector<Matrix<double>> start = given_start(x.dims(), 3, 4);
  for (std::size_t n = 1; n < 3; ++n) {
    Matrix<double>& f = start[n];
    for (index_t i = 0; i < f.rows(); ++i) f(i, 2) = 3.0 * f(i, 1);  // parallel: same direction
  }
  expect_invalid([&] { cp_als(x, o, start); },
                 "component 2 of the initial factors is a linear combination of the components "
                 "before it in the factors the first update reads (NumPy axes 1, 2");
  // Parallel in one read factor only: the Khatri-Rao product still has independent
  // columns, and ALS can move.
  start[2] = given_start(x.dims(), 3, 5)[2];
  EXPECT_NO_THROW(cp_als(x, o, start));
  // The check itself does not overflow or underflow: scaled starts give the same answer.
  for (double scale : {1e200, 1e-200}) {
    std::vector<Matrix<double>> scaled = given_start(x.dims(), 3, 4);
    for (Matrix<double>& f : scaled)
      for (double& v : f.values()) v *= scale;
    EXPECT_TRUE(detail::stuck_components<double>(scaled, 3, {1, 2}).empty()) << scale;
    for (index_t i = 0; i < 5; ++i) scaled[1](i, 2) = scaled[1](i, 0);
    for (index_t i = 0; i < 4; ++i) scaled[2](i, 2) = scaled[2](i, 0);
    EXPECT_EQ(detail::stuck_components<double>(scaled, 3, {1, 2}), std::vector<index_t>{2})
        << scale;
  }
  // More components than rows of the Khatri-Rao product (R > 2 * 2): dependence is
  // unavoidable for every start, so it is not reported as stuck; cp_als refuses such a
  // rank anyway, since it exceeds the rank of every tensor of the shape.
  const Tensor<double> small = fortran_array<double>({6, 2, 2}, 1);
  const std::vector<Matrix<double>> over = given_start(small.dims(), 5, 6);
  EXPECT_TRUE(detail::stuck_components<double>(over, 5, {1, 2}).empty());
  EXPECT_THROW(cp_als(small, given(5), over), InvalidArgument);
}

TEST(CpStart, AttentionStartsWithEqualHeadsAreRepaired) {
  // Two heads with equal weights give the structured starts equal components, which
  // CP-ALS would refuse: the adapter replaces them (R = 8 = the tensor's rank here).
  attention::QueryKeyLayer<double> layer;
  layer.heads = 3;
  layer.head_dim = 4;
  std::mt19937_64 gen(1);
  std::normal_distribution<double> g(0.0, 0.25);
  layer.query_weight = Matrix<double>(16, 12);
  layer.key_weight = Matrix<double>(16, 12);
  for (double& v : layer.query_weight.values()) v = g(gen);
  for (double& v : layer.key_weight.values()) v = g(gen);
  for (index_t i = 0; i < 16; ++i)
    for (index_t j = 0; j < 4; ++j) {
      layer.query_weight(i, 4 + j) = layer.query_weight(i, j);
      layer.key_weight(i, 4 + j) = layer.key_weight(i, j);
    }
  for (attention::Init init : {attention::Init::structured, attention::Init::heads}) {
    attention::CompressOptions o;
    o.rank = 8;
    o.init = init;
    const auto res = attention::compress(layer, o);
    EXPECT_LT(res.relative_error, 1e-4) << static_cast<int>(init);
  }
}

// --- views -----------------------------------------------------------------------

TEST(Views, NullDataWithElementsIsRefused) {
  CpOptions cp;
  cp.rank = 2;
  TuckerOptions tk;
  tk.ranks = {2, 2, 2};
  const auto null_view = [] { return TensorView<const double>(nullptr, {4, 3, 5}); };
  expect_invalid([&] { cp_als(null_view(), cp); },
                 "(4, 3, 5) (60 elements) has a null data pointer");
  expect_invalid([&] { tucker(null_view(), tk); }, "null data pointer");
  expect_invalid([&] { norm(null_view()); }, "null data pointer");
  // An empty view may be null; the algorithms then refuse the empty shape.
  EXPECT_NO_THROW(TensorView<const double>(nullptr, {4, 0, 5}));
  expect_invalid([&] { cp_als(TensorView<const double>(nullptr, {4, 0, 5}), cp); }, "is empty");
  // Negative and overflowing sizes.
  const double v = 1.0;
  expect_invalid([&] { TensorView<const double>(&v, {2, -1}); }, "negative");
  expect_invalid(
      [&] {
        TensorView<const double>(&v, {index_t{1} << 40, index_t{1} << 40});
      },
      "64-bit");
}
