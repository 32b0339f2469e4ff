#include "cp/fit_sample.hpp"

#include <algorithm>
#include <cmath>

#include "core/random.hpp"

namespace tenfold::detail {

template <class T>
FitSample<T>::FitSample(TensorView<const T> x, index_t count, std::uint64_t seed)
    : dims_(x.dims()), numel_(static_cast<double>(x.numel())) {
  // Uniform multi-indices (each mode's index uniform and independent), drawn entry by
  // entry, mode 0 first.
  Rng rng(seed);
  const std::vector<index_t> strides = strides_of(dims_);
  index_.assign(dims_.size(), std::vector<index_t>(static_cast<std::size_t>(count)));
  values_.resize(static_cast<std::size_t>(count));
  for (index_t e = 0; e < count; ++e) {
    index_t offset = 0;
    for (std::size_t m = 0; m < dims_.size(); ++m) {
      const auto i = std::min(dims_[m] - 1,
                              static_cast<index_t>(rng.uniform() * static_cast<double>(dims_[m])));
      index_[m][static_cast<std::size_t>(e)] = i;
      offset += i * strides[m];
    }
    values_[static_cast<std::size_t>(e)] = x.data()[offset];
  }
}

template <class T>
ResidualEstimate FitSample<T>::estimate(std::span<const T* const> factors, const T* lambda,
                                        index_t rank, std::vector<double>* squares) const {
  // d_e^2 at each sampled entry; mean and variance by Welford's update (in double).
  double mean = 0.0, m2 = 0.0;
  const std::size_t count = values_.size();
  if (squares) squares->resize(count);
  for (std::size_t e = 0; e < count; ++e) {
    double model = 0.0;
    for (index_t j = 0; j < rank; ++j) {
      double term = lambda[j];
      for (std::size_t m = 0; m < dims_.size(); ++m)
        term *= factors[m][index_[m][e] + j * dims_[m]];
      model += term;
    }
    const double d = static_cast<double>(values_[e]) - model;
    if (squares) (*squares)[e] = d * d;
    const double delta = d * d - mean;
    mean += delta / static_cast<double>(e + 1);
    m2 += delta * (d * d - mean);
  }
  ResidualEstimate r;
  r.resid2 = numel_ * mean;
  if (count > 1) {
    r.std_error = numel_ * std::sqrt(m2 / static_cast<double>(count - 1)) /
                  std::sqrt(static_cast<double>(count));
  }
  return r;
}

template <class T>
double FitSample<T>::difference_std_error(const std::vector<double>& a,
                                          const std::vector<double>& b) const {
  double mean = 0.0, m2 = 0.0;
  for (std::size_t e = 0; e < a.size(); ++e) {
    const double v = a[e] - b[e], delta = v - mean;
    mean += delta / static_cast<double>(e + 1);
    m2 += delta * (v - mean);
  }
  if (a.size() < 2) return 0.0;
  return numel_ * std::sqrt(m2 / static_cast<double>(a.size() - 1)) /
         std::sqrt(static_cast<double>(a.size()));
}

template class FitSample<float>;
template class FitSample<double>;

}  // namespace tenfold::detail
