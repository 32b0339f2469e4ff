// The backends a test runs on: value-parameterised suites are instantiated over
// test_backends(), which holds cuda only when it is compiled in and a device is found.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tenfold/backend.hpp"

namespace tenfold::test {

/// reference and cpu always; cuda when compiled and a device can be used.
inline std::vector<Backend> test_backends() {
  std::vector<Backend> b = {Backend::reference, Backend::cpu};
  if (cuda_available()) b.push_back(Backend::cuda);
  return b;
}

/// The backends compared against the reference: cpu, and cuda when available.
inline std::vector<Backend> compared_backends() {
  std::vector<Backend> b = {Backend::cpu};
  if (cuda_available()) b.push_back(Backend::cuda);
  return b;
}

/// Test-name suffix: the backend's name.
inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return std::string(to_string(info.param));
}

/// A suite run once per backend: GetParam() is the backend its options must use.
class OnEachBackend : public ::testing::TestWithParam<Backend> {
 protected:
  Backend backend() const { return GetParam(); }
};

}  // namespace tenfold::test

/// Instantiates the value-parameterised suite `suite` over test_backends().
#define TENFOLD_ON_EACH_BACKEND(suite)                                                             \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::ValuesIn(::tenfold::test::test_backends()), \
                           ::tenfold::test::backend_name)
