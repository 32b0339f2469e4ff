#include "mpi/dist_operand.hpp"

#include <string>
#include <utility>

#include "core/compute.hpp"
#include "mpi/comm.hpp"

namespace tenfold::mpi::detail {

using tenfold::detail::ensure;

std::vector<index_t> block_bounds(index_t size, int parts) {
  std::vector<index_t> b(static_cast<std::size_t>(parts) + 1, size);
  for (int p = 0; p < parts; ++p)
    b[static_cast<std::size_t>(p)] = block_range(size, parts, p).begin;
  return b;
}

index_t BlockPlace::begin(int n) const {
  const auto ni = static_cast<std::size_t>(n);
  return bounds[ni][static_cast<std::size_t>(grid.coords()[ni])];
}

index_t BlockPlace::size(int n) const {
  const auto ni = static_cast<std::size_t>(n);
  return bounds[ni][static_cast<std::size_t>(grid.coords()[ni]) + 1] - begin(n);
}

template <class T>
DistOperand<T>::DistOperand(Compute<T>& c, BlockPlace place,
                            std::unique_ptr<tenfold::detail::CpOperand<T>> local,
                            std::function<void(int, T*)> gram, double gram_elements)
    : tenfold::detail::CpOperand<T>(c),
      place_(std::move(place)),
      local_(std::move(local)),
      gram_(std::move(gram)),
      gram_elements_(gram_elements) {
  slices_.resize(place_.dims.size());
}

template <class T>
double DistOperand<T>::norm_squared() {
  if (norm_squared_ < 0.0) {
    // ||X||^2 = sum over the processes of ||X_block||^2
    double s = local_->norm_squared();
    allreduce_sum(place_.stats, "norm", place_.grid.comm(), &s, 1);
    norm_squared_ = s;
  }
  return norm_squared_;
}

template <class T>
void DistOperand<T>::factor_changed(int m) {
  cache_.factor_changed(m);
  local_->factor_changed(m);
}

template <class T>
void DistOperand<T>::mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) {
  Compute<T>& c = this->c_;
  const int order = this->order();
  cache_.use_rank(rank);
  // The rows of each other factor that this process's block touches (the factor
  // itself when the block spans the mode).
  std::vector<const T*> local_factors(static_cast<std::size_t>(order), nullptr);
  for (int m = 0; m < order; ++m) {
    const auto mi = static_cast<std::size_t>(m);
    const index_t rows = place_.size(m), total = place_.dims[mi], first = place_.begin(m);
    if (m == n) continue;
    if (rows == total) {
      local_factors[mi] = factors[mi];
      continue;
    }
    if (!cache_.current(m)) {
      T* dst = ensure(c, slices_[mi], static_cast<std::size_t>(rows * rank));
      for (index_t j = 0; j < rank; ++j)
        c.copy(dst + j * rows, factors[mi] + j * total + first, static_cast<std::size_t>(rows));
      cache_.refreshed(m);
    }
    local_factors[mi] = slices_[mi].get();
  }
  const auto ni = static_cast<std::size_t>(n);
  const index_t rows = place_.size(n), total = place_.dims[ni], first = place_.begin(n);
  // M_block = X_block,(n) (Khatri-Rao of the local factor rows), by the local operand,
  // in the first rows x R entries of out
  local_->mttkrp(n, local_factors, rank, out);
  // Rows of M for this block's range of mode n: summed over the slice (the processes
  // with the same coordinate n), moved to their place in out (last entry first: no
  // entry is overwritten before it moves), then all row ranges gathered within the fibre.
  allreduce_sum(place_.stats, "mttkrp", place_.grid.slice(n), out, rows * rank);
  if (rows != total) {
    for (index_t j = rank - 1; j >= 0; --j)
      for (index_t i = rows - 1; i >= 0; --i) out[first + i + j * total] = out[i + j * rows];
  }
  allgather_rows(place_.stats, "mttkrp", place_.grid.fibre(n), place_.bounds[ni], rank, out);
}

template <class T>
double DistOperand<T>::workspace_elements(index_t rank, bool mode_grams) const {
  double slices = 0.0;
  for (int m = 0; m < this->order(); ++m) slices += static_cast<double>(place_.size(m)) * rank;
  return local_->workspace_elements(rank, false) + slices + (mode_grams ? gram_elements_ : 0.0);
}

template class DistOperand<float>;
template class DistOperand<double>;

}  // namespace tenfold::mpi::detail
