// libFuzzer target: on any bytes the .npy reader either loads a tensor or throws
// tenfold::IoError (any other exception, a crash or a sanitizer report is a finding),
// and reading as float agrees with reading as double.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "io/byte_source.hpp"
#include "io/npy.hpp"
#include "tenfold/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const tenfold::io::detail::MemorySource source(std::as_bytes(std::span(data, size)));
  try {
    tenfold::io::NpyHeader header;
    const tenfold::Tensor<float> x = tenfold::io::load_npy<float>(source, &header);
    const tenfold::Tensor<double> y = tenfold::io::load_npy<double>(source);
    if (x.dims() != y.dims() || x.numel() != y.numel()) __builtin_trap();
    for (tenfold::index_t i = 0; i < x.numel(); ++i) {
      const float yf = static_cast<float>(y[i]);
      if (!(x[i] == yf || (std::isnan(x[i]) && std::isnan(yf)))) __builtin_trap();
    }
  } catch (const tenfold::IoError&) {
  }
  return 0;
}
