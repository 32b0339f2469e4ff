// tenfold._tenfold.cache_attention: the decode-time read of a KV cache
// (include/tenfold/cache_attention.hpp) on 4-D CPU arrays, PyTorch tensors included
// (through DLPack, not copied), the result written into `out`; `one_thread` computes on the
// calling thread alone (tenfold::OnThisThread). Float32 queries read keys and values
// stored in float32, bfloat16 or float8 e4m3 (torch.float8_e4m3fn).
#include "tenfold/cache_attention.hpp"

#include <nanobind/stl/optional.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "bindings.hpp"
#include "tenfold/error.hpp"
#include "tenfold/threads.hpp"

namespace tenfold::python {

namespace {

using namespace tenfold::attention;

using OutArray = nb::ndarray<nb::device::cpu>;

// DLPack's code of float8 e4m3 without infinities (kDLFloat8_e4m3fn, as PyTorch exports it).
constexpr std::uint8_t kFloat8E4M3Code = 10;

// The DLPack type of elements E (bfloat16's for BFloat16, float8 e4m3's for Float8E4M3).
template <class E>
nb::dlpack::dtype dtype_of() {
  if constexpr (std::is_same_v<E, BFloat16>) {
    return {static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
  } else if constexpr (std::is_same_v<E, Float8E4M3>) {
    return {kFloat8E4M3Code, 8, 1};
  } else {
    return nb::dtype<E>();
  }
}

// The (batch, heads, rows, width) view of a 4-D array of element type T whose last axis
// is contiguous; throws InvalidArgument naming `what` otherwise.
template <class T, class Array>
HeadsView<T> heads_view(const Array& a, const char* what) {
  if (a.ndim() != 4) {
    throw InvalidArgument(std::string("cache_attention: ") + what +
                          " must be 4-D (batch, heads, rows, width), got " +
                          std::to_string(a.ndim()) + "-D");
  }
  using E = std::remove_const_t<T>;
  if (a.dtype() != dtype_of<E>()) {
    throw InvalidArgument(std::string("cache_attention: ") + what + " must be " +
                          (std::is_same_v<E, double>       ? "float64 as the queries"
                           : std::is_same_v<E, BFloat16>   ? "bfloat16 as the keys"
                           : std::is_same_v<E, Float8E4M3> ? "float8_e4m3fn as the keys"
                                                           : "float32 as the queries") +
                          (std::is_same_v<E, float> && std::string(what) == "keys"
                               ? " (or bfloat16 or float8_e4m3fn, with the values)"
                               : ""));
  }
  if (a.shape(3) > 1 && a.stride(3) != 1) {
    throw InvalidArgument(std::string("cache_attention: ") + what +
                          " must be contiguous along its last axis");
  }
  const auto size = [&](std::size_t k) { return static_cast<index_t>(a.shape(k)); };
  const auto stride = [&](std::size_t k) { return static_cast<index_t>(a.stride(k)); };
  return {static_cast<T*>(a.data()),
          size(0),
          size(1),
          size(2),
          size(3),
          stride(0),
          stride(1),
          stride(2)};
}

// T: the queries' type; S: the keys' and values' (T, or BFloat16 or Float8E4M3 for float
// queries).
template <class T, class S = T>
void attend(const InArray& queries, const InArray& keys, const InArray& values,
            const std::optional<InArray>& bias, bool causal, double scale, const OutArray& out,
            bool one_thread) {
  const HeadsView<const T> q = heads_view<const T>(queries, "queries");
  const HeadsView<const S> k = heads_view<const S>(keys, "keys");
  const HeadsView<const S> v = heads_view<const S>(values, "values");
  const HeadsView<const T> b = bias ? heads_view<const T>(*bias, "bias") : HeadsView<const T>{};
  const HeadsView<T> o = heads_view<T>(out, "out");
  const nb::gil_scoped_release released;
  std::optional<OnThisThread> serial;
  if (one_thread) serial.emplace();
  cache_attention<T, S>(q, k, v, b, causal, static_cast<T>(scale), o);
}

}  // namespace

void register_cache_attention(nb::module_& m) {
  m.def(
      "cache_attention",
      [](const InArray& queries, const InArray& keys, const InArray& values,
         const std::optional<InArray>& bias, bool causal, double scale, const OutArray& out,
         bool one_thread) {
        if (float_kind(queries, "cache_attention: queries") == 'f') {
          if (keys.dtype() == dtype_of<BFloat16>()) {
            attend<float, BFloat16>(queries, keys, values, bias, causal, scale, out, one_thread);
          } else if (keys.dtype() == dtype_of<Float8E4M3>()) {
            attend<float, Float8E4M3>(queries, keys, values, bias, causal, scale, out, one_thread);
          } else {
            attend<float>(queries, keys, values, bias, causal, scale, out, one_thread);
          }
        } else {
          attend<double>(queries, keys, values, bias, causal, scale, out, one_thread);
        }
      },
      nb::arg("queries").noconvert(), nb::arg("keys").noconvert(), nb::arg("values").noconvert(),
      nb::arg("bias").noconvert().none(), nb::arg("causal"), nb::arg("scale"),
      nb::arg("out").noconvert(), nb::arg("one_thread") = false);
}

}  // namespace tenfold::python
