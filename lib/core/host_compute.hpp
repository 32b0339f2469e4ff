// The memory primitives of a backend whose memory is host memory (cpu, reference):
// allocations by allocate_host (core/memory.hpp), copies by memcpy; and the column norm
// both compute alike.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "core/compute.hpp"
#include "core/memory.hpp"

namespace tenfold::detail {

/// The norm normalize_columns takes of a column of m entries, in double: its 2-norm
/// (ColumnNorm::two) or max(max_i |col_i|, 1) (ColumnNorm::max_or_one).
template <class T>
double column_norm(ColumnNorm kind, index_t m, const T* col) {
  double s = 0.0;
  if (kind == ColumnNorm::two) {
    for (index_t i = 0; i < m; ++i) s += abs2(col[i]);
    return std::sqrt(s);
  }
  for (index_t i = 0; i < m; ++i) s = std::max(s, static_cast<double>(std::abs(col[i])));
  return std::max(s, 1.0);
}

template <class T>
class HostCompute : public Compute<T> {
 public:
  void synchronize() override {}
  std::uint64_t available_bytes() override { return host_available_bytes(); }
  T* allocate(std::size_t n) override {
    if (n == 0) return nullptr;
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(allocate_host(n * sizeof(T)));
  }
  void deallocate(T* p) noexcept override { std::free(p); }
  void upload(T* dst, const T* host_src, std::size_t n) override { copy(dst, host_src, n); }
  void download(T* host_dst, const T* src, std::size_t n) override { copy(host_dst, src, n); }
  void copy(T* dst, const T* src, std::size_t n) override {
    if (n > 0) std::memcpy(dst, src, n * sizeof(T));
  }
  void fill(T* dst, std::size_t n, T value) override {
    for (std::size_t i = 0; i < n; ++i) dst[i] = value;
  }
  void conjugate(std::size_t n, T* x) override {
    if constexpr (is_complex_v<T>) {
      for (std::size_t i = 0; i < n; ++i) x[i] = std::conj(x[i]);
    }
  }
};

}  // namespace tenfold::detail
