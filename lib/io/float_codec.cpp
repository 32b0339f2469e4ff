#include "io/float_codec.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

namespace tenfold::io::detail {

static_assert(std::endian::native == std::endian::little,
              "the file readers assume a little-endian host");

std::size_t codec_size(FloatCodec codec) {
  switch (codec) {
    case FloatCodec::f16:
    case FloatCodec::bf16:
      return 2;
    case FloatCodec::f32:
      return 4;
    case FloatCodec::f64:
      return 8;
  }
  return 0;
}

float half_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits >> 15) << 31;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in binary32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) {
    // Infinity (mantissa 0) or NaN (payload moved to the top of the binary32 mantissa).
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  // Normal: rebias the exponent from 15 to 127, widen the mantissa from 10 to 23 bits.
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

float bfloat16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

namespace {

template <class Stored>
Stored load(const std::byte* p) {
  Stored v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void decode(FloatCodec codec, const std::byte* in, std::span<T> out) {
  const std::size_t n = out.size();
  switch (codec) {
    case FloatCodec::f16:
      for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(load<std::uint16_t>(in + 2 * i));
      break;
    case FloatCodec::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        out[i] = bfloat16_to_float(load<std::uint16_t>(in + 2 * i));
      }
      break;
    case FloatCodec::f32:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(load<float>(in + 4 * i));
      break;
    case FloatCodec::f64:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(load<double>(in + 8 * i));
      break;
  }
}

}  // namespace

template <class T>
void read_floats(const ByteSource& source, std::uint64_t offset, FloatCodec codec,
                 std::span<T> out) {
  const FloatCodec own = sizeof(T) == 4 ? FloatCodec::f32 : FloatCodec::f64;
  if (codec == own) {
    source.read(offset, std::as_writable_bytes(out));
    return;
  }
  const std::size_t size = codec_size(codec);
  constexpr std::size_t chunk = 1 << 14;  // elements per read
  std::vector<std::byte> raw(std::min(out.size(), chunk) * size);
  for (std::size_t i = 0; i < out.size(); i += chunk) {
    const std::size_t n = std::min(chunk, out.size() - i);
    const std::span<std::byte> bytes(raw.data(), n * size);
    source.read(offset + i * size, bytes);
    decode(codec, bytes.data(), out.subspan(i, n));
  }
}

template void read_floats(const ByteSource&, std::uint64_t, FloatCodec, std::span<float>);
template void read_floats(const ByteSource&, std::uint64_t, FloatCodec, std::span<double>);

}  // namespace tenfold::io::detail
