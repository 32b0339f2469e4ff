// Power-of-two scaling of inputs whose magnitude is far from 1 (docs/algorithms.md,
// "Scaling"). Squares and products of entries near the ends of T's exponent range
// underflow or overflow: (1e-200)^2 is 0 in double, and the Grams and MTTKRPs of a
// float tensor near 1e-21 are 0, which made an all-zero model look exact. The
// decompositions therefore run on X 2^e, whose largest magnitude is in [1/2, 1), and
// scale the result back by 2^-e.
//
// Why scaling the input, and not LAPACK-style scaled accumulation of the norms (as
// dnrm2): scaled accumulation protects the norms and dots only, while the Grams,
// MTTKRPs and TTMs run in T inside the BLAS and would still underflow or overflow.
// Multiplying by a power of two changes only the exponent, so it is exact (for normal
// results) and every step of the algorithms commutes with it: the scaled problem is the
// same problem, at the cost of one pass over the tensor and, only for inputs outside
// the safe range, one copy.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// The largest magnitude of x's entries (of each part of a complex entry) and whether
/// every entry is finite (max_abs is then unspecified): one pass, vectorised and over
/// the pool (a maximum: the same for any thread count).
struct Magnitudes {
  double max_abs = 0.0;
  bool finite = true;
};
template <class T>
Magnitudes magnitudes(TensorView<const T> x);

/// How the decompositions scale an input: by 2^exponent; max_abs = max |x| (for messages).
struct Balancing {
  int exponent = 0;
  double max_abs = 0.0;
};

/// The scaling of x (its entries where observed != 0, all when observed is null):
/// exponent 0 when max |x| is 0 or lies in [2^-q, 2^q] with q = max_exponent(T) / 4
/// (256 in double, 32 in float), where squares, Grams and their sums over up to 2^q
/// entries stay far inside T's range; otherwise the e with max |x| 2^e in [1/2, 1).
template <class T>
Balancing balancing(TensorView<const T> x, const std::uint8_t* observed = nullptr);

/// check_finite(x, what) and balancing(x) from one pass over x: throws
/// InvalidArgument naming the first non-finite entry, or returns x's scaling.
template <class T>
Balancing checked_balancing(TensorView<const T> x, const char* what);

/// x 2^e, a new tensor of x's shape.
template <class T>
Tensor<T> scaled(TensorView<const T> x, int e);

/// v 2^-e in place, for a result of the problem scaled by b (e = b.exponent, or twice it
/// for squares): throws NumericalError, naming `what` (plural: "the CP weights") and
/// b.max_abs, when the largest magnitude overflows U or falls below U's smallest normal
/// number (the result cannot be represented in U).
template <class U>
void scale_back(std::span<U> v, int e, const Balancing& b, const std::string& what);

}  // namespace tenfold::detail
