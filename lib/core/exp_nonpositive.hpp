// e^x for x <= 0 in straight-line arithmetic (no call, no branch), so that a loop of them
// vectorises in each SIMD clone: the softmax weights exp(s - max s) of attention, where
// std::exp, a call per element, cost more than reading the cache.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/simd.hpp"

namespace tenfold::detail {

/// e^x for x <= 0 (NaN for NaN), within 2 ulp of std::exp for x >= the smallest normal's
/// log (float: -87.3, double: -708.3); 0 below it, and for -inf.
template <class T>
TENFOLD_INLINE_INTO_CLONE inline T exp_nonpositive(T x) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  constexpr bool single = std::is_same_v<T, float>;
  using Bits = std::conditional_t<single, std::uint32_t, std::uint64_t>;
  // below this e^x is not a normal number: 0 instead
  constexpr T lowest = single ? T(-87.33) : T(-708.3);
  constexpr T log2e = T(1.442695040888963407359924681001892137);
  // ln 2 = hi + lo
  constexpr T ln2_hi = T(0.693145751953125);  // 16 bits: n ln2_hi is exact
  constexpr T ln2_lo = T(1.42860682030941723212e-6);
  // 1.5 2^(mantissa bits): adding it rounds to an integer held in the low mantissa bits
  constexpr T shifter = single ? T(12582912.0) : T(6755399441055744.0);
  constexpr int mantissa = single ? 23 : 52;
  constexpr Bits bias = single ? 127 : 1023;
  // x = n ln 2 + r, n = round(x / ln 2), |r| <= ln 2 / 2 (for x below `lowest` any bits,
  // cleared at the end)
  const T shifted = x * log2e + shifter;
  const T n = shifted - shifter;
  const T r = (x - n * ln2_hi) - n * ln2_lo;
  // e^r: Taylor to degree 7 (float) or 13 (double), by Horner (truncation below half an
  // ulp at |r| <= 0.347)
  constexpr int degree = single ? 7 : 13;
  constexpr auto c = [] {
    std::array<T, degree + 1> out{};  // 1 / k!
    double f = 1.0;
    for (int k = 0; k <= degree; ++k) {
      f /= k > 0 ? k : 1;
      out[static_cast<std::size_t>(k)] = static_cast<T>(f);
    }
    return out;
  }();
  T p = c[degree];
  for (int k = degree - 1; k >= 0; --k) p = c[static_cast<std::size_t>(k)] + r * p;
  // 2^n from n's bits: the integer below the shifter's is n (two's complement)
  const Bits n_bits = std::bit_cast<Bits>(shifted) - std::bit_cast<Bits>(shifter);
  const T scale = std::bit_cast<T>(static_cast<Bits>((n_bits + bias) << mantissa));
  // 0 below `lowest` by clearing the bits: no branch, so that the callers' loops
  // vectorise on every processor (a choice of x or `lowest` before the steps above became
  // branches that only AVX-512's masked lanes could vectorise)
  const Bits keep = Bits(0) - static_cast<Bits>(!(x < lowest));
  return std::bit_cast<T>(std::bit_cast<Bits>(p * scale) & keep);
}

}  // namespace tenfold::detail
