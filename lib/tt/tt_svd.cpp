// TT-SVD (Oseledets 2011, Alg. 1): the bonds are cut one after another, each from the
// leading singular vectors of the remaining tensor's unfolding, which then shrinks to
// U^T W. The singular vectors come from the Gram of the unfolding's shorter side, as in
// Tucker (truncate_gram, lib/tucker/steps.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "core/compute.hpp"
#include "core/dense_mttkrp.hpp"
#include "core/format.hpp"
#include "core/memory.hpp"
#include "core/scaling.hpp"
#include "core/subspace.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tensor_train.hpp"
#include "tt/contract.hpp"
#include "tucker/steps.hpp"

namespace tenfold {
namespace {

using detail::Buffer;
using detail::Compute;
using detail::Op;

using Clock = std::chrono::steady_clock;

void validate_tt_options(const std::vector<index_t>& dims, const TensorTrainOptions& o) {
  detail::validate_dense_shape(dims, "Tensor train");
  const std::size_t order = dims.size();
  if (o.eps.has_value() == !o.ranks.empty()) {
    throw InvalidArgument(
        o.eps.has_value() ? "give either ranks or eps, not both"
                          : "Tensor train needs either ranks (N + 1 of them) or a tolerance eps");
  }
  if (o.eps.has_value() && !(*o.eps > 0.0 && *o.eps < 1.0)) {
    throw InvalidOption("eps", "must be in (0, 1), got " + detail::number_string(*o.eps));
  }
  if (o.ranks.empty()) return;
  if (o.ranks.size() != order + 1) {
    throw DimensionMismatch("ranks has " + std::to_string(o.ranks.size()) +
                            " entries, but a tensor train of a tensor of shape " +
                            detail::shape_string(dims) + " has " + std::to_string(order + 1) +
                            " (r_0 = 1, ..., r_N = 1)");
  }
  for (std::size_t k = 0; k <= order; ++k) {
    if (o.ranks[k] < 1) {
      throw InvalidArgument("TT rank r_" + std::to_string(k) + " must be at least 1, got " +
                            std::to_string(o.ranks[k]));
    }
  }
  if (o.ranks.front() != 1 || o.ranks.back() != 1) {
    throw InvalidArgument("TT ranks must start and end with 1 (r_0 = r_N = 1), got r_0 = " +
                          std::to_string(o.ranks.front()) +
                          " and r_N = " + std::to_string(o.ranks.back()));
  }
}

// The remaining tensor as the matrix A = op(W) that the next bond is cut from: rows are
// the swept bond and mode, columns the modes not yet swept. W is column-major, rows x
// cols (op none, the sweep from mode 0) or cols x rows (op trans, from the last mode).
template <class T>
struct Unfolding {
  const T* w = nullptr;
  index_t rows = 0, cols = 0;
  Op op = Op::none;
  index_t ld() const { return op == Op::none ? rows : cols; }
};

// The sweep's state: buffers, the timings, the cut bonds' singular values.
template <class T>
struct Sweep {
  explicit Sweep(Compute<T>& compute) : c(compute) {}

  Compute<T>& c;
  Buffer<T> gram, u, vectors, energy, remainder[2];
  std::vector<T> host_u;
  std::vector<std::vector<double>> singular_values;
  TensorTrainTimings timings;
};

// Negates the columns of a (rows x cols, backend memory) whose largest-magnitude entry (the
// first on ties) is negative, as TensorLy's svd_flip; leaves a's host copy in `host`.
template <class T>
void fix_column_signs(Compute<T>& c, index_t rows, index_t cols, T* a, std::vector<T>& host) {
  host.resize(static_cast<std::size_t>(rows * cols));
  c.download(host.data(), a, host.size());
  std::vector<T> signs(static_cast<std::size_t>(cols), T(1));
  bool flip = false;
  for (index_t j = 0; j < cols; ++j) {
    const T* col = host.data() + j * rows;
    index_t imax = 0;
    for (index_t i = 1; i < rows; ++i)
      if (std::abs(col[i]) > std::abs(col[imax])) imax = i;
    if (col[imax] < T(0)) {
      signs[static_cast<std::size_t>(j)] = T(-1);
      flip = true;
    }
  }
  if (!flip) return;
  for (index_t j = 0; j < cols; ++j) {
    const T s = signs[static_cast<std::size_t>(j)];
    for (index_t i = 0; i < rows; ++i) host[static_cast<std::size_t>(i + j * rows)] *= s;
  }
  c.upload(a, host.data(), host.size());
}

// U (a.rows x r, in s.u) = the leading left singular vectors of A, signs fixed; returns r.
// Wide A: eigenvectors of A A^T. Tall A: the eigenvectors P of A^T A give A P = U S, whose
// Q factor (CholeskyQR) is U.
template <class T>
index_t left_singular_vectors(Sweep<T>& s, const Unfolding<T>& a, const detail::Truncation& t) {
  Compute<T>& c = s.c;
  const bool wide = a.rows <= a.cols;
  const index_t in = wide ? a.rows : a.cols;
  T* g = ensure(c, s.gram, static_cast<std::size_t>(in * in));
  // Gram = A A^T (wide) or A^T A (tall)
  const Op gram_op = (a.op == Op::none) == wide ? Op::none : Op::trans;
  detail::timed(c, s.timings.gram, [&] {
    c.syrk(gram_op, in, wide ? a.cols : a.rows, T(1), a.w, a.ld(), T(0), g, in);
  });
  // Z = A^T V (wide) or A V (tall) for all eigenvectors V: the energies ||A^T v_i||^2 or
  // ||A v_i||^2, accurate where the eigenvalues are not (a tight eps).
  const detail::ProjectedEnergies<T> energies = [&](const T* v) {
    const index_t other = wide ? a.cols : a.rows;
    detail::require_memory(c, static_cast<double>(other) * static_cast<double>(in),
                           "Tensor train's rank choice at this eps");
    T* z = ensure(c, s.energy, static_cast<std::size_t>(other * in));
    const Op op = (a.op == Op::none) == wide ? Op::trans : Op::none;
    c.gemm(op, Op::none, other, in, in, T(1), a.w, a.ld(), v, in, T(0), z, other);
    std::vector<double> e(static_cast<std::size_t>(in));
    for (index_t i = 0; i < in; ++i) {
      e[static_cast<std::size_t>(i)] =
          c.sum_squares(static_cast<std::size_t>(other), z + (in - 1 - i) * other);
    }
    return e;
  };
  index_t r = 0;
  detail::timed(c, s.timings.eig, [&] {
    std::vector<double> lambda;
    Buffer<T>& vectors = wide ? s.u : s.vectors;
    r = detail::truncate_gram(c, g, in, 0, t, vectors, lambda, energies);
    for (double& l : lambda) l = std::sqrt(l);
    s.singular_values.push_back(std::move(lambda));
    if (!wide) {
      // U = Q of A P (rows x r); the Gram buffer serves as CholeskyQR's r x r scratch
      T* y = ensure(c, s.u, static_cast<std::size_t>(a.rows * r));
      const Op op = a.op == Op::none ? Op::none : Op::trans;
      c.gemm(op, Op::none, a.rows, r, a.cols, T(1), a.w, a.ld(), vectors.get(), a.cols, T(0), y,
             a.rows);
      if (!detail::cholesky_qr(c, a.rows, r, y, g, true)) {
        throw NumericalError("Tensor train: the singular vectors of a tall unfolding (" +
                             std::to_string(a.rows) + " x " + std::to_string(a.cols) +
                             ") could not be orthonormalised");
      }
    }
    fix_column_signs(c, a.rows, r, s.u.get(), s.host_u);
  });
  return r;
}

// Bond k's cap on its rank: the option's, clipped as TensorLy clips it.
index_t bond_rank(const TensorTrainOptions& o, std::size_t k, index_t rows, index_t cols) {
  const index_t most = std::min(rows, cols);
  return o.ranks.empty() ? most : std::min(o.ranks[k], most);
}

// Memory: the device copy, two remainders (each at most the first, r_1 / I_0 of X), and
// the largest Gram with the eigensolver's workspace (a tight eps checks its energies'
// product when it needs it).
template <class T>
void require_tt_memory(Compute<T>& c, const std::vector<index_t>& dims,
                       const TensorTrainOptions& o) {
  const bool forward = o.layout == Layout::col_major;
  const std::size_t order = dims.size();
  const double numel = static_cast<double>(checked_numel(dims));
  double gram = 0.0, first = 0.0, r = 1.0, rest = numel;
  for (std::size_t step = 0; step + 1 < order; ++step) {
    const std::size_t n = forward ? step : order - 1 - step;
    const double rows = r * static_cast<double>(dims[n]);
    rest /= static_cast<double>(dims[n]);
    const double cap = o.ranks.empty() ? rows : static_cast<double>(o.ranks[forward ? n + 1 : n]);
    r = std::min({cap, rows, rest});
    gram = std::max(gram, 3.0 * std::min(rows, rest) * std::min(rows, rest));
    if (step == 0) first = r * rest;
  }
  const double copy = c.host_memory() ? 0.0 : numel;
  detail::require_memory(c, copy + 2.0 * first + gram, "Tensor train");
}

// ||X - X^|| / ||X||. The sweep is a sequence of orthogonal projections, so ||X - X^||^2 =
// ||X||^2 - ||X^||^2 with ||X^|| the last core's norm (the others are orthonormal). That
// cancels below about sqrt(eps), where, for tensors of at most kFormedResidualMaxBytes
// with the memory there, the residual X - X^ is formed instead (as Tucker's error).
template <class T>
double relative_error(Compute<T>& c, const detail::DeviceTensor<T>& x, double norm_x2, double kept,
                      const std::vector<Tensor<T>>& cores) {
  if (norm_x2 <= 0.0) return 0.0;
  const double formula = std::sqrt(std::max(0.0, norm_x2 - kept) / norm_x2);
  const auto numel = static_cast<std::size_t>(checked_numel(x.dims()));
  const double bytes = static_cast<double>(numel) * sizeof(T);
  if (formula >= detail::kDirectErrorBelow * std::sqrt(std::numeric_limits<T>::epsilon()) ||
      bytes > static_cast<double>(detail::kFormedResidualMaxBytes) ||
      2.0 * bytes > static_cast<double>(c.available_bytes())) {
    return formula;
  }
  // X^ - X in place of X^, and its norm
  Buffer<T> w0, w1;
  T* residual = detail::tt_full(c, cores, w0, w1);
  c.axpy(numel, T(-1), x.data(), residual);
  return std::sqrt(c.sum_squares(numel, residual) / norm_x2);
}

template <class T>
TensorTrainResult<T> run_tt(Compute<T>& c, TensorView<const T> x, const TensorTrainOptions& o) {
  require_tt_memory(c, x.dims(), o);
  const std::vector<index_t>& dims = x.dims();
  const int order = x.order();
  const bool forward = o.layout == Layout::col_major;
  detail::DeviceTensor<T> dx(c, x);
  const double norm_x2 = dx.norm_squared();
  // With eps: each bond discards at most eps^2 ||X||^2 / (N - 1).
  const double budget = o.eps ? *o.eps * *o.eps * norm_x2 / (order - 1) : 0.0;
  Sweep<T> s(c);
  TensorTrainResult<T> res;
  res.model.cores.resize(static_cast<std::size_t>(order));
  Unfolding<T> a{dx.data(), 1, x.numel(), forward ? Op::none : Op::trans};
  index_t r = 1;
  for (int step = 0; step + 1 < order; ++step) {
    const int n = forward ? step : order - 1 - step;
    const auto ni = static_cast<std::size_t>(n);
    // The unfolding (r I_n) x (the modes not yet swept)
    a.rows = r * dims[ni];
    a.cols /= dims[ni];
    const std::size_t bond = forward ? ni + 1 : ni;
    const detail::Truncation t{o.ranks.empty()
                                   ? std::vector<index_t>{}
                                   : std::vector<index_t>{bond_rank(o, bond, a.rows, a.cols)},
                               budget};
    const index_t next = left_singular_vectors(s, a, t);
    // The core: U as (r, I_n, next) going forward, U^T as (next, I_n, r) going backward
    Tensor<T>& core = res.model.cores[ni];
    core = forward ? Tensor<T>({r, dims[ni], next}) : Tensor<T>({next, dims[ni], r});
    for (index_t j = 0; j < next; ++j)
      for (index_t i = 0; i < a.rows; ++i)
        core[forward ? i + j * a.rows : j + i * next] =
            s.host_u[static_cast<std::size_t>(i + j * a.rows)];
    // W <- U^T A (next x cols), stored as op(W) keeps it
    T* w = ensure(c, s.remainder[step % 2], static_cast<std::size_t>(next * a.cols));
    detail::timed(c, s.timings.contract, [&] {
      if (forward) {
        c.gemm(Op::trans, Op::none, next, a.cols, a.rows, T(1), s.u.get(), a.rows, a.w, a.ld(),
               T(0), w, next);
      } else {
        c.gemm(Op::none, Op::none, a.cols, next, a.rows, T(1), a.w, a.ld(), s.u.get(), a.rows, T(0),
               w, a.cols);
      }
    });
    a.w = w;
    r = next;
  }
  // The last core is the remainder: (r, I_{N-1}, 1) going forward, (1, I_0, r) backward
  const std::size_t last = forward ? static_cast<std::size_t>(order - 1) : 0;
  Tensor<T>& core = res.model.cores[last];
  core = forward ? Tensor<T>({r, dims[last], 1}) : Tensor<T>({1, dims[last], r});
  c.download(core.data(), a.w, static_cast<std::size_t>(core.numel()));
  const double kept = c.sum_squares(static_cast<std::size_t>(core.numel()), a.w);
  res.relative_error = relative_error(c, dx, norm_x2, kept, res.model.cores);
  double stored = 0.0;
  for (const Tensor<T>& g : res.model.cores) stored += static_cast<double>(g.numel());
  res.compression_ratio = static_cast<double>(x.numel()) / stored;
  res.singular_values = std::move(s.singular_values);
  res.timings = s.timings;
  return res;
}

}  // namespace

template <class T>
TensorTrainResult<T> tensor_train(TensorView<const T> x, const TensorTrainOptions& options) {
  const auto start = Clock::now();
  validate_tt_options(x.dims(), options);
  // Finite entries, and magnitudes far from 1 scaled by a power of two (core/scaling.hpp):
  // only the last core swept and the singular values scale back.
  const detail::Balancing b = detail::checked_balancing(x, "Tensor train input tensor");
  const auto c = detail::make_compute<T>(options.backend);
  TensorTrainResult<T> res;
  if (b.exponent == 0) {
    res = run_tt(*c, x, options);
  } else {
    res = run_tt<T>(*c, detail::scaled(x, b.exponent).view(), options);
    Tensor<T>& last =
        options.layout == Layout::col_major ? res.model.cores.back() : res.model.cores.front();
    detail::scale_back(std::span<T>(last.data(), static_cast<std::size_t>(last.numel())),
                       b.exponent, b, "the entries of the last tensor-train core");
    for (std::vector<double>& sv : res.singular_values) {
      detail::scale_back(std::span<double>(sv), b.exponent, b, "the singular values");
    }
  }
  res.timings.total = std::chrono::duration<double>(Clock::now() - start).count();
  return res;
}

template TensorTrainResult<float> tensor_train<float>(TensorView<const float>,
                                                      const TensorTrainOptions&);
template TensorTrainResult<double> tensor_train<double>(TensorView<const double>,
                                                        const TensorTrainOptions&);

}  // namespace tenfold
