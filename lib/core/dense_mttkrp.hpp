// Dense tensor as a CP-ALS operand. MTTKRP by a dimension tree of depth one:
// the tensor is contracted with the Khatri-Rao product of a block of trailing
// (leading) modes in one large GEMM, and each mode of the remaining block is
// finished from that partial result with small batched products. A sweep thus
// costs two passes over the tensor, never permutes it, and never forms the
// Khatri-Rao product of all but one mode (except for order 2, where it is a factor).
#pragma once

#include <span>
#include <vector>

#include "cp/operand.hpp"

namespace tenfold::detail {

/// Khatri-Rao product of factors[lo..hi) (I_m x R each, mode lo fastest), built in kr
/// with tmp as scratch (both grown as needed); returns it, or factors[lo] when hi = lo + 1.
template <class T>
const T* khatri_rao_range(Compute<T>& c, const std::vector<index_t>& dims,
                          std::span<const T* const> factors, int lo, int hi, index_t rank,
                          Buffer<T>& kr, Buffer<T>& tmp);

template <class T>
class DenseOperand final : public CpOperand<T> {
 public:
  /// Views `x` on the cpu backend; copies it to the device once otherwise.
  DenseOperand(Compute<T>& c, TensorView<const T> x);
  /// Views a tensor that is already in backend memory (it must outlive the operand).
  DenseOperand(Compute<T>& c, const T* backend_data, std::vector<index_t> dims);

  const std::vector<index_t>& dims() const override { return dims_; }
  double norm_squared() override;
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override;
  void factor_changed(int m) override;
  void mode_gram(int n, T* out) override;
  /// Drops every cached contraction (the tensor's entries changed).
  void data_changed() {
    cached_ = Cached::none;
    norm_squared_ = -1.0;
  }
  double workspace_elements(index_t rank, bool mode_grams) const override;
  /// The tensor in backend memory.
  const T* data() const { return x_; }

 private:
  enum class Cached { none, leading, trailing };

  void choose_blocks();
  index_t prod(int lo, int hi) const;  // prod of dims_[lo..hi)
  // out = MTTKRP of local mode j of the partial tensor y (modes lo..hi of X, then R).
  void finish(const T* y, int lo, int hi, int n, std::span<const T* const> factors, index_t rank,
              T* out);

  std::vector<index_t> dims_;
  const T* x_ = nullptr;
  Buffer<T> x_copy_;
  int lead_end_ = 1;     // modes [0, lead_end_) are finished from X contracted over the rest
  int trail_begin_ = 1;  // modes [lead_end_, N) from X contracted over modes [0, trail_begin_)
  Cached cached_ = Cached::none;
  index_t cached_rank_ = 0;
  double norm_squared_ = -1.0;
  Buffer<T> y_, kr_, kr_tmp_, v_;
};

}  // namespace tenfold::detail
