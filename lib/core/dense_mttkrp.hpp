// A dense tensor in backend memory, and its MTTKRP by a dimension tree of depth one:
// the tensor is contracted with the Khatri-Rao product of a block of trailing
// (leading) modes in one large GEMM, and each mode of the remaining block is
// finished from that partial result with small batched products. A sweep thus
// costs two passes over the tensor, never permutes it, and never forms the
// Khatri-Rao product of all but one mode (except for order 2, where it is a factor).
//
// A 3-way tensor is contracted with one factor at a time instead: Y_m = X x_m U_m^T
// (the other two modes by R) gives the MTTKRP of both other modes with one small
// product each, for as long as U_m is unchanged. ALS updates the modes in a cycle, so
// contracting the mode updated last serves the next two updates (the pairs (0, 1),
// (2, 0), (1, 2), ... keep U_2, U_1, U_0 fixed): 1.5 passes over the tensor per sweep
// instead of 2, the same iterates. The middle mode is contracted slab by slab, so that
// every pass is a tall and thin product that reads the tensor in place (see mttkrp).
#pragma once

#include <cstdint>
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
  /// Contractions of the whole tensor so far, each one read of it (for tests and
  /// benchmarks of the schedule above).
  std::uint64_t tensor_passes() const { return passes_; }
  /// out (I_n x I_n) = X_(n) X_(n)^T.
  void mode_gram(int n, T* out);
  /// Drops every cached contraction and the norm (the tensor's entries changed).
  void data_changed() {
    cached_ = Cached::none;
    cached_mode_ = -1;
    x_.data_changed();
  }
  /// Upper bound on the elements the MTTKRPs at `rank` allocate (see CpOperand).
  double workspace_elements(index_t rank) const;

 private:
  enum class Cached { none, leading, trailing };

  void choose_blocks();
  // 3-way: whether the middle mode may be contracted slab by slab (worth a call per
  // slab only when each slab's product is large).
  bool slab_products(index_t rank) const;
  void mttkrp_three(int n, std::span<const T* const> factors, index_t rank, T* out);
  // 3-way: the mode to contract for the MTTKRP of mode n (see the file comment).
  int mode_to_contract(int n, index_t rank) const;
  // 3-way: y_ = X x_m U_m^T, (I_a I_b) x R with a < b the other modes, a fastest.
  void contract_mode(int m, const T* u, index_t rank);
  index_t prod(int lo, int hi) const;  // prod of dims()[lo..hi)
  // out = MTTKRP of local mode j of the partial tensor y (modes lo..hi of X, then R).
  void finish(const T* y, int lo, int hi, int n, std::span<const T* const> factors, index_t rank,
              T* out);

  Compute<T>& c_;
  DeviceTensor<T> x_;
  int lead_end_ = 1;     // modes [0, lead_end_) are finished from X contracted over the rest
  int trail_begin_ = 1;  // modes [lead_end_, N) from X contracted over modes [0, trail_begin_)
  Cached cached_ = Cached::none;
  int cached_mode_ = -1;  // 3-way: the mode contracted in y_, -1 for none
  index_t cached_rank_ = 0;
  std::vector<std::uint64_t> changed_at_;  // per mode, the count of changes at its last one
  std::uint64_t changes_ = 0, passes_ = 0;
  bool changed_since_pass_ = true;  // a factor changed since the last contraction
  Buffer<T> y_, kr_, kr_tmp_, v_;
};

}  // namespace tenfold::detail
