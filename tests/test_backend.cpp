// Backend selection: names, and what asking for cuda does where it cannot run.
// Compiled in every configuration.
#include <gtest/gtest.h>

#include <string>

#include "tenfold/backend.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace {

using tenfold::Backend;

TEST(Backend, NamesRoundTrip) {
  for (Backend b : {Backend::cpu, Backend::cuda, Backend::reference}) {
    EXPECT_EQ(tenfold::parse_backend(tenfold::to_string(b)), b);
  }
  EXPECT_EQ(tenfold::to_string(Backend::cpu), "cpu");
  EXPECT_EQ(tenfold::to_string(Backend::cuda), "cuda");
  EXPECT_EQ(tenfold::to_string(Backend::reference), "reference");
}

TEST(Backend, UnknownNameIsRejected) {
  try {
    tenfold::parse_backend("gpu");
    FAIL() << "parse_backend accepted 'gpu'";
  } catch (const tenfold::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'gpu'"), std::string::npos) << e.what();
    // The message lists the names, from the one table of backend names.
    EXPECT_NE(std::string(e.what()).find("(expected cpu, cuda or reference)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tenfold::parse_backend(""), tenfold::InvalidArgument);
  EXPECT_THROW(tenfold::parse_backend("CPU"), tenfold::InvalidArgument);
}

TEST(Backend, BlasInfoNamesTheBuildsBlasAndTheKernelsInUse) {
  const tenfold::BlasInfo info = tenfold::blas_info();
  EXPECT_EQ(info.library, TENFOLD_BLAS_CHOICE);  // cmake/blas.cmake
  EXPECT_FALSE(info.kernel.empty());
  const bool openblas = info.library != "blis";
  EXPECT_EQ(info.version.rfind(openblas ? "OpenBLAS " : "BLIS ", 0), 0u) << info.version;
  // A DYNAMIC_ARCH OpenBLAS names the kernels it loaded in its build description too:
  // both answers come from the library in use (python/tests/test_runtime.py forces
  // other kernels and reads the report).
  if (openblas) EXPECT_NE(info.version.find(" " + info.kernel + " "), std::string::npos);
}

TEST(Backend, AvailableImpliesCompiled) {
  EXPECT_TRUE(tenfold::cuda_compiled() || !tenfold::cuda_available());
}

// Without the backend compiled in: NotCompiled; compiled but no device: DeviceError.
TEST(Backend, CudaRequestFailsCleanlyWhereItCannotRun) {
  if (tenfold::cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  tenfold::Tensor<double> x({3, 4, 5});
  for (tenfold::index_t i = 0; i < x.numel(); ++i) x[i] = 1.0 + 0.1 * static_cast<double>(i % 7);
  tenfold::CpOptions o;
  o.rank = 2;
  o.backend = Backend::cuda;
  if (!tenfold::cuda_compiled()) {
    EXPECT_THROW(tenfold::cp_als(x, o), tenfold::NotCompiled);
    return;
  }
  try {
    tenfold::cp_als(x, o);
    FAIL() << "cp_als ran on the cuda backend without a device";
  } catch (const tenfold::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device available"), std::string::npos)
        << e.what();
  }
}

}  // namespace
