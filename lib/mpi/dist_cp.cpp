// Distributed CP-ALS: the library's ALS loop (run_cp_starts) over an operand whose
// primitives reduce across the process grid. Factors are replicated: every process
// holds U_n (I_n x R) in full and solves the same R x R systems.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/compute.hpp"
#include "core/format.hpp"
#include "core/multilinear.hpp"
#include "cp/cp_als.hpp"
#include "cp/dense_operand.hpp"
#include "mpi/comm.hpp"
#include "mpi/dist_operand.hpp"
#include "sparse/sparse_operand.hpp"
#include "tenfold/error.hpp"

namespace tenfold::mpi {
namespace detail {

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

template void distributed_mode_gram<float>(Compute<float>&, const DistTensor<float>&, int, float*);
template void distributed_mode_gram<double>(Compute<double>&, const DistTensor<double>&, int,
                                            double*);

}  // namespace detail

namespace {

// The checks every distributed CP-ALS makes before any work, in this order: the same
// arguments everywhere (the replicated ALS must take the same decisions on every
// process), then checks whose outcome is the same everywhere. `what`: the tensor's kind
// in messages; `extra`: fields of its own that must agree too.
template <class T>
void check_cp_arguments(MPI_Comm comm, const std::vector<index_t>& dims, const CpOptions& options,
                        const CpStart<T>& initial_factors, const std::string& what,
                        const Fields& extra) {
  Fields same = {{"element type", sizeof(T) == 4 ? "float32" : "float64"},
                 {"tensor shape", tenfold::detail::shape_string(dims)},
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
  same.insert(same.end(), extra.begin(), extra.end());
  check_same(comm, "the arguments of cp_als", same);
  tenfold::detail::validate_dense_shape(dims, "CP-ALS");
  tenfold::detail::validate_cp_options(options, initial_factors, dims);
  tenfold::detail::require_exact_solver(options, what.c_str());
  tenfold::detail::refuse_sparsity(options, what.c_str());
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
}

// The ALS loop over a distributed operand, with the callback, where a process has one,
// on every process alike: an exception on any is thrown on all, and the run stops
// everywhere when any asks to.
template <class T>
CpResult<T> run_distributed(MPI_Comm comm, tenfold::detail::CpOperand<T>& op,
                            tenfold::detail::Compute<T>& c, const CpOptions& options,
                            const CpStart<T>& initial_factors,
                            std::chrono::steady_clock::time_point start) {
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
  return tenfold::detail::run_cp_starts(op, c, o, initial_factors, start);
}

}  // namespace

template <class T>
CpResult<T> cp_als(const DistTensor<T>& x, const CpOptions& options, CpStart<T> initial_factors) {
  const auto start = std::chrono::steady_clock::now();
  MPI_Comm comm = x.grid->comm();
  check_cp_arguments<T>(comm, x.dims, options, initial_factors, "a distributed tensor", {});
  // then the entries of every block
  on_every_process(comm, [&] { detail::check_local_finite(x.local.view(), "tensor"); });
  auto c = tenfold::detail::make_compute<T>(Backend::cpu);
  std::vector<std::vector<index_t>> bounds;
  for (int n = 0; n < x.order(); ++n)
    bounds.push_back(detail::block_bounds(x.dims[static_cast<std::size_t>(n)],
                                          x.grid->shape()[static_cast<std::size_t>(n)]));
  tenfold::detail::Compute<T>& cr = *c;
  // The Gram's redistribution: the packed block and the received columns (about 2 B).
  detail::DistOperand<T> op(
      cr, {*x.grid, x.dims, std::move(bounds), *x.stats},
      std::make_unique<tenfold::detail::DenseOperand<T>>(cr, x.local.view()),
      [&cr, &x](int n, T* out) { detail::distributed_mode_gram(cr, x, n, out); },
      2.0 * static_cast<double>(x.local.numel()));
  return run_distributed(comm, op, cr, options, initial_factors, start);
}

template <class T>
CsfLayout csf_layout_for(const DistSparseTensor<T>& x, const SparseCpOptions& sparse, bool taken) {
  // Each process's layout for its block; every process takes the one that holds least
  // (all, two, one: the last any process needs), so that every block's trees fit. A
  // layout the user named is every process's already.
  constexpr CsfLayout by_memory[] = {CsfLayout::all, CsfLayout::two, CsfLayout::one};
  const CsfLayout mine = tenfold::csf_layout_for(x.local, sparse, taken);
  int most = static_cast<int>(std::find(std::begin(by_memory), std::end(by_memory), mine) -
                              std::begin(by_memory));
  MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT, MPI_MAX, x.grid->comm());
  return by_memory[most];
}

namespace {

// CP-ALS of x on the CSF trees of its block, built from `entries`: x.local, or (released
// once the trees are built) x.local taken.
template <class T, class Entries>
CpResult<T> sparse_cp_als(const DistSparseTensor<T>& x, Entries&& entries, const CpOptions& options,
                          const CpStart<T>& initial_factors, const SparseCpOptions& sparse) {
  const auto start = std::chrono::steady_clock::now();
  MPI_Comm comm = x.grid->comm();
  check_cp_arguments<T>(comm, x.dims, options, initial_factors, "a distributed sparse tensor",
                        {{"csf", std::string(to_string(sparse.csf))}});
  if (options.compress == CpCompress::on) {
    throw InvalidArgument("compress = on applies to dense tensors only, not to a sparse tensor");
  }
  auto c = tenfold::detail::make_compute<T>(Backend::cpu);
  tenfold::detail::Compute<T>& cr = *c;
  constexpr bool taken = !std::is_lvalue_reference_v<Entries>;
  const CsfLayout layout = csf_layout_for(x, sparse, taken);
  // The Gram's exchange: the block's entries packed and received (about 2 nnz (N + 1)),
  // and once they are released, their copy rebuilt from the trees.
  const double gram_elements =
      (taken ? 3.0 : 2.0) * static_cast<double>(x.local.nnz()) * (x.order() + 1);
  std::unique_ptr<tenfold::detail::SparseOperand<T>> local;
  on_every_process(comm, [&] {
    local = std::make_unique<tenfold::detail::SparseOperand<T>>(cr, std::forward<Entries>(entries),
                                                                layout);
  });
  const tenfold::detail::SparseOperand<T>& trees = *local;
  detail::DistOperand<T> op(
      cr, {*x.grid, x.dims, x.bounds, *x.stats}, std::move(local),
      [&x, &trees](int n, T* out) {
        trees.with_entries(
            [&](const SparseTensor<T>& block) { detail::distributed_mode_gram(x, block, n, out); });
      },
      gram_elements);
  return run_distributed(comm, op, cr, options, initial_factors, start);
}

}  // namespace

template <class T>
CpResult<T> cp_als(const DistSparseTensor<T>& x, const CpOptions& options,
                   CpStart<T> initial_factors, const SparseCpOptions& sparse) {
  return sparse_cp_als(x, x.local, options, initial_factors, sparse);
}

template <class T>
CpResult<T> cp_als(DistSparseTensor<T>&& x, const CpOptions& options, CpStart<T> initial_factors,
                   const SparseCpOptions& sparse) {
  return sparse_cp_als(x, std::move(x.local), options, initial_factors, sparse);
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
template CsfLayout csf_layout_for<float>(const DistSparseTensor<float>&, const SparseCpOptions&,
                                         bool);
template CsfLayout csf_layout_for<double>(const DistSparseTensor<double>&, const SparseCpOptions&,
                                          bool);
template CpResult<float> cp_als<float>(const DistSparseTensor<float>&, const CpOptions&,
                                       CpStart<float>, const SparseCpOptions&);
template CpResult<double> cp_als<double>(const DistSparseTensor<double>&, const CpOptions&,
                                         CpStart<double>, const SparseCpOptions&);
template CpResult<float> cp_als<float>(DistSparseTensor<float>&&, const CpOptions&, CpStart<float>,
                                       const SparseCpOptions&);
template CpResult<double> cp_als<double>(DistSparseTensor<double>&&, const CpOptions&,
                                         CpStart<double>, const SparseCpOptions&);
template CpResult<double> cp_als<double>(const DistTensor<double>&, const CpOptions&,
                                         CpStart<double>);
template Matrix<float> mode_gram<float>(const DistTensor<float>&, int);
template Matrix<double> mode_gram<double>(const DistTensor<double>&, int);

}  // namespace tenfold::mpi
