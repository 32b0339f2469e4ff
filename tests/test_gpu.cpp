// What is specific to the CUDA device: allocation failures, the device chosen by
// TENFOLD_CUDA_DEVICE. The primitives are compared with the reference backend in
// test_primitives.cpp, and the CP, Tucker and attention suites run on cuda from their
// own test files; every test is skipped where no CUDA device can be used.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/compute.hpp"
#include "scoped_env.hpp"
#include "tenfold/backend.hpp"
#include "tenfold/error.hpp"

namespace {

using tenfold::Backend;
using tenfold::detail::Buffer;

template <class T>
class GpuCompute : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tenfold::cuda_available()) GTEST_SKIP() << "no CUDA device available";
    gpu_ = tenfold::detail::make_compute<T>(Backend::cuda);
    ASSERT_EQ(gpu_->kind(), Backend::cuda);
  }

  std::unique_ptr<tenfold::detail::Compute<T>> gpu_;
};

using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GpuCompute, Precisions);

TYPED_TEST(GpuCompute, FailedAllocationNamesTheRequest) {
  using T = TypeParam;
  const std::size_t n = std::size_t{1} << 50;  // petabytes
  try {
    Buffer<T> b(*this->gpu_, n);
    FAIL() << "allocation of " << n << " elements succeeded";
  } catch (const tenfold::DeviceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::to_string(n * sizeof(T)) + " bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("free"), std::string::npos) << what;
  }
  // The backend stays usable.
  const std::vector<T> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  Buffer<T> d(*this->gpu_, a.size());
  this->gpu_->upload(d.get(), a.data(), a.size());
  std::vector<T> back(a.size());
  this->gpu_->download(back.data(), d.get(), a.size());
  EXPECT_EQ(back, a);
}

TEST(GpuDevice, EnvironmentVariableIsValidated) {
  if (!tenfold::cuda_available()) GTEST_SKIP() << "no CUDA device available";
  for (const char* bad : {"abc", "-1", "1x", "100000"}) {
    ScopedEnv env("TENFOLD_CUDA_DEVICE", bad);
    try {
      tenfold::detail::make_compute<double>(Backend::cuda);
      FAIL() << "TENFOLD_CUDA_DEVICE=" << bad << " was accepted";
    } catch (const tenfold::DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  ScopedEnv env("TENFOLD_CUDA_DEVICE", "0");
  EXPECT_EQ(tenfold::detail::make_compute<float>(Backend::cuda)->kind(), Backend::cuda);
}

}  // namespace
