// One list of the value types the library is compiled for. A source file with
// templates defines a macro that instantiates its templates for one type T and passes
// it here, instead of writing the list out by hand.
#pragma once

#include <complex>

#define TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(INSTANTIATE) \
  INSTANTIATE(float)                                         \
  INSTANTIATE(double)

// The complex types, for the code that serves complex tensors (dense CP-ALS on the cpu
// backend and what it stands on; docs/algorithms.md, "Complex tensors").
#define TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(INSTANTIATE) \
  INSTANTIATE(std::complex<float>)                             \
  INSTANTIATE(std::complex<double>)
