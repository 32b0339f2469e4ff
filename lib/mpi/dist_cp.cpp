// Distributed CP-ALS: the library's ALS loop (run_cp_starts) over an operand whose
// primitives reduce across the process grid. Factors are replicated: every process
// holds U_n (I_n x R) in full and solves the same R x R systems.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/compute.hpp"
#include "core/format.hpp"
#include "cp/cp_als.hpp"
#include "cp/dense_operand.hpp"
#include "mpi/comm.hpp"
#include "mpi/dist_operand.hpp"
#include "tenfold/error.hpp"

namespace tenfold::mpi {
namespace detail {

using tenfold::detail::Buffer;
using tenfold::detail::ensure;

template <class T>
DistDenseOperand<T>::DistDenseOperand(Compute<T>& c, const DistTensor<T>& x)
    : tenfold::detail::CpOperand<T>(c), x_(x), local_(c, x.local.view()) {
  stale_.assign(x.dims.size(), true);
  slices_.resize(x.dims.size());
}

template <class T>
double DistDenseOperand<T>::norm_squared() {
  if (norm_squared_ < 0.0) {
    // ||X||^2 = sum over the processes of ||X_block||^2
    double s = local_.norm_squared();
    allreduce_sum(*x_.stats, "norm", x_.grid->comm(), &s, 1);
    norm_squared_ = s;
  }
  return norm_squared_;
}

template <class T>
void DistDenseOperand<T>::factor_changed(int m) {
  stale_[static_cast<std::size_t>(m)] = true;
  local_.factor_changed(m);
}

template <class T>
void DistDenseOperand<T>::mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) {
  Compute<T>& c = this->c_;
  const int order = this->order();
  if (rank != rank_) std::fill(stale_.begin(), stale_.end(), true);
  rank_ = rank;
  // The rows of each other factor that this process's block touches.
  std::vector<const T*> local_factors(static_cast<std::size_t>(order), nullptr);
  for (int m = 0; m < order; ++m) {
    const auto mi = static_cast<std::size_t>(m);
    if (m == n) continue;
    const index_t rows = x_.local.dim(m), total = x_.dims[mi];
    if (stale_[mi]) {
      T* dst = ensure(c, slices_[mi], static_cast<std::size_t>(rows * rank));
      for (index_t j = 0; j < rank; ++j)
        c.copy(dst + j * rows, factors[mi] + j * total + x_.offsets[mi],
               static_cast<std::size_t>(rows));
      stale_[mi] = false;
    }
    local_factors[mi] = slices_[mi].get();
  }
  const auto ni = static_cast<std::size_t>(n);
  const index_t rows = x_.local.dim(n);
  // M_block = X_block,(n) (Khatri-Rao of the local factor rows), the local dimension tree
  T* m = ensure(c, partial_, static_cast<std::size_t>(rows * rank));
  local_.mttkrp(n, local_factors, rank, m);
  // Rows of M for this block's range of mode n: summed over the slice (the processes
  // with the same coordinate n), then all rows gathered within the fibre.
  allreduce_sum(*x_.stats, "mttkrp", x_.grid->slice(n), m, rows * rank);
  allgather_rows(*x_.stats, "mttkrp", x_.grid->fibre(n), m, x_.dims[ni], rank, out);
}

template <class T>
void DistDenseOperand<T>::mode_gram(int n, T* out) {
  distributed_mode_gram(this->c_, x_, n, out);
}

template <class T>
double DistDenseOperand<T>::workspace_elements(index_t rank, bool mode_grams) const {
  double slices = 0.0;
  for (index_t d : x_.local.dims()) slices += static_cast<double>(d) * rank;
  const double gram_block = mode_grams ? static_cast<double>(x_.local.numel()) : 0.0;
  return local_.workspace_elements(rank, false) + slices + gram_block;
}

template <class T>
void distributed_mode_gram(Compute<T>& c, const DistTensor<T>& x, int n, T* out) {
  const ProcessGrid& grid = *x.grid;
  const auto ni = static_cast<std::size_t>(n);
  const int parts = grid.shape()[ni], me = grid.coords()[ni];
  const index_t total = x.dims[ni], rows = x.local.dim(n);
  // The block seen as L x I_n^p x R (natural unfolding, as lib/core/multilinear).
  index_t left = 1, right = 1;
  for (int m = 0; m < n; ++m) left *= x.local.dim(m);
  for (int m = n + 1; m < x.order(); ++m) right *= x.local.dim(m);
  // S (rows x I_n) = X_p,(n) [X_0,(n); ...; X_{P_n - 1},(n)]^T: the fibre's blocks share
  // every other index range, so block q arrives by broadcast from the fibre's process q.
  std::vector<T> strip(static_cast<std::size_t>(rows * total), T(0));
  std::vector<T> other;
  for (int q = 0; q < parts; ++q) {
    const Range rq = block_range(total, parts, q);
    const T* y = x.local.data();
    if (parts > 1) {
      other.resize(static_cast<std::size_t>(left * rq.size * right));
      if (q == me) std::copy(x.local.values().begin(), x.local.values().end(), other.begin());
      count(*x.stats, "gram", grid.fibre(n), static_cast<index_t>(other.size()));
      MPI_Bcast(other.data(), checked_count(static_cast<index_t>(other.size()), "mode Gram"),
                datatype<T>(), q, grid.fibre(n));
      y = other.data();
    }
    // An empty block (a mode truncated below the grid size) contributes nothing.
    if (x.local.numel() == 0 || rq.size == 0) continue;
    T* s = strip.data() + rq.begin * rows;
    if (left == 1) {
      c.gemm(Op::none, Op::trans, rows, rq.size, right, T(1), x.local.data(), rows, y, rq.size,
             T(0), s, rows);
    } else {
      // sum over the right index k of X_k^T Y_k, X_k the L x I_n^p slice k
      for (index_t k = 0; k < right; ++k) {
        c.gemm(Op::trans, Op::none, rows, rq.size, left, T(1), x.local.data() + k * left * rows,
               left, y + k * left * rq.size, left, k == 0 ? T(0) : T(1), s, rows);
      }
    }
  }
  allreduce_sum(*x.stats, "gram", grid.slice(n), strip.data(), rows * total);
  allgather_rows(*x.stats, "gram", grid.fibre(n), strip.data(), total, total, out);
}

template class DistDenseOperand<float>;
template class DistDenseOperand<double>;
template void distributed_mode_gram<float>(Compute<float>&, const DistTensor<float>&, int, float*);
template void distributed_mode_gram<double>(Compute<double>&, const DistTensor<double>&, int,
                                            double*);

}  // namespace detail

template <class T>
CpResult<T> cp_als(const DistTensor<T>& x, const CpOptions& options, CpStart<T> initial_factors) {
  const auto start = std::chrono::steady_clock::now();
  // Checks whose outcome is the same everywhere, then the entries of every block.
  tenfold::detail::validate_dense_shape(x.dims, "CP-ALS");
  tenfold::detail::validate_cp_options(options, initial_factors, x.dims);
  if (options.layout != Layout::col_major) {
    throw InvalidArgument(
        "the distributed CP-ALS takes its tensor in NumPy axis order: layout must be col_major");
  }
  if (options.backend != Backend::cpu) {
    throw InvalidArgument("the distributed CP-ALS runs on the cpu backend");
  }
  if (options.time_limit > 0.0) {
    throw InvalidArgument(
        "time_limit is not available in the distributed CP-ALS (every process must stop at "
        "the same iteration); use max_iters");
  }
  detail::on_every_process(x.grid->comm(), [&] { check_finite(x.local.view(), "tensor"); });
  auto c = tenfold::detail::make_compute<T>(Backend::cpu);
  detail::DistDenseOperand<T> op(*c, x);
  return tenfold::detail::run_cp_starts(op, *c, options, initial_factors, start);
}

template <class T>
Matrix<T> mode_gram(const DistTensor<T>& x, int n) {
  if (n < 0 || n >= x.order()) {
    throw InvalidArgument("mode_gram: axis " + std::to_string(n) + " of a tensor of order " +
                          std::to_string(x.order()));
  }
  auto c = tenfold::detail::make_compute<T>(Backend::cpu);
  const index_t in = x.dims[static_cast<std::size_t>(n)];
  Matrix<T> g(in, in);
  detail::distributed_mode_gram(*c, x, n, g.data());
  return g;
}

template CpResult<float> cp_als<float>(const DistTensor<float>&, const CpOptions&, CpStart<float>);
template CpResult<double> cp_als<double>(const DistTensor<double>&, const CpOptions&,
                                         CpStart<double>);
template Matrix<float> mode_gram<float>(const DistTensor<float>&, int);
template Matrix<double> mode_gram<double>(const DistTensor<double>&, int);

}  // namespace tenfold::mpi
