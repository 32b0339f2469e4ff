#include <algorithm>
#include <string>

#include "attention/heads.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

using tenfold::detail::Op;

// Curve of a matrix whose D x D Gram is g (overwritten): its eigenvalues descending.
EnergyCurve curve_of_gram(tenfold::detail::Compute<double>& c, index_t n, std::vector<double>& g) {
  EnergyCurve out;
  out.energy.resize(static_cast<std::size_t>(n));
  c.syevd(n, g.data(), n, out.energy.data());
  std::reverse(out.energy.begin(), out.energy.end());
  double total = 0.0;
  for (double& e : out.energy) {
    e = std::max(e, 0.0);  // round-off can leave tiny negative eigenvalues
    total += e;
  }
  double run = 0.0;
  for (double e : out.energy) {
    run += e;
    out.cumulative.push_back(total > 0.0 ? run / total : 0.0);
  }
  out.dim90 = out.dimension_for(0.90);
  out.dim95 = out.dimension_for(0.95);
  out.dim99 = out.dimension_for(0.99);
  return out;
}

}  // namespace

index_t EnergyCurve::dimension_for(double fraction) const {
  if (!(fraction >= 0.0 && fraction <= 1.0)) {
    throw InvalidArgument("energy fraction must be in [0, 1], got " + std::to_string(fraction));
  }
  if (cumulative.empty() || cumulative.back() == 0.0) return 0;
  // Cumulative sums can end a few ulps below 1: the full dimension always suffices.
  const auto it = std::lower_bound(cumulative.begin(), cumulative.end(), fraction);
  if (it == cumulative.end()) return static_cast<index_t>(cumulative.size());
  return static_cast<index_t>(it - cumulative.begin()) + 1;
}

template <class T>
Redundancy redundancy(const QueryKeyLayer<T>& layer) {
  layer.validate();
  const auto host = detail::host_compute();
  tenfold::detail::Compute<double>& c = *host;
  const index_t h = layer.heads, d = layer.head_dim, rows = layer.input_dim(), s = layer.key_dim();
  const Matrix<double> wq = detail::to_double(layer.query_weight);
  const Matrix<double> wk = detail::to_double(layer.key_weight);
  const auto dd = static_cast<std::size_t>(rows * rows);
  Redundancy out;
  std::vector<double> g(dd);
  // P P^T = sum_h W_Q^h (W_K^h^T W_K^h) W_Q^h^T = Z W_Q^T with Z_h = W_Q^h (W_K^h^T W_K^h)
  const std::vector<double> gk = detail::head_grams(c, wk, wk, h, d);
  Matrix<double> z(rows, s);
  c.gemm_strided_batched(Op::none, Op::none, rows, d, d, 1.0, wq.data(), rows, rows * d, gk.data(),
                         d, d * d, 0.0, z.data(), rows, rows * d, h);
  c.gemm(Op::none, Op::trans, rows, rows, s, 1.0, z.data(), rows, wq.data(), rows, 0.0, g.data(),
         rows);
  out.products = curve_of_gram(c, rows, g);
  // W W^T for the concatenated weights
  c.syrk(Op::none, rows, s, 1.0, wq.data(), rows, 0.0, g.data(), rows);
  out.queries = curve_of_gram(c, rows, g);
  c.syrk(Op::none, rows, s, 1.0, wk.data(), rows, 0.0, g.data(), rows);
  out.keys = curve_of_gram(c, rows, g);
  return out;
}

template Redundancy redundancy<float>(const QueryKeyLayer<float>&);
template Redundancy redundancy<double>(const QueryKeyLayer<double>&);

}  // namespace tenfold::attention
