// One list of the value types the library is compiled for. A source file with
// templates defines a macro that instantiates its templates for one type T and passes
// it here, instead of writing the list out by hand.
#pragma once

#define TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(INSTANTIATE) \
  INSTANTIATE(float)                                         \
  INSTANTIATE(double)
