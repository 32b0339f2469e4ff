// libFuzzer target: on any bytes SafetensorsFile either indexes the file or throws
// tenfold::IoError (any other exception, a crash or a sanitizer report is a finding);
// every listed tensor can then be read as bytes, and floating-point ones as float and
// double consistently.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "tenfold/error.hpp"
#include "tenfold/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file =
        tenfold::io::SafetensorsFile::from_bytes(std::as_bytes(std::span(data, size)));
    for (const tenfold::io::SafetensorsEntry& e : file.tensors()) {
      if (file.read_bytes(e.name).size() != e.end - e.begin) __builtin_trap();
      if (e.dtype != "F64" && e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16") continue;
      const tenfold::Tensor<float> x = file.read<float>(e.name);
      const tenfold::Tensor<double> y = file.read<double>(e.name);
      if (x.dims() != y.dims() || x.numel() != y.numel()) __builtin_trap();
      for (tenfold::index_t i = 0; i < x.numel(); ++i) {
        const float yf = static_cast<float>(y[i]);
        if (!(x[i] == yf || (std::isnan(x[i]) && std::isnan(yf)))) __builtin_trap();
      }
      if (e.shape.size() == 2 && file.read_matrix<float>(e.name).rows() != e.shape[1]) {
        __builtin_trap();
      }
    }
  } catch (const tenfold::IoError&) {
  }
  return 0;
}
