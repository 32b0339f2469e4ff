// Real and complex value types: the real type under T, |x|^2, conjugation and the
// phase of an entry, written once for float, double and std::complex of either.
#pragma once

#include <cmath>
#include <complex>
#include <type_traits>

namespace tenfold::detail {

template <class T>
struct RealOf {
  using type = T;
};
template <class T>
struct RealOf<std::complex<T>> {
  using type = T;
};
/// float for float and std::complex<float>, double for double and std::complex<double>.
template <class T>
using real_t = typename RealOf<T>::type;

template <class T>
inline constexpr bool is_complex_v = !std::is_same_v<T, real_t<T>>;

/// |x|^2 in double.
template <class T>
double abs2(T x) {
  if constexpr (is_complex_v<T>) {
    const double re = x.real(), im = x.imag();
    return re * re + im * im;
  } else {
    return static_cast<double>(x) * x;
  }
}

/// conj(x); x itself for real T.
template <class T>
T conj_value(T x) {
  if constexpr (is_complex_v<T>) {
    return std::conj(x);
  } else {
    return x;
  }
}

/// Re(x); x itself for real T.
template <class T>
real_t<T> real_part(T x) {
  if constexpr (is_complex_v<T>) {
    return x.real();
  } else {
    return x;
  }
}

/// x / |x| (1 for x = 0): the sign of a real x, the unit-modulus phase of a complex one.
template <class T>
T phase(T x) {
  if constexpr (is_complex_v<T>) {
    const real_t<T> a = std::abs(x);
    return a > 0 ? x / a : T(1);
  } else {
    return x < 0 ? T(-1) : T(1);
  }
}

/// Whether both parts of x are finite.
template <class T>
bool finite_value(T x) {
  if constexpr (is_complex_v<T>) {
    return std::isfinite(x.real()) && std::isfinite(x.imag());
  } else {
    return std::isfinite(x);
  }
}

/// x / s with the division in double (each part for complex x), rounded to T.
template <class T>
T divided(T x, double s) {
  if constexpr (is_complex_v<T>) {
    using R = real_t<T>;
    return T(static_cast<R>(x.real() / s), static_cast<R>(x.imag() / s));
  } else {
    return static_cast<T>(x / s);
  }
}

/// x 2^e, exact for normal results (each part scaled for complex x).
template <class T>
T times_power_of_two(T x, int e) {
  if constexpr (is_complex_v<T>) {
    return T(std::ldexp(x.real(), e), std::ldexp(x.imag(), e));
  } else {
    return std::ldexp(x, e);
  }
}

}  // namespace tenfold::detail
