#include "core/layout.hpp"

#include <algorithm>
#include <complex>
#include <cstdint>

#include "core/thread_pool.hpp"

namespace tenfold::detail {

template <class T>
void reverse_modes(TensorView<const T> x, T* yp) {
  const int order = x.order();
  if (x.numel() == 0) return;
  // Mode m of x has stride sx[m] in x and sy[m] = prod_{k > m} I_k in y. Modes 0 and
  // N-1 are the fast ones of x and y: for each index of the middle modes the (I_0 x
  // I_{N-1}) slice is transposed in square tiles, so that both sides are read and
  // written in cache-sized runs.
  std::vector<index_t> sx(static_cast<std::size_t>(order)), sy(static_cast<std::size_t>(order));
  index_t s = 1;
  for (int m = 0; m < order; ++m) {
    sx[static_cast<std::size_t>(m)] = s;
    s *= x.dim(m);
  }
  s = 1;
  for (int m = order - 1; m >= 0; --m) {
    sy[static_cast<std::size_t>(m)] = s;
    s *= x.dim(m);
  }
  constexpr index_t kTile = 32;
  const index_t first = x.dim(0), last = order > 1 ? x.dim(order - 1) : 1;
  const index_t sx_last = order > 1 ? sx[static_cast<std::size_t>(order - 1)] : 0;
  const index_t sy_first = sy[0];
  const index_t middle = x.numel() / (order > 1 ? first * last : first);
  const index_t tiles = (last + kTile - 1) / kTile;
  const T* xp = x.data();
  const auto tile_row = [&](index_t w) {
    // Offsets of the middle multi-index (modes 1..N-2) in x and y.
    index_t rest = w / tiles, bx = 0, by = 0;
    for (int m = 1; m < order - 1; ++m) {
      const auto mi = static_cast<std::size_t>(m);
      const index_t i = rest % x.dim(m);
      rest /= x.dim(m);
      bx += i * sx[mi];
      by += i * sy[mi];
    }
    const index_t l0 = (w % tiles) * kTile, l1 = std::min(last, l0 + kTile);
    for (index_t f0 = 0; f0 < first; f0 += kTile) {
      const index_t f1 = std::min(first, f0 + kTile);
      for (index_t l = l0; l < l1; ++l)
        for (index_t f = f0; f < f1; ++f) yp[by + f * sy_first + l] = xp[bx + f + l * sx_last];
    }
  };
  if (x.numel() > 65536) {
    parallel_for(middle * tiles, tile_row);
  } else {
    for (index_t w = 0; w < middle * tiles; ++w) tile_row(w);
  }
}

template <class T>
Tensor<T> reverse_modes(TensorView<const T> x) {
  Tensor<T> y(reversed(x.dims()));
  reverse_modes(x, y.data());
  return y;
}

#define TENFOLD_INSTANTIATE_REVERSE_MODES(T)                \
  template Tensor<T> reverse_modes<T>(TensorView<const T>); \
  template void reverse_modes<T>(TensorView<const T>, T*);
TENFOLD_INSTANTIATE_REVERSE_MODES(float)
TENFOLD_INSTANTIATE_REVERSE_MODES(double)
TENFOLD_INSTANTIATE_REVERSE_MODES(std::uint8_t)
TENFOLD_INSTANTIATE_REVERSE_MODES(std::complex<float>)
TENFOLD_INSTANTIATE_REVERSE_MODES(std::complex<double>)

}  // namespace tenfold::detail
