// Planted CP problems: factors of prescribed collinearity (Tomasi and Bro, 2006)
// and Gaussian noise of prescribed relative norm.
#include <cmath>
#include <string>
#include <vector>

#include "core/random.hpp"
#include "tenfold/error.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold {
namespace {

void validate(const RandomCpOptions& o) {
  const auto order = o.dims.size();
  if (order < 2) {
    throw InvalidArgument("random_cp_tensor needs order >= 2, got order " + std::to_string(order));
  }
  checked_numel(o.dims);
  for (std::size_t n = 0; n < order; ++n) {
    if (o.dims[n] < 1) {
      throw InvalidArgument("random_cp_tensor: size " + std::to_string(o.dims[n]) + " of mode " +
                            std::to_string(n) + " must be >= 1");
    }
  }
  if (o.rank < 1) {
    throw InvalidArgument("random_cp_tensor: rank must be at least 1, got " +
                          std::to_string(o.rank));
  }
  for (std::size_t n = 0; n < order; ++n) {
    if (o.rank > o.dims[n]) {
      throw InvalidArgument("random_cp_tensor: rank " + std::to_string(o.rank) +
                            " exceeds the size " + std::to_string(o.dims[n]) + " of mode " +
                            std::to_string(n) + " (columns with prescribed cosines need R <= I_n)");
    }
  }
  if (!(o.collinearity >= 0.0 && o.collinearity < 1.0)) {
    throw InvalidArgument("random_cp_tensor: collinearity must be in [0, 1), got " +
                          std::to_string(o.collinearity));
  }
  if (!(o.noise >= 0.0) || !std::isfinite(o.noise)) {
    throw InvalidArgument("random_cp_tensor: noise must be finite and >= 0, got " +
                          std::to_string(o.noise));
  }
}

// Lower Cholesky factor L (R x R, column-major) of G = (1 - c) I + c 1 1^T.
std::vector<double> collinear_gram_cholesky(index_t r, double c) {
  const auto at = [r](index_t i, index_t j) { return static_cast<std::size_t>(i + j * r); };
  std::vector<double> l(static_cast<std::size_t>(r * r), 0.0);
  for (index_t j = 0; j < r; ++j) {
    // L(j, j)^2 = G(j, j) - sum_k L(j, k)^2; L(i, j) = (G(i, j) - sum_k L(i, k) L(j, k)) / L(j, j).
    double d = 1.0;
    for (index_t k = 0; k < j; ++k) d -= l[at(j, k)] * l[at(j, k)];
    l[at(j, j)] = std::sqrt(d);
    for (index_t i = j + 1; i < r; ++i) {
      double s = c;
      for (index_t k = 0; k < j; ++k) s -= l[at(i, k)] * l[at(j, k)];
      l[at(i, j)] = s / l[at(j, j)];
    }
  }
  return l;
}

// I x R matrix with orthonormal columns: Gaussian columns, Gram-Schmidt applied twice.
std::vector<double> random_orthonormal(index_t rows, index_t r, detail::Rng& rng) {
  std::vector<double> q(static_cast<std::size_t>(rows * r));
  for (index_t j = 0; j < r; ++j) {
    double* qj = q.data() + j * rows;
    double s = 0.0;
    do {  // a draw inside the span of the previous columns has probability zero
      for (index_t i = 0; i < rows; ++i) qj[i] = rng.normal();
      for (int pass = 0; pass < 2; ++pass) {
        for (index_t k = 0; k < j; ++k) {
          const double* qk = q.data() + k * rows;
          double d = 0.0;
          for (index_t i = 0; i < rows; ++i) d += qk[i] * qj[i];
          for (index_t i = 0; i < rows; ++i) qj[i] -= d * qk[i];
        }
      }
      s = 0.0;
      for (index_t i = 0; i < rows; ++i) s += qj[i] * qj[i];
      s = std::sqrt(s);
    } while (s == 0.0);
    for (index_t i = 0; i < rows; ++i) qj[i] /= s;
  }
  return q;
}

}  // namespace

template <class T>
RandomCpProblem<T> random_cp_tensor(const RandomCpOptions& o) {
  validate(o);
  const index_t r = o.rank;
  detail::Rng rng(o.seed);
  const std::vector<double> l = collinear_gram_cholesky(r, o.collinearity);
  RandomCpProblem<T> p;
  for (index_t rows : o.dims) {
    // U = Q L^T: U^T U = L Q^T Q L^T = G, i.e. unit columns with pairwise cosine c.
    const std::vector<double> q = random_orthonormal(rows, r, rng);
    Matrix<T> u(rows, r);
    for (index_t j = 0; j < r; ++j)
      for (index_t i = 0; i < rows; ++i) {
        double s = 0.0;
        for (index_t k = 0; k <= j; ++k)
          s += q[static_cast<std::size_t>(i + k * rows)] * l[static_cast<std::size_t>(j + k * r)];
        u(i, j) = static_cast<T>(s);
      }
    p.truth.factors.push_back(std::move(u));
  }
  for (index_t j = 0; j < r; ++j) p.truth.weights.push_back(static_cast<T>(1.0 + rng.uniform()));
  p.tensor = p.truth.full();
  if (o.noise > 0.0) {
    // X = X_true + N, N Gaussian scaled to ||N|| = noise ||X_true||.
    const Tensor<T> truth = p.tensor;
    std::vector<double> noise(static_cast<std::size_t>(truth.numel()));
    double nn = 0.0;
    for (double& v : noise) {
      v = rng.normal();
      nn += v * v;
    }
    const double scale = o.noise * norm<T>(truth) / std::sqrt(nn);
    double diff = 0.0;
    for (index_t i = 0; i < truth.numel(); ++i) {
      p.tensor[i] = static_cast<T>(truth[i] + scale * noise[static_cast<std::size_t>(i)]);
      const double d = static_cast<double>(p.tensor[i]) - truth[i];
      diff += d * d;
    }
    p.noise_norm = std::sqrt(diff);
  }
  return p;
}

template RandomCpProblem<float> random_cp_tensor<float>(const RandomCpOptions&);
template RandomCpProblem<double> random_cp_tensor<double>(const RandomCpOptions&);

}  // namespace tenfold
