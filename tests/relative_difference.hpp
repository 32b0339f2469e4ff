// How far apart two results are, as a fraction of the scale of the reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tenfold::test {

/// max_i |a_i - b_i| / max_i |b_i| (the absolute gap when b is zero); the sizes must
/// match.
template <class T>
double relative_difference(const std::vector<T>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  double gap = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    gap = std::max(gap, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0.0 ? gap / scale : gap;
}

/// ||a - b|| / ||b|| (2-norms); the sizes must match.
inline double relative_norm_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace tenfold::test
