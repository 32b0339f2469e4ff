// .npy reading from any byte source (the public functions read files; the fuzz
// target reads memory).
#pragma once

#include "io/byte_source.hpp"
#include "tenfold/io.hpp"

namespace tenfold::io {

/// read_npy_header on a byte source.
NpyHeader read_npy_header(const detail::ByteSource& source);

/// load_npy on a byte source.
template <class T>
Tensor<T> load_npy(const detail::ByteSource& source, NpyHeader* header = nullptr);

}  // namespace tenfold::io
