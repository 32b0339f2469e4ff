// Compares the starts of attention::compress at equal sweep budgets on three kinds
// of synthetic layers and prints the Markdown tables of docs/attention.md.
// Usage: attention_init_study [D (default 384)]; H = 12, d = D / 12, R = D / 2.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "random_matrix.hpp"
#include "tenfold/attention.hpp"

namespace {

using tenfold::index_t;
using tenfold::Matrix;
namespace at = tenfold::attention;
using tenfold::test::gaussian;
using tenfold::test::orthonormal;

std::mt19937_64 gen(1);

// C = A B (or A B^T), by loops: the sizes here are small.
Matrix<double> multiply(const Matrix<double>& a, const Matrix<double>& b, bool transpose_b) {
  const index_t n = transpose_b ? b.rows() : b.cols();
  Matrix<double> c(a.rows(), n);
  for (index_t j = 0; j < n; ++j)
    for (index_t k = 0; k < a.cols(); ++k) {
      const double bkj = transpose_b ? b(j, k) : b(k, j);
      for (index_t i = 0; i < a.rows(); ++i) c(i, j) += a(i, k) * bkj;
    }
  return c;
}

at::QueryKeyLayer<double> empty_layer(index_t heads, index_t d) {
  at::QueryKeyLayer<double> l;
  l.heads = heads;
  l.head_dim = d;
  return l;
}

// Entries N(0, 1/D).
at::QueryKeyLayer<double> random_layer(index_t heads, index_t input, index_t d) {
  at::QueryKeyLayer<double> l = empty_layer(heads, d);
  l.query_weight =
      gaussian<double>(input, heads * d, 1.0 / std::sqrt(static_cast<double>(input)), gen);
  l.key_weight =
      gaussian<double>(input, heads * d, 1.0 / std::sqrt(static_cast<double>(input)), gen);
  return l;
}

// Heads share a pool of `pool` direction pairs (a_r, b_r): head h uses d of them with
// its own weights, P_h = A_S diag(c) B_S^T, hidden behind a random rotation G_h
// (W_Q^h = A_S diag(c) G_h, W_K^h = B_S G_h), plus relative noise.
at::QueryKeyLayer<double> pool_layer(index_t heads, index_t input, index_t d, index_t pool,
                                     double noise) {
  const double sd = 1.0 / std::sqrt(static_cast<double>(input));
  const Matrix<double> a = gaussian<double>(input, pool, sd, gen),
                       b = gaussian<double>(input, pool, sd, gen);
  at::QueryKeyLayer<double> l = empty_layer(heads, d);
  l.query_weight = gaussian<double>(input, heads * d, noise * sd, gen);
  l.key_weight = gaussian<double>(input, heads * d, noise * sd, gen);
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<index_t> idx(static_cast<std::size_t>(pool));
  for (index_t h = 0; h < heads; ++h) {
    for (index_t i = 0; i < pool; ++i) idx[static_cast<std::size_t>(i)] = i;
    std::shuffle(idx.begin(), idx.end(), gen);
    Matrix<double> qa(input, d), kb(input, d);
    for (index_t j = 0; j < d; ++j) {
      const double c = 0.5 + std::abs(n(gen));
      const index_t r = idx[static_cast<std::size_t>(j)];
      for (index_t i = 0; i < input; ++i) {
        qa(i, j) = c * a(i, r);
        kb(i, j) = b(i, r);
      }
    }
    const Matrix<double> g = orthonormal(d, d, gen);
    const Matrix<double> q = multiply(qa, g, false), k = multiply(kb, g, false);
    for (index_t j = 0; j < d; ++j)
      for (index_t i = 0; i < input; ++i) {
        l.query_weight(i, h * d + j) += q(i, j);
        l.key_weight(i, h * d + j) += k(i, j);
      }
  }
  return l;
}

// Concatenated W_Q and W_K with spectra exp(-4 j / D_k) in random bases.
at::QueryKeyLayer<double> spectral_layer(index_t heads, index_t input, index_t d) {
  const index_t s = heads * d;
  auto weight = [&] {
    Matrix<double> u = orthonormal(input, s, gen);
    const Matrix<double> v = orthonormal(s, s, gen);
    for (index_t j = 0; j < s; ++j)
      for (index_t i = 0; i < input; ++i) u(i, j) *= std::exp(-4.0 * j / s);
    return multiply(u, v, true);
  };
  at::QueryKeyLayer<double> l = empty_layer(heads, d);
  l.query_weight = weight();
  l.key_weight = weight();
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  const index_t input = argc > 1 ? std::atoi(argv[1]) : 384;
  const index_t heads = 12, d = input / heads, rank = heads * d / 2;
  if (d < 1) {
    std::fprintf(stderr, "D must be at least 12\n");
    return 1;
  }
  const std::pair<const char*, at::QueryKeyLayer<double>> layers[] = {
      {"random", random_layer(heads, input, d)},
      {"pool", pool_layer(heads, input, d, rank, 0.1)},
      {"spectral", spectral_layer(heads, input, d)}};
  const int budgets[] = {1, 5, 10, 25, 50, 100};
  std::printf("D = %ld, d = %ld, R = %ld: relative QK error after a number of sweeps (tol 0)\n\n",
              static_cast<long>(input), static_cast<long>(d), static_cast<long>(rank));
  std::printf(
      "| start | 1 | 5 | 10 | 25 | 50 | 100 sweeps |\n| --- | --- | --- | --- | --- | --- | --- "
      "|\n");
  for (const auto& [name, layer] : layers) {
    const at::Redundancy red = at::redundancy(layer);
    std::printf("| *%s* layer (P needs %ld/%ld/%ld dims for 90/95/99 %%) | | | | | | |\n", name,
                static_cast<long>(red.products.dim90), static_cast<long>(red.products.dim95),
                static_cast<long>(red.products.dim99));
    for (at::Init init :
         {at::Init::random, at::Init::nvecs, at::Init::heads, at::Init::structured}) {
      std::printf("| `%s` |", std::string(at::to_string(init)).c_str());
      for (int budget : budgets) {
        at::CompressOptions o;
        o.rank = rank;
        o.max_iters = budget;
        o.tol = 0.0;
        o.init = init;
        std::printf(" %.4f |", at::compress(layer, o).relative_error);
      }
      std::printf("\n");
    }
  }
}
