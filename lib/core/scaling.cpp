#include "core/scaling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/instantiate.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {

template <class T>
Balancing balancing(TensorView<const T> x, const std::uint8_t* observed) {
  Balancing b;
  const T* p = x.data();
  T peak = 0;
  for (index_t i = 0; i < x.numel(); ++i) {
    if (observed == nullptr || observed[i] != 0) peak = std::max(peak, std::abs(p[i]));
  }
  b.max_abs = static_cast<double>(peak);
  if (peak == T(0)) return b;
  // peak = m 2^k with m in [1/2, 1)
  int k = 0;
  std::frexp(peak, &k);
  constexpr int q = std::numeric_limits<T>::max_exponent / 4;
  if (k - 1 < -q || k > q) b.exponent = -k;
  return b;
}

template <class T>
Tensor<T> scaled(TensorView<const T> x, int e) {
  Tensor<T> y(x.dims());
  const T* p = x.data();
  for (index_t i = 0; i < x.numel(); ++i) y[i] = std::ldexp(p[i], e);
  return y;
}

template <class U>
void scale_back(std::span<U> v, int e, const Balancing& b, const std::string& what) {
  if (e == 0) return;
  U before = 0, peak = 0;
  for (U& a : v) {
    before = std::max(before, std::abs(a));
    a = std::ldexp(a, -e);
    peak = std::max(peak, std::abs(a));
  }
  const bool overflow = !std::isfinite(peak);
  if (!overflow && !(before > U(0) && peak < std::numeric_limits<U>::min())) return;
  const bool is_float = sizeof(U) == sizeof(float);
  char magnitude[32];
  std::snprintf(magnitude, sizeof magnitude, "%.3g", b.max_abs);
  throw NumericalError(what + " of this tensor (largest |x| = " + magnitude + ") " +
                       (overflow ? "exceed" : "fall below") + " the range of " +
                       (is_float   ? "float; decompose it in double"
                        : overflow ? "double; scale the tensor down"
                                   : "double; scale the tensor up"));
}

#define TENFOLD_INSTANTIATE_SCALING(T)                                       \
  template Balancing balancing<T>(TensorView<const T>, const std::uint8_t*); \
  template Tensor<T> scaled<T>(TensorView<const T>, int);                    \
  template void scale_back<T>(std::span<T>, int, const Balancing&, const std::string&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_SCALING)

}  // namespace tenfold::detail
