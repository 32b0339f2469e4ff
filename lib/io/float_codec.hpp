// Decoding of stored little-endian floating-point elements (binary16, bfloat16,
// binary32, binary64) into float or double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "io/byte_source.hpp"

namespace tenfold::io::detail {

/// Stored element encodings that can be read as floating point.
enum class FloatCodec { f16, bf16, f32, f64 };

/// Bytes per element.
std::size_t codec_size(FloatCodec codec);

/// IEEE 754 binary16 bits to float (exact: subnormals, infinities, NaN payloads kept).
float half_to_float(std::uint16_t bits);

/// bfloat16 bits (the high half of a binary32) to float (exact).
float bfloat16_to_float(std::uint16_t bits);

/// Reads out.size() elements stored with `codec` at byte `offset` of `source` into
/// `out`, converting to T (directly when the encoding is T's own, else in chunks).
template <class T>
void read_floats(const ByteSource& source, std::uint64_t offset, FloatCodec codec,
                 std::span<T> out);

}  // namespace tenfold::io::detail
