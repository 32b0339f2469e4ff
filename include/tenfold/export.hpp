// TENFOLD_API marks the public API: libtenfold.so is built with hidden symbols by
// default, so only what carries this mark (and the C++ runtime's own instantiations) is
// exported. Programs that include the headers see the same attribute, which is the
// default visibility anyway.
#pragma once

#define TENFOLD_API __attribute__((visibility("default")))
