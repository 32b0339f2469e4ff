// .npy reading from any byte source (the public functions read files; the fuzz
// target reads memory).
#pragma once

#include <span>
#include <string>

#include "io/byte_source.hpp"
#include "tenfold/io.hpp"

namespace tenfold::io {

/// read_npy_header on a byte source.
NpyHeader read_npy_header(const detail::ByteSource& source);

/// The bytes before the data of a .npy file (magic, version, length, padded header dict).
std::string npy_header(DType dtype, bool fortran_order, std::span<const index_t> shape);

/// load_npy on a byte source.
template <class T>
Tensor<T> load_npy(const detail::ByteSource& source, NpyHeader* header = nullptr);

}  // namespace tenfold::io
