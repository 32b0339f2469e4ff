// Shared rotary keys (docs/rope.md): the layer and options checked, the problem set up
// in double (bias row, whitening), one of the two forms solved (rotary_solver.hpp), and
// the pieces both forms share: the rank choice and the SVD.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "attention/heads.hpp"
#include "attention/moments.hpp"
#include "attention/rotary_solver.hpp"
#include "core/format.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

using tenfold::detail::Compute;
using tenfold::detail::Op;

std::string text(index_t v) { return std::to_string(v); }

/// Throws unless the options suit the layer (bands, frequencies, budget or ranks).
void check_options(const RotaryOptions& o, index_t key_heads, index_t d) {
  const index_t half = d / 2, b = o.bands;
  if (b < 1 || half % b) {
    throw InvalidOption("bands", "must be a positive divisor of the " + text(half) +
                                     " frequency pairs of a head, got " + text(b));
  }
  detail::check_offsets(o.inv_freq, o.context, half, b > 1);
  if (!(o.damping >= 0.0) || !std::isfinite(o.damping)) {
    throw InvalidOption(
        "damping", "must be finite and >= 0, got " + tenfold::detail::number_string(o.damping));
  }
  if (o.key_values < 0 || o.key_values > key_heads * d) {
    throw InvalidArgument("key_values " + text(o.key_values) +
                          " is outside [1, G d = " + text(key_heads * d) + "] (0: full)");
  }
  if (b == 1 && o.key_values % 2) {
    throw InvalidArgument("key_values " + text(o.key_values) +
                          " is odd; with bands = 1 every shared complex key caches two values");
  }
  if (!o.ranks.empty() && static_cast<index_t>(o.ranks.size()) != half / b) {
    throw DimensionMismatch("ranks has " + text(static_cast<index_t>(o.ranks.size())) +
                            " entries, expected one per band: " + text(half / b));
  }
}

}  // namespace

namespace detail {

std::vector<index_t> choose_ranks(const Matrix<double>& sigma, bool full,
                                  const std::vector<index_t>& given, index_t budget,
                                  const char* unit) {
  const index_t bands = sigma.rows(), width = sigma.cols();
  std::vector<index_t> ranks(static_cast<std::size_t>(bands), 0);
  const auto& all = sigma.values();
  const double top = all.empty() ? 0.0 : *std::max_element(all.begin(), all.end());
  if (full) {
    for (index_t band = 0; band < bands; ++band)
      for (index_t k = 0; k < width; ++k) ranks[band] += sigma(band, k) > kRankTol * top ? 1 : 0;
    return ranks;
  }
  if (!given.empty()) {
    for (index_t band = 0; band < bands; ++band) {
      if (given[band] < 0 || given[band] > width) {
        throw InvalidArgument("ranks[" + text(band) + "] = " + text(given[band]) +
                              " is outside [0, " + text(width) + "], the " + unit +
                              " a band can hold");
      }
    }
    return given;
  }
  if (budget > bands * width) {
    throw InvalidArgument("the budget of " + text(budget) + " " + unit + " exceeds the " +
                          text(bands * width) + " singular values of the layer" +
                          (bands > 1 ? "'s " + text(bands) + " bands" : std::string()));
  }
  // The budget's largest sigma over all bands (row-major flat index band * width + k).
  std::vector<index_t> order(static_cast<std::size_t>(bands * width));
  std::iota(order.begin(), order.end(), 0);
  const auto value = [&](index_t i) { return sigma(i / width, i % width); };
  std::stable_sort(order.begin(), order.end(),
                   [&](index_t a, index_t z) { return value(a) > value(z); });
  for (index_t i = 0; i < budget; ++i) ranks[order[i] / width] += 1;
  return ranks;
}

template <class S>
std::pair<Matrix<S>, std::vector<double>> left_singular(const Matrix<S>& x) {
  const auto c = tenfold::detail::make_compute<S>(Backend::cpu);
  const index_t rows = x.rows(), cols = x.cols(), n = std::min(rows, cols);
  const bool tall = cols <= rows;
  // The smaller Gram: X^H X = V S^2 V^H (then U = X V S^{-1}) or X X^H = U S^2 U^H
  // (syrk for real X; for complex X a product with the conjugate).
  Matrix<S> g(n, n);
  if constexpr (!tenfold::detail::is_complex_v<S>) {
    c->syrk(tall ? Op::trans : Op::none, n, tall ? rows : cols, 1.0, x.data(), rows, 0.0, g.data(),
            n);
  } else {
    Matrix<S> xc(rows, cols);
    for (std::size_t i = 0; i < x.values().size(); ++i) xc.values()[i] = std::conj(x.values()[i]);
    if (tall) {
      c->gemm(Op::trans, Op::none, n, n, rows, S(1), xc.data(), rows, x.data(), rows, S(0),
              g.data(), n);
    } else {
      c->gemm(Op::none, Op::trans, n, n, cols, S(1), x.data(), rows, xc.data(), rows, S(0),
              g.data(), n);
    }
  }
  std::vector<double> lambda(static_cast<std::size_t>(n));
  c->syevd(n, g.data(), n, lambda.data());
  std::vector<double> sigma(static_cast<std::size_t>(n));
  Matrix<S> u(rows, n);
  for (index_t k = 0; k < n; ++k) {
    const index_t src = n - 1 - k;  // ascending -> descending
    sigma[k] = std::sqrt(std::max(lambda[src], 0.0));
    if (!tall) {
      std::copy_n(&g(0, src), n, &u(0, k));
      continue;
    }
    c->gemm(Op::none, Op::none, rows, 1, cols, S(1), x.data(), rows, &g(0, src), n, S(0), &u(0, k),
            rows);
    // Normalise by the column's own norm (more accurate than sigma for small sigma).
    double norm = 0.0;
    for (index_t i = 0; i < rows; ++i) norm += tenfold::detail::abs2(u(i, k));
    norm = std::sqrt(norm);
    for (index_t i = 0; i < rows; ++i)
      u(i, k) = norm > 0.0 && sigma[k] > 0.0 ? u(i, k) / norm : S(0);
  }
  return {std::move(u), std::move(sigma)};
}

template std::pair<Matrix<double>, std::vector<double>> left_singular(const Matrix<double>&);
template std::pair<Matrix<std::complex<double>>, std::vector<double>> left_singular(
    const Matrix<std::complex<double>>&);

}  // namespace detail

std::int64_t rotary_decode_flops(index_t heads, index_t key_heads, index_t head_dim,
                                 index_t key_values, index_t bands) {
  if (bands == 1) return 2 * static_cast<std::int64_t>(heads) * key_values;
  return 4 * static_cast<std::int64_t>(key_heads) * bands * key_values +
         3 * static_cast<std::int64_t>(key_heads) * head_dim +
         2 * static_cast<std::int64_t>(heads) * head_dim;
}

template <class T>
void RotaryLayer<T>::validate() const {
  if (key_heads < 1 || heads < 1 || heads % key_heads) {
    throw InvalidArgument("heads (" + text(heads) + ") must be a positive multiple of key_heads (" +
                          text(key_heads) + ")");
  }
  if (head_dim < 2 || head_dim % 2) {
    throw InvalidArgument("head_dim must be even and at least 2 (frequency pairs), got " +
                          text(head_dim));
  }
  const index_t dim = query_weight.rows();
  if (dim < 1 || query_weight.cols() != heads * head_dim) {
    throw DimensionMismatch("query_weight is " + text(dim) + "x" + text(query_weight.cols()) +
                            ", expected D x H d with H d = " + text(heads * head_dim));
  }
  if (key_weight.rows() != dim || key_weight.cols() != key_heads * head_dim) {
    throw DimensionMismatch("key_weight is " + text(key_weight.rows()) + "x" +
                            text(key_weight.cols()) + ", expected D x G d = " + text(dim) + "x" +
                            text(key_heads * head_dim));
  }
  for (const auto& [bias, n, what] : {std::tuple{&query_bias, heads * head_dim, "query_bias"},
                                      std::tuple{&key_bias, key_heads * head_dim, "key_bias"}}) {
    if (!bias->empty() && static_cast<index_t>(bias->size()) != n) {
      throw DimensionMismatch(std::string(what) + " has " +
                              text(static_cast<index_t>(bias->size())) + " entries, expected " +
                              text(n));
    }
    if (!bias->empty()) check_finite(TensorView<const T>(bias->data(), {n}), what);
  }
  check_finite(TensorView<const T>(query_weight.data(), {dim, query_weight.cols()}),
               "query_weight");
  check_finite(TensorView<const T>(key_weight.data(), {dim, key_weight.cols()}), "key_weight");
}

template <class T>
RotaryKeys rotary_keys(const RotaryLayer<T>& layer, const RotaryOptions& o,
                       const InputMoments* moments) {
  const auto start = std::chrono::steady_clock::now();
  layer.validate();
  check_options(o, layer.key_heads, layer.head_dim);
  detail::RotaryProblem p;
  p.heads = layer.heads;
  p.key_heads = layer.key_heads;
  p.head_dim = layer.head_dim;
  const bool augment = layer.biased();
  p.wq = detail::augmented(layer.query_weight, layer.query_bias, augment);
  p.wk = detail::augmented(layer.key_weight, layer.key_bias, augment);
  p.full = o.key_values == 0 && o.ranks.empty();
  if (moments) {
    p.query_moment = &moments->query;
    p.key_moment = moments->key.size() > 0 ? &moments->key : &moments->query;
    for (const Matrix<double>* m : {p.query_moment, p.key_moment}) {
      // to single-precision round-off: moments stored in float32 are accepted
      validate_moment(*m, p.dim(), m == p.query_moment ? "query moment" : "key moment",
                      std::numeric_limits<float>::epsilon());
    }
    // Whitening L L^T = S_K + damping tr(S_K) / D' I (none for "full", which needs
    // only the span of the keys).
    if (!p.full)
      p.chol = detail::damped_cholesky(*p.key_moment, o.damping, "the key-side input moment");
  }
  const auto host = detail::host_compute();
  RotaryKeys out =
      o.bands == 1 ? detail::frequency_keys(*host, p, o) : detail::band_keys(*host, p, o);
  const index_t cv = out.key_values(), in = layer.input_dim(), d = layer.head_dim;
  out.decode_flops = rotary_decode_flops(layer.heads, layer.key_heads, d, cv, o.bands);
  // q_proj and k_proj before; after: q_proj, the latent with its bias, and the mixing
  // (G C, bands = 1) or the rebuild entries that can be nonzero (2 G b C).
  const index_t side = o.bands == 1 ? layer.key_heads * cv : 2 * layer.key_heads * o.bands * cv;
  out.params_before = (layer.heads + layer.key_heads) * d * in +
                      static_cast<index_t>(layer.query_bias.size() + layer.key_bias.size());
  out.params_after =
      layer.heads * d * in + static_cast<index_t>(layer.query_bias.size()) + cv * p.dim() + side;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

template struct RotaryLayer<float>;
template struct RotaryLayer<double>;
template RotaryKeys rotary_keys<float>(const RotaryLayer<float>&, const RotaryOptions&,
                                       const InputMoments*);
template RotaryKeys rotary_keys<double>(const RotaryLayer<double>&, const RotaryOptions&,
                                        const InputMoments*);

}  // namespace tenfold::attention
