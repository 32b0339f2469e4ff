#include "tucker/steps.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/multilinear.hpp"
#include "tenfold/error.hpp"

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
  s.timed(s.timings.eig, [&] {
    std::vector<double> lambda;
    s.ranks[ni] = truncate_gram(c, g, in, n, t, s.u[ni], lambda);
    if (record) s.eigenvalues[ni] = std::move(lambda);
  });
}

template <class T>
index_t truncate_gram(Compute<T>& c, T* g, index_t in, int n, const Truncation& t, Buffer<T>& u,
                      std::vector<double>& lambda) {
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
    double discarded = 0.0;
    while (r > 1 && discarded + lambda[static_cast<std::size_t>(r - 1)] <= t.max_discarded) {
      discarded += lambda[static_cast<std::size_t>(--r)];
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
                                      Buffer<float>&, std::vector<double>&);
template index_t truncate_gram<double>(Compute<double>&, double*, index_t, int, const Truncation&,
                                       Buffer<double>&, std::vector<double>&);
template struct TuckerState<float>;
template struct TuckerState<double>;
template void truncate_mode<float>(TuckerState<float>&, const float*, const std::vector<index_t>&,
                                   int, const Truncation&, bool);
template void truncate_mode<double>(TuckerState<double>&, const double*,
                                    const std::vector<index_t>&, int, const Truncation&, bool);

}  // namespace tenfold::detail
