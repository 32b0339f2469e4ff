// Tucker on real tensors (tests/data, from the TensorLy data folder; see its README):
// COVID-19 systems serology, 438 samples x 6 antigens x 11 receptors, and the IL-2
// signalling responses, which have missing (NaN) entries.
#include <gtest/gtest.h>

#include <cmath>

#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tucker_test_util.hpp"

namespace tenfold::test {
namespace {

// NumPy shape (438, 6, 11) in C order: a column-major tensor of shape (11, 6, 438).
Tensor<double> covid() {
  Tensor<double> x = io::load_npy<double>(TENFOLD_TEST_DATA_DIR "/COVID19_data.npy");
  EXPECT_EQ(x.dims(), (std::vector<index_t>{11, 6, 438}));
  return x;
}

TEST(TuckerReal, CovidWithinTolerance) {
  const Tensor<double> x = covid();
  for (double eps : {0.1, 0.01}) {
    for (TuckerMethod method : {TuckerMethod::sthosvd, TuckerMethod::hosvd, TuckerMethod::hooi}) {
      TuckerOptions o;
      o.method = method;
      o.eps = eps;
      const TuckerResult<double> r = tucker(x, o);
      const double err = true_relative_error(x, r.model);
      EXPECT_LE(err, eps) << to_string(method) << " eps " << eps;
      EXPECT_NEAR(r.relative_error, err, 1e-7) << to_string(method) << " eps " << eps;
      EXPECT_LT(orthonormality_defect(r.model), 1e-12);
      // The samples mode (438) has rank at most 11 * 6 = 66.
      EXPECT_LE(r.model.ranks()[2], 66);
    }
  }
}

TEST(TuckerReal, CovidFloatAgreesWithDouble) {
  const Tensor<double> x = covid();
  const Tensor<float> xf = convert<float, double>(x.view());
  TuckerOptions o;
  o.eps = 0.1;
  const TuckerResult<double> rd = tucker(x, o);
  o.eps.reset();
  o.ranks = rd.model.ranks();
  o.max_iters = 5;
  for (TuckerMethod method : {TuckerMethod::sthosvd, TuckerMethod::hooi}) {
    o.method = method;
    const TuckerResult<double> d = tucker(x, o);
    const TuckerResult<float> f = tucker(xf, o);
    expect_float_agrees(x, d, f, method);
  }
}

// 438 samples span at most 66 dimensions: ranks (11, 6, 66) compress without loss,
// and CP on the Tucker model gives the fit of CP on the tensor.
TEST(TuckerReal, CovidLosslessTuckerThenCp) {
  const Tensor<double> x = covid();
  TuckerOptions o;
  o.ranks = {11, 6, 66};
  const TuckerResult<double> t = tucker(x, o);
  ASSERT_LT(true_relative_error(x, t.model), 1e-12);
  CpOptions co;
  co.rank = 3;
  co.init = CpInit::nvecs;
  co.tol = 1e-10;
  co.max_iters = 500;
  const CpResult<double> on_full = cp_als(x, co);
  const CpResult<double> on_tucker = cp_als(t.model, co);
  EXPECT_NEAR(on_tucker.fit, on_full.fit, 1e-8);
  EXPECT_NEAR(1.0 - rel_diff(on_tucker.model.full().values(), x.values()), on_full.fit, 1e-8);
}

TEST(TuckerReal, Il2HasMissingEntries) {
  const Tensor<double> x = io::load_npy<double>(TENFOLD_TEST_DATA_DIR "/IL2_Response_Tensor.npy");
  int missing = 0;
  for (double v : x.values()) missing += std::isnan(v) ? 1 : 0;
  EXPECT_EQ(missing, 192);
  TuckerOptions o;
  o.eps = 0.1;
  expect_error<InvalidArgument>([&] { tucker(x, o); },
                                "Tucker input tensor has a non-finite entry (NaN)");
}

}  // namespace
}  // namespace tenfold::test
