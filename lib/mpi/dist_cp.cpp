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
#include "core/multilinear.hpp"
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
  cache_.factor_changed(m);
  local_.factor_changed(m);
}

template <class T>
void DistDenseOperand<T>::mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) {
  Compute<T>& c = this->c_;
  const int order = this->order();
  cache_.use_rank(rank);
  // The rows of each other factor that this process's block touches.
  std::vector<const T*> local_factors(static_cast<std::size_t>(order), nullptr);
  for (int m = 0; m < order; ++m) {
    const auto mi = static_cast<std::size_t>(m);
    if (m == n) continue;
    const index_t rows = x_.local.dim(m), total = x_.dims[mi];
    if (!cache_.current(m)) {
      T* dst = ensure(c, slices_[mi], static_cast<std::size_t>(rows * rank));
      for (index_t j = 0; j < rank; ++j)
        c.copy(dst + j * rows, factors[mi] + j * total + x_.offsets[mi],
               static_cast<std::size_t>(rows));
      cache_.refreshed(m);
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
  // The Gram's redistribution: the packed block and the received columns (about 2 B).
  const double gram_block = mode_grams ? 2.0 * static_cast<double>(x_.local.numel()) : 0.0;
  return local_.workspace_elements(rank, false) + slices + gram_block;
}

template <class T>
void distributed_mode_gram(Compute<T>& c, const DistTensor<T>& x, int n, T* out) {
  const ProcessGrid& grid = *x.grid;
  const auto ni = static_cast<std::size_t>(n);
  const int parts = grid.shape()[ni], me = grid.coords()[ni];
  const index_t total = x.dims[ni], rows = x.local.dim(n);
  const index_t gram_size = total * total;
  if (parts == 1) {
    // G_p = X_p,(n) X_p,(n)^T: this block holds whole mode-n fibres already.
    if (x.local.numel() == 0) {
      std::fill_n(out, static_cast<std::size_t>(gram_size), T(0));
    } else {
      tenfold::detail::mode_gram(c, x.local.data(), x.local.dims(), n, out);
    }
  } else {
    // The block seen as L x I_n^p x R (natural unfolding, as lib/core/multilinear); its
    // columns j = l + L k are the same (l, k) index pairs on every block of the fibre,
    // which differ only in their mode-n range.
    index_t left = 1, right = 1;
    for (int m = 0; m < n; ++m) left *= x.local.dim(m);
    for (int m = n + 1; m < x.order(); ++m) right *= x.local.dim(m);
    const index_t cols = left * right;
    // Redistribution within the fibre (TuckerMPI): process t receives, from every block
    // q, the rows_q x |J_t| entries of its column range J_t = block_range(cols, P_n, t),
    // so that it holds W_t (|J_t| x I_n) = X_(n)(:, J_t)^T of the whole fibre.
    std::vector<T> send(static_cast<std::size_t>(rows * cols));
    std::vector<int> send_counts(static_cast<std::size_t>(parts)),
        send_displs(static_cast<std::size_t>(parts)), recv_counts(static_cast<std::size_t>(parts)),
        recv_displs(static_cast<std::size_t>(parts));
    const Range mine = block_range(cols, parts, me);
    T* dst = send.data();
    index_t sent = 0;
    for (int t = 0; t < parts; ++t) {
      const auto ti = static_cast<std::size_t>(t);
      const Range jt = block_range(cols, parts, t);
      send_displs[ti] = checked_count(dst - send.data(), "mode Gram");
      send_counts[ti] = checked_count(rows * jt.size, "mode Gram");
      if (t != me) sent += rows * jt.size;
      // Packed j fastest: block t is |J_t| x rows_p, column-major.
      for (index_t i = 0; i < rows; ++i) {
        for (index_t j = jt.begin; j < jt.begin + jt.size;) {
          const index_t l = j % left, k = j / left;
          const index_t run = std::min(left - l, jt.begin + jt.size - j);
          dst = std::copy_n(x.local.data() + l + left * (i + rows * k), run, dst);
          j += run;
        }
      }
      const Range rq = block_range(total, parts, t);
      recv_displs[ti] = checked_count(rq.begin * mine.size, "mode Gram");
      recv_counts[ti] = checked_count(rq.size * mine.size, "mode Gram");
    }
    // Block q lands at column begin_q of W_t, so the blocks side by side are W_t.
    std::vector<T> w(static_cast<std::size_t>(mine.size * total));
    count(*x.stats, "gram", grid.fibre(n), sent);
    MPI_Alltoallv(send.data(), send_counts.data(), send_displs.data(), datatype<T>(), w.data(),
                  recv_counts.data(), recv_displs.data(), datatype<T>(), grid.fibre(n));
    std::vector<T>().swap(send);
    // G_p = W_t^T W_t, one syrk
    if (w.empty()) {
      std::fill_n(out, static_cast<std::size_t>(gram_size), T(0));
    } else {
      const std::vector<index_t> wdims{mine.size, total};
      tenfold::detail::mode_gram(c, w.data(), wdims, 1, out);
    }
  }
  // G = sum over all processes of G_p (every column (l, k) of X_(n) is in exactly one W)
  allreduce_sum(*x.stats, "gram", grid.comm(), out, gram_size);
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
  MPI_Comm comm = x.grid->comm();
  // The same arguments everywhere (the replicated ALS must take the same decisions on
  // every process), then checks whose outcome is the same everywhere, then the entries
  // of every block.
  Fields same = {{"element type", sizeof(T) == 4 ? "float32" : "float64"},
                 {"tensor shape", tenfold::detail::shape_string(x.dims)},
                 {"rank", std::to_string(options.rank)},
                 {"max_iters", std::to_string(options.max_iters)},
                 {"tol", detail::exact(options.tol)},
                 {"init", std::string(to_string(options.init))},
                 {"seed", std::to_string(options.seed)},
                 {"n_starts", std::to_string(options.n_starts)},
                 {"nonnegative", options.nonnegative ? "true" : "false"},
                 {"line_search", options.line_search ? "true" : "false"},
                 {"compress", std::string(to_string(options.compress))},
                 {"solver", std::string(to_string(options.solver))},
                 {"ridge", detail::exact(options.ridge)},
                 {"time_limit", detail::exact(options.time_limit)},
                 {"layout", std::to_string(static_cast<int>(options.layout))},
                 {"backend", std::string(to_string(options.backend))},
                 {"initial factors", std::to_string(initial_factors.size())}};
  for (std::size_t n = 0; n < initial_factors.size(); ++n)
    same.emplace_back("initial factor " + std::to_string(n),
                      detail::fingerprint(initial_factors[n]));
  check_same(comm, "the arguments of cp_als", same);
  tenfold::detail::validate_dense_shape(x.dims, "CP-ALS");
  tenfold::detail::validate_cp_options(options, initial_factors, x.dims);
  tenfold::detail::require_exact_solver(options, "a distributed tensor");
  tenfold::detail::refuse_sparsity(options, "a distributed tensor");
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
  on_every_process(comm, [&] { detail::check_local_finite(x.local.view(), "tensor"); });
  // The callback, where a process has one, on every process alike: an exception on any
  // is thrown on all, and the run stops everywhere when any asks to.
  CpOptions o = options;
  o.callback = [comm, user = options.callback](const CpProgress& p) {
    int go_on = 1;
    on_every_process(comm, [&] { go_on = !user || user(p) ? 1 : 0; });
    MPI_Allreduce(MPI_IN_PLACE, &go_on, 1, MPI_INT, MPI_MIN, comm);
    return go_on == 1;
  };
  // One start by default: the automatic random starts of a single process would pick
  // by fits that rounding may order differently across process counts.
  if (o.n_starts == 0) o.n_starts = 1;
  auto c = tenfold::detail::make_compute<T>(Backend::cpu);
  detail::DistDenseOperand<T> op(*c, x);
  return tenfold::detail::run_cp_starts(op, *c, o, initial_factors, start);
}

template <class T>
Matrix<T> mode_gram(const DistTensor<T>& x, int n) {
  check_same(x.grid->comm(), "the arguments of mode_gram",
             {{"element type", sizeof(T) == 4 ? "float32" : "float64"},
              {"tensor shape", tenfold::detail::shape_string(x.dims)},
              {"axis", std::to_string(n)}});
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
