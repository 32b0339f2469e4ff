// Weighted ALS for missing values: each factor update minimises ||W * (X - M)||^2
// exactly over U_n. The objective separates by the rows of U_n: row i fits the observed
// entries of slice i of mode n, x_j ~ u_i^T k_j with k_j = *_{m != n} U_m(j_m, :), whose
// normal equations are (sum_j k_j k_j^T) u_i = sum_j x_j k_j.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cp/masked_operand.hpp"

namespace tenfold::detail {

template <class T>
void MaskedOperand<T>::update_factor(int n, std::span<const T* const> factors, index_t rank,
                                     double ridge, T* out) {
  Compute<T>& c = this->c_;
  const auto& d = dims();
  const int order = static_cast<int>(d.size());
  const auto ni = static_cast<std::size_t>(n);
  const index_t in = d[ni], r = rank;
  const auto rr = static_cast<std::size_t>(r * r);
  std::vector<std::vector<T>> u(d.size());
  for (int m = 0; m < order; ++m) {
    if (m == n) continue;
    const auto mi = static_cast<std::size_t>(m);
    u[mi].resize(static_cast<std::size_t>(d[mi] * r));
    c.download(u[mi].data(), factors[mi], u[mi].size());
  }
  // G_i = sum_j k_j k_j^T (upper triangle), b_i = sum_j x_j k_j, in double
  std::vector<double> g(static_cast<std::size_t>(in) * rr, 0.0);
  std::vector<double> b(static_cast<std::size_t>(in * r), 0.0), k(static_cast<std::size_t>(r));
  for (std::size_t e = 0; e < observed_at_.size(); ++e) {
    std::fill(k.begin(), k.end(), 1.0);
    index_t rest = observed_at_[e], i = 0;
    for (int m = 0; m < order; ++m) {
      const auto mi = static_cast<std::size_t>(m);
      const index_t im = rest % d[mi];
      rest /= d[mi];
      if (m == n) {
        i = im;
        continue;
      }
      const T* row = u[mi].data() + im;
      for (index_t j = 0; j < r; ++j) k[static_cast<std::size_t>(j)] *= row[j * d[mi]];
    }
    double* gi = g.data() + static_cast<std::size_t>(i) * rr;
    double* bi = b.data() + static_cast<std::size_t>(i * r);
    const double x = observed_values_[e];
    for (index_t j = 0; j < r; ++j) {
      const double kj = k[static_cast<std::size_t>(j)];
      bi[j] += x * kj;
      for (index_t l = 0; l <= j; ++l) gi[l + j * r] += k[static_cast<std::size_t>(l)] * kj;
    }
  }
  // u_i = (G_i + ridge I)^{-1} b_i by Cholesky; where G_i is singular (a slice that
  // observes fewer than R independent k_j), the minimum-norm solution G_i^+ b_i.
  const auto host = make_compute<double>(Backend::cpu);
  std::vector<double> a(rr), w(static_cast<std::size_t>(r)), sol(static_cast<std::size_t>(r));
  std::vector<T> result(static_cast<std::size_t>(in * r));
  // a = G_i + ridge I, both triangles
  const auto load = [&](const double* gi) {
    for (index_t j = 0; j < r; ++j) {
      for (index_t l = 0; l <= j; ++l) {
        a[static_cast<std::size_t>(l + j * r)] = gi[l + j * r];
        a[static_cast<std::size_t>(j + l * r)] = gi[l + j * r];
      }
      a[static_cast<std::size_t>(j + j * r)] += ridge;
    }
  };
  for (index_t i = 0; i < in; ++i) {
    const double* gi = g.data() + static_cast<std::size_t>(i) * rr;
    load(gi);
    std::copy_n(b.data() + static_cast<std::size_t>(i * r), r, sol.data());
    if (host->potrf(r, a.data(), r)) {
      host->potrs_right(r, a.data(), r, 1, sol.data(), 1);
    } else {
      // G = Q diag(w) Q^T; u = Q diag(1/w_j for w_j > tol) Q^T b
      load(gi);
      host->syevd(r, a.data(), r, w.data());
      double wmax = 0.0;
      for (double v : w) wmax = std::max(wmax, std::abs(v));
      const double tol = wmax * static_cast<double>(r) * std::numeric_limits<double>::epsilon();
      std::vector<double> y(static_cast<std::size_t>(r), 0.0);
      for (index_t q = 0; q < r; ++q) {
        if (w[static_cast<std::size_t>(q)] <= tol) continue;
        double dot = 0.0;
        for (index_t j = 0; j < r; ++j)
          dot += a[static_cast<std::size_t>(j + q * r)] * b[static_cast<std::size_t>(i * r + j)];
        y[static_cast<std::size_t>(q)] = dot / w[static_cast<std::size_t>(q)];
      }
      for (index_t j = 0; j < r; ++j) {
        double v = 0.0;
        for (index_t q = 0; q < r; ++q)
          v += a[static_cast<std::size_t>(j + q * r)] * y[static_cast<std::size_t>(q)];
        sol[static_cast<std::size_t>(j)] = v;
      }
    }
    for (index_t j = 0; j < r; ++j)
      result[static_cast<std::size_t>(i + j * in)] =
          static_cast<T>(sol[static_cast<std::size_t>(j)]);
  }
  c.upload(out, result.data(), result.size());
}

template void MaskedOperand<float>::update_factor(int, std::span<const float* const>, index_t,
                                                  double, float*);
template void MaskedOperand<double>::update_factor(int, std::span<const double* const>, index_t,
                                                   double, double*);

}  // namespace tenfold::detail
