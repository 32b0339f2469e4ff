// Sampled least squares for dense CP-ALS (CpSolver::sampled): CP-ARLS-LEV.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/subspace.hpp"
#include "cp/cp_als.hpp"

namespace tenfold::detail {

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

/// CP-ALS of the dense tensor x (column-major; `reversed`: its modes are numbered by
/// NumPy axis, as for run_in_axis_numbering) with the sampled solver; options
/// validated, layout col_major.
template <class T>
CpResult<T> run_sampled_cp(TensorView<const T> x, bool reversed, Compute<T>& c,
                           const CpOptions& options, std::span<const Matrix<T>> initial_factors,
                           Clock::time_point start);

}  // namespace tenfold::detail
