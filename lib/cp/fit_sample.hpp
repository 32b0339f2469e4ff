// The fit estimate of sampled CP-ALS (sampled.cpp): a fixed uniform sample of a dense
// tensor's entries and the residual of a CP model on it, with its standard error.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// Column-major strides of `dims`.
inline std::vector<index_t> strides_of(const std::vector<index_t>& dims) {
  std::vector<index_t> s(dims.size(), 1);
  for (std::size_t n = 1; n < dims.size(); ++n) s[n] = s[n - 1] * dims[n - 1];
  return s;
}

/// An estimate of ||X - M||^2 from a sample of entries, and its standard error.
struct ResidualEstimate {
  double resid2 = 0.0;
  double std_error = 0.0;
};

/// A fixed sample of `count` entries of a dense tensor drawn uniformly with replacement
/// (CPRAND's fit estimate, Battaglino, Ballard and Kolda 2018). With d_e = x_e - m_e at
/// the sampled entries, numel / count * sum_e d_e^2 is an unbiased estimate of
/// ||X - M||^2 (each draw's numel d_e^2 has that mean), with standard error
/// numel sd(d^2) / sqrt(count) (sd the sample standard deviation).
template <class T>
class FitSample {
 public:
  FitSample(TensorView<const T> x, index_t count, std::uint64_t seed);
  /// The estimate for the model [[lambda; factors]] (host memory, x's mode order);
  /// `squares`, when given, receives d_e^2 for each sampled entry.
  ResidualEstimate estimate(std::span<const T* const> factors, const T* lambda, index_t rank,
                            std::vector<double>* squares = nullptr) const;
  /// The standard error of the difference of two estimates on this sample, from their
  /// squares: numel sd(a_e - b_e) / sqrt(count) (paired: the same entries, so it is far
  /// smaller than either estimate's own when the models are close).
  double difference_std_error(const std::vector<double>& a, const std::vector<double>& b) const;
  index_t size() const { return static_cast<index_t>(values_.size()); }

 private:
  std::vector<index_t> dims_;
  double numel_;
  std::vector<std::vector<index_t>> index_;  // per mode, the sampled entries' indices
  std::vector<T> values_;
};

}  // namespace tenfold::detail
