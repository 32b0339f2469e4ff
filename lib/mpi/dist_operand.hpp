// A distributed tensor as a CP-ALS operand: the MTTKRP of this process's block (by a
// local operand, dense or sparse, on this block's rows of the other factors), summed
// within the mode's slice, then the row ranges all-gathered within its fibre.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "cp/factor_cache.hpp"
#include "cp/operand.hpp"
#include "tenfold/mpi.hpp"

namespace tenfold::mpi::detail {

using tenfold::detail::Compute;
using tenfold::detail::Op;

/// The P_n + 1 boundaries of block_range's ranges of `size` indices in `parts`.
std::vector<index_t> block_bounds(index_t size, int parts);

/// Where a process's block lies: per mode the boundaries of the fibre's row ranges (the
/// block's own range is the one of its grid coordinate), and where its communication is
/// counted.
struct BlockPlace {
  const ProcessGrid& grid;
  std::vector<index_t> dims;                 // global sizes
  std::vector<std::vector<index_t>> bounds;  // per mode, P_n + 1 entries
  CommStats& stats;
  index_t begin(int n) const;  // this block's first index of mode n
  index_t size(int n) const;   // and its number of indices
};

template <class T>
class DistOperand final : public tenfold::detail::CpOperand<T> {
 public:
  /// `local`: the block's operand, in local indices; `gram(n, out)`: the distributed mode
  /// Gram, with `gram_elements` of workspace.
  DistOperand(Compute<T>& c, BlockPlace place, std::unique_ptr<tenfold::detail::CpOperand<T>> local,
              std::function<void(int, T*)> gram, double gram_elements);

  const std::vector<index_t>& dims() const override { return place_.dims; }
  double norm_squared() override;
  /// out (I_n x R, every process) from the replicated factors (I_m x R each).
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override;
  void factor_changed(int m) override;
  void mode_gram(int n, T* out) override { gram_(n, out); }
  double workspace_elements(index_t rank, bool mode_grams) const override;

 private:
  BlockPlace place_;
  std::unique_ptr<tenfold::detail::CpOperand<T>> local_;
  std::function<void(int, T*)> gram_;
  double gram_elements_;
  std::vector<tenfold::detail::Buffer<T>> slices_;  // this block's rows of each factor
  tenfold::detail::FactorCache cache_;              // which slices_ are current
  double norm_squared_ = -1.0;
};

/// out (I_n x I_n, every process) = X_(n) X_(n)^T of the distributed tensor.
template <class T>
void distributed_mode_gram(Compute<T>& c, const DistTensor<T>& x, int n, T* out);

/// The same for a distributed sparse tensor whose block holds the entries `block` (x.local,
/// or the trees' copy once x.local is released).
template <class T>
void distributed_mode_gram(const DistSparseTensor<T>& x, const SparseTensor<T>& block, int n,
                           T* out);

}  // namespace tenfold::mpi::detail
