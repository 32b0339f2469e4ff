#include "tucker/steps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/memory.hpp"
#include "core/multilinear.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::detail {

template <class T>
TuckerState<T>::TuckerState(Compute<T>& compute, TensorView<const T> tensor)
    : c(compute), dims(tensor.dims()), x(compute, tensor) {
  norm_x2 = x.norm_squared();
  ranks.assign(dims.size(), 0);
  u.resize(dims.size());
  eigenvalues.resize(dims.size());
}

template <class T>
double TuckerState<T>::relative_error(const T* y, index_t numel) {
  if (norm_x2 <= 0.0) return 0.0;
  const double y2 = c.sum_squares(static_cast<std::size_t>(numel), y);
  return std::sqrt(std::max(0.0, norm_x2 - y2) / norm_x2);
}

template <class T>
double TuckerState<T>::relative_error() {
  const index_t core_numel = checked_numel(ranks);
  const double formula = relative_error(core.get(), core_numel);
  const double below = kDirectErrorBelow * std::sqrt(std::numeric_limits<T>::epsilon());
  const index_t numel = checked_numel(dims);
  // The residual takes two tensors more (the TTM chain): only for tensors of at most
  // kFormedResidualMaxBytes, and when the memory is there.
  const double bytes = static_cast<double>(numel) * sizeof(T);
  if (norm_x2 <= 0.0 || formula >= below || bytes > static_cast<double>(kFormedResidualMaxBytes) ||
      2.0 * bytes > static_cast<double>(c.available_bytes())) {
    return formula;
  }
  double r2 = 0.0;
  timed(timings.ttm, [&] {
    // X^ = G x_0 U_0 ... x_{N-1} U_{N-1}, then X^ - X in place and its norm
    std::vector<ModeProduct<T>> products;
    for (std::size_t m = 0; m < dims.size(); ++m) {
      products.push_back({static_cast<int>(m), Op::none, u[m].get(), dims[m], dims[m]});
    }
    std::vector<index_t> shape = ranks;
    const T* xh = ttm_chain<T>(c, core.get(), shape, products, work0, work1);
    T* residual = xh == work0.get() ? work0.get() : work1.get();
    c.axpy(static_cast<std::size_t>(numel), T(-1), x.data(), residual);
    r2 = c.sum_squares(static_cast<std::size_t>(numel), residual);
  });
  return std::sqrt(r2 / norm_x2);
}

template <class T>
bool TuckerState<T>::report(TuckerMethod stage, int sweep, int n, double error) {
  ++steps;
  if (!callback) return true;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return callback(TuckerProgress{stage, steps, sweep, n, error, seconds});
}

template <class T>
void TuckerState<T>::cancelled(TuckerMethod stage, int k, int steps_of_stage) const {
  throw Cancelled("Tucker stopped by its callback after " + std::string(to_string(stage)) +
                  " step " + std::to_string(k) + " of " + std::to_string(steps_of_stage) +
                  ", before any complete model: no result");
}

template <class T>
void truncate_mode(TuckerState<T>& s, const T* y, const std::vector<index_t>& ydims, int n,
                   const Truncation& t, bool record) {
  Compute<T>& c = s.c;
  const auto ni = static_cast<std::size_t>(n);
  const index_t in = ydims[ni];
  T* g = ensure(c, s.gram, static_cast<std::size_t>(in * in));
  // Gram = Y_(n) Y_(n)^T
  s.timed(s.timings.gram, [&] { mode_gram(c, y, ydims, n, g); });
  // ||V^T Y_(n)||^2 row by row, for a rank choice below the Gram's accuracy: Z = Y x_n V^T
  // and the diagonal of Z_(n) Z_(n)^T (sums of squares, accurate to eps relative).
  const ProjectedEnergies<T> energies = [&](const T* vectors) {
    const index_t numel = checked_numel(ydims);
    require_memory(c, static_cast<double>(numel) + static_cast<double>(in * in),
                   "Tucker's rank choice at this eps");
    Buffer<T> z(c, static_cast<std::size_t>(numel)), zz(c, static_cast<std::size_t>(in * in));
    ttm(c, y, ydims, n, Op::trans, vectors, in, in, z.get());
    mode_gram(c, z.get(), ydims, n, zz.get());
    std::vector<T> host(static_cast<std::size_t>(in * in));
    c.download(host.data(), zz.get(), host.size());
    std::vector<double> e(static_cast<std::size_t>(in));
    for (index_t i = 0; i < in; ++i) {
      e[static_cast<std::size_t>(i)] =
          static_cast<double>(host[static_cast<std::size_t>((in - 1 - i) * (in + 1))]);
    }
    return e;
  };
  s.timed(s.timings.eig, [&] {
    std::vector<double> lambda;
    s.ranks[ni] = truncate_gram(c, g, in, n, t, s.u[ni], lambda, energies);
    if (record) s.eigenvalues[ni] = std::move(lambda);
  });
}

template <class T>
index_t truncate_gram(Compute<T>& c, T* g, index_t in, int n, const Truncation& t, Buffer<T>& u,
                      std::vector<double>& lambda, const ProjectedEnergies<T>& energies) {
  // Gram = V diag(w) V^T, w ascending
  std::vector<T> w(static_cast<std::size_t>(in));
  c.syevd(in, g, in, w.data());
  lambda.assign(w.rbegin(), w.rend());
  for (double& l : lambda) l = std::max(l, 0.0);
  // r = given, or the fewest leading eigenpairs with sum_{i >= r} lambda_i <= max_discarded
  index_t r = in;
  if (!t.ranks.empty()) {
    r = t.ranks[static_cast<std::size_t>(n)];
  } else {
    // Energies from the eigenvalues, or below their accuracy from the projections.
    double trace = 0.0;
    for (double l : lambda) trace += l;
    const bool project =
        energies && t.max_discarded < std::sqrt(std::numeric_limits<T>::epsilon()) * trace;
    const std::vector<double> energy = project ? energies(g) : lambda;
    double discarded = 0.0;
    while (r > 1 && discarded + energy[static_cast<std::size_t>(r - 1)] <= t.max_discarded) {
      discarded += energy[static_cast<std::size_t>(--r)];
    }
  }
  // U_n = the eigenvectors of the r largest eigenvalues, largest first
  T* un = ensure(c, u, static_cast<std::size_t>(in * r));
  for (index_t j = 0; j < r; ++j) {
    c.copy(un + j * in, g + (in - 1 - j) * in, static_cast<std::size_t>(in));
  }
  return r;
}

template <class T>
void fix_signs(TTensor<T>& model) {
  const std::vector<index_t> ranks = model.ranks();
  const index_t numel = model.core.numel();
  index_t inner = 1;  // prod_{m < n} r_m: the stride of mode n in the core
  for (std::size_t n = 0; n < ranks.size(); ++n) {
    Matrix<T>& u = model.factors[n];
    const index_t outer = numel / (inner * ranks[n]);
    for (index_t j = 0; j < ranks[n]; ++j) {
      index_t imax = 0;
      for (index_t i = 1; i < u.rows(); ++i)
        if (std::abs(u(i, j)) > std::abs(u(imax, j))) imax = i;
      if (!(u(imax, j) < T(0))) continue;
      // U_n(:, j) -> -U_n(:, j), G(..., j, ...) -> -G(..., j, ...)
      for (index_t i = 0; i < u.rows(); ++i) u(i, j) = -u(i, j);
      for (index_t o = 0; o < outer; ++o) {
        T* slice = model.core.data() + (o * ranks[n] + j) * inner;
        for (index_t i = 0; i < inner; ++i) slice[i] = -slice[i];
      }
    }
    inner *= ranks[n];
  }
}

template void fix_signs<float>(TTensor<float>&);
template void fix_signs<double>(TTensor<double>&);
template index_t truncate_gram<float>(Compute<float>&, float*, index_t, int, const Truncation&,
                                      Buffer<float>&, std::vector<double>&,
                                      const ProjectedEnergies<float>&);
template index_t truncate_gram<double>(Compute<double>&, double*, index_t, int, const Truncation&,
                                       Buffer<double>&, std::vector<double>&,
                                       const ProjectedEnergies<double>&);
template struct TuckerState<float>;
template struct TuckerState<double>;
template void truncate_mode<float>(TuckerState<float>&, const float*, const std::vector<index_t>&,
                                   int, const Truncation&, bool);
template void truncate_mode<double>(TuckerState<double>&, const double*,
                                    const std::vector<index_t>&, int, const Truncation&, bool);

}  // namespace tenfold::detail
