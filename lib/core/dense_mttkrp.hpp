// A dense tensor in backend memory, and its MTTKRP by a dimension tree of depth one:
// the tensor is contracted with the Khatri-Rao product of a block of trailing
// (leading) modes in one large GEMM, and each mode of the remaining block is
// finished from that partial result with small batched products. A sweep thus
// costs two passes over the tensor, never permutes it, and never forms the
// Khatri-Rao product of all but one mode (except for order 2, where it is a factor).
// For a large 3-way tensor the second pass contracts the middle mode slab by slab
// instead of the first one, so that both passes are tall and thin products that read
// the tensor in place (see mttkrp).
#pragma once

#include <span>
#include <vector>

#include "core/compute.hpp"

namespace tenfold::detail {

/// A dense tensor on a backend: a view of host data on a host backend, a copy
/// uploaded once otherwise; its squared norm computed once and kept.
template <class T>
class DeviceTensor {
 public:
  /// Views `x` on a host backend; copies it to the device otherwise.
  DeviceTensor(Compute<T>& c, TensorView<const T> x);
  /// Views a tensor that is already in backend memory (it must outlive this object).
  DeviceTensor(Compute<T>& c, const T* backend_data, std::vector<index_t> dims);

  const std::vector<index_t>& dims() const { return dims_; }
  int order() const { return static_cast<int>(dims_.size()); }
  /// The tensor in backend memory.
  const T* data() const { return x_; }
  /// ||X||^2, accumulated in double.
  double norm_squared();
  /// Forgets the norm (the tensor's entries changed).
  void data_changed() { norm_squared_ = -1.0; }

 private:
  Compute<T>& c_;
  std::vector<index_t> dims_;
  const T* x_ = nullptr;
  Buffer<T> copy_;
  double norm_squared_ = -1.0;
};

/// Khatri-Rao product of factors[lo..hi) (I_m x R each, mode lo fastest), built in kr
/// with tmp as scratch (both grown as needed); returns it, or factors[lo] when hi = lo + 1.
template <class T>
const T* khatri_rao_range(Compute<T>& c, const std::vector<index_t>& dims,
                          std::span<const T* const> factors, int lo, int hi, index_t rank,
                          Buffer<T>& kr, Buffer<T>& tmp);

/// MTTKRP and mode Grams of a dense tensor in backend memory (see the file comment).
template <class T>
class DenseMttkrp {
 public:
  DenseMttkrp(Compute<T>& c, TensorView<const T> x);
  DenseMttkrp(Compute<T>& c, const T* backend_data, std::vector<index_t> dims);
  DenseMttkrp(const DenseMttkrp&) = delete;
  DenseMttkrp& operator=(const DenseMttkrp&) = delete;

  DeviceTensor<T>& tensor() { return x_; }
  const DeviceTensor<T>& tensor() const { return x_; }
  const std::vector<index_t>& dims() const { return x_.dims(); }
  int order() const { return x_.order(); }
  /// out (I_n x R) = X_(n) (U_{N-1} (.) ... U_{n+1} (.) U_{n-1} ... (.) U_0); partial
  /// contractions are cached until factor_changed(m) names a factor they involve.
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out);
  void factor_changed(int m);
  /// out (I_n x I_n) = X_(n) X_(n)^T.
  void mode_gram(int n, T* out);
  /// Drops every cached contraction and the norm (the tensor's entries changed).
  void data_changed() {
    cached_ = Cached::none;
    x_.data_changed();
  }
  /// Upper bound on the elements the MTTKRPs at `rank` allocate (see CpOperand).
  double workspace_elements(index_t rank) const;

 private:
  enum class Cached { none, leading, trailing };

  void choose_blocks();
  // Whether the last mode of a 3-way tensor is contracted slab by slab (see mttkrp).
  bool slab_products(index_t rank) const;
  index_t prod(int lo, int hi) const;  // prod of dims()[lo..hi)
  // out = MTTKRP of local mode j of the partial tensor y (modes lo..hi of X, then R).
  void finish(const T* y, int lo, int hi, int n, std::span<const T* const> factors, index_t rank,
              T* out);

  Compute<T>& c_;
  DeviceTensor<T> x_;
  int lead_end_ = 1;     // modes [0, lead_end_) are finished from X contracted over the rest
  int trail_begin_ = 1;  // modes [lead_end_, N) from X contracted over modes [0, trail_begin_)
  Cached cached_ = Cached::none;
  index_t cached_rank_ = 0;
  Buffer<T> y_, kr_, kr_tmp_, v_;
};

}  // namespace tenfold::detail
