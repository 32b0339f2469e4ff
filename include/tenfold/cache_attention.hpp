// Reading a KV cache at decode time: attention of a few new queries over the cached keys
// and values, where groups of query heads share a key head and a value head (grouped and
// multi-query attention; the shared rotary keys and latent values of docs/kv-cache.md are
// one key head and one value head that every query head reads). One pass over the cache,
// each cached token's key and value read once for all the query heads that share them.
#pragma once

#include <cstdint>

#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::attention {

/// A (batch, heads, rows, width) array: element (b, h, i, c) at data[b batch_stride +
/// h head_stride + i row_stride + c] (the last axis contiguous). A PyTorch tensor of that
/// shape whose stride(-1) is 1, strides in elements; 0 strides broadcast.
template <class T>
struct HeadsView {
  T* data = nullptr;
  index_t batch = 0, heads = 0, rows = 0, width = 0;
  index_t batch_stride = 0, head_stride = 0, row_stride = 0;
};

/// A bfloat16 number: the high 16 bits of a float's (PyTorch's torch.bfloat16). The element
/// type of a cache stored in 16 bits for a model that computes in float.
struct TENFOLD_API BFloat16 {
  std::uint16_t bits;
};

/// A float8 e4m3 number as PyTorch's torch.float8_e4m3fn: a sign bit, 4 exponent bits
/// (bias 7) and 3 mantissa bits; no infinities, 0x7f and 0xff NaN, the largest 448. The
/// element type of a cache stored in 8 bits for a model that computes in float.
struct TENFOLD_API Float8E4M3 {
  std::uint8_t bits;
};

/// out(b, h, i, :) = sum over cached tokens t of softmax_t(s_t) values(b, h / (H / V), t, :),
/// s_t = scale <queries(b, h, i, :), keys(b, h / (H / K), t, :)> + bias(b, 0, i, t), for
///  - queries (B, H, n, C_k), keys (B, K, T, C_k), values (B, V, T, C_v), K and V dividing H;
///  - bias: absent (data null), or (B, 1, n, T), added to every head's scores (a padding
///    mask: a large negative number at the tokens a row must not see);
///  - causal: row i also sees only the tokens t <= T - n + i (the queries are the last n
///    cached tokens);
///  - out (B, H, n, C_v);
///  - keys and values stored as T, or as BFloat16 or Float8E4M3 when T is float (each
///    element widened to float as it is read, exactly; the arithmetic in float).
/// A row whose every score is -inf gives NaN, as softmax does. Parallel over the batch,
/// the groups of heads that read the same key and value head, and ranges of cached tokens
/// (online softmax within a range, ranges merged in order: the same bits for the same
/// thread count). Throws InvalidArgument naming the argument whose sizes do not fit.
template <class T, class S = T>
TENFOLD_API void cache_attention(const HeadsView<const T>& queries, const HeadsView<const S>& keys,
                                 const HeadsView<const S>& values, const HeadsView<const T>& bias,
                                 bool causal, T scale, const HeadsView<T>& out);

}  // namespace tenfold::attention
