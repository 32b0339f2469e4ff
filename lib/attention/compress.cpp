#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "attention/heads.hpp"
#include "attention/moments.hpp"
#include "core/format.hpp"
#include "core/memory.hpp"
#include "core/random.hpp"
#include "cp/cp_als.hpp"
#include "cp/start_check.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace detail {
namespace {

using tenfold::detail::Op;
using tenfold::detail::Rng;

// Sweeps each structured start runs before the better one is kept.
constexpr int kTrialIterations = 10;

// A layer's query/key weights in double (copies only for a float layer), with its
// sizes. Made where needed and dropped after, so that no copy lives during the ALS.
class Weights {
 public:
  template <class T>
  explicit Weights(const QueryKeyLayer<T>& layer)
      : heads(layer.heads), d(layer.head_dim), q_(layer.query_weight), k_(layer.key_weight) {}
  const Matrix<double>& q() const { return q_.get(); }
  const Matrix<double>& k() const { return k_.get(); }

  const index_t heads, d;

 private:
  AsDouble q_, k_;
};

// Starting factors for Init::heads: the singular triplets (s, u, v) of every
// head's P_h / sqrt(d), the R largest over all heads, mixing s at the head's row.
// A first pass finds every s from d x d products; a second forms u and v only for
// the heads that contribute, one head at a time.
template <class T>
std::vector<Matrix<T>> structured_start(const Weights& w, index_t rank, std::uint64_t seed) {
  const auto host = host_compute();
  tenfold::detail::Compute<double>& c = *host;
  const index_t rows = w.q().rows(), d = w.d, s = w.heads * d, dd = d * d;
  const std::vector<double> gq = head_grams(c, w.q(), w.q(), w.heads, d);
  const std::vector<double> gk = head_grams(c, w.k(), w.k(), w.heads, d);
  // Per head: L_k and the eigenvectors W of Z^T Z (d x d each), kept for the second pass.
  std::vector<double> lks(static_cast<std::size_t>(w.heads * dd)), ws(lks.size());
  std::vector<double> sigma(static_cast<std::size_t>(s)), tmp(static_cast<std::size_t>(dd));
  std::vector<double> lam(static_cast<std::size_t>(d));
  for (index_t h = 0; h < w.heads; ++h) {
    double* lk = lks.data() + h * dd;
    double* wz = ws.data() + h * dd;
    // K_h^T K_h = V diag(lam) V^T, L_k = V diag(sqrt(lam)): P_h P_h^T = (Q_h L_k)(Q_h L_k)^T
    std::copy_n(gk.data() + h * dd, dd, lk);
    c.syevd(d, lk, d, lam.data());
    for (index_t j = 0; j < d; ++j) {
      const double root = std::sqrt(std::max(lam[static_cast<std::size_t>(j)], 0.0));
      for (index_t i = 0; i < d; ++i) lk[i + j * d] *= root;
    }
    // Z = Q_h L_k; Z^T Z = L_k^T (Q_h^T Q_h) L_k = W diag(s^2) W^T
    c.gemm(Op::none, Op::none, d, d, d, 1.0, gq.data() + h * dd, d, lk, d, 0.0, tmp.data(), d);
    c.gemm(Op::trans, Op::none, d, d, d, 1.0, lk, d, tmp.data(), d, 0.0, wz, d);
    c.syevd(d, wz, d, lam.data());
    const double floor =
        lam.back() * static_cast<double>(d) * std::numeric_limits<double>::epsilon();
    for (index_t j = 0; j < d; ++j) {
      // Directions whose s^2 is at round-off level carry no energy: s = 0 leaves them out.
      const double sj2 = lam[static_cast<std::size_t>(j)];
      sigma[static_cast<std::size_t>(h * d + j)] = sj2 > floor && sj2 > 0.0 ? std::sqrt(sj2) : 0.0;
    }
  }
  // Keep the R largest s over all heads (ties in head order); directions without
  // energy, needed only when the tensor's rank is below R, get random columns.
  std::vector<index_t> order(static_cast<std::size_t>(s));
  std::iota(order.begin(), order.end(), index_t{0});
  std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) {
    return sigma[static_cast<std::size_t>(a)] > sigma[static_cast<std::size_t>(b)];
  });
  std::vector<index_t> slot(static_cast<std::size_t>(s), -1);  // component of a kept triplet
  Rng rng(seed);
  Matrix<T> m0(w.heads, rank), a(rows, rank), b(rows, rank);
  for (index_t r = 0; r < rank; ++r) {
    const index_t j = order[static_cast<std::size_t>(r)];
    const double sj = sigma[static_cast<std::size_t>(j)];
    m0(j / d, r) = static_cast<T>(sj / std::sqrt(static_cast<double>(d)));
    if (sj > 0.0) {
      slot[static_cast<std::size_t>(j)] = r;
      continue;
    }
    for (index_t i = 0; i < rows; ++i) {
      a(i, r) = static_cast<T>(rng.uniform());
      b(i, r) = static_cast<T>(rng.uniform());
    }
  }
  Matrix<double> z(rows, d), u(rows, d), v(rows, d);
  for (index_t h = 0; h < w.heads; ++h) {
    const auto first = slot.begin() + h * d;
    if (std::all_of(first, first + d, [](index_t r) { return r < 0; })) continue;
    const double* qh = w.q().col(h * d);
    const double* kh = w.k().col(h * d);
    // U = Z W diag(1/s) (left singular vectors), V = P_h^T U diag(1/s) = K_h Q_h^T Z W diag(1/s^2)
    c.gemm(Op::none, Op::none, rows, d, d, 1.0, qh, rows, lks.data() + h * dd, d, 0.0, z.data(),
           rows);
    c.gemm(Op::none, Op::none, rows, d, d, 1.0, z.data(), rows, ws.data() + h * dd, d, 0.0,
           u.data(), rows);
    c.gemm(Op::trans, Op::none, d, d, rows, 1.0, qh, rows, u.data(), rows, 0.0, tmp.data(), d);
    c.gemm(Op::none, Op::none, rows, d, d, 1.0, kh, rows, tmp.data(), d, 0.0, v.data(), rows);
    for (index_t j = 0; j < d; ++j) {
      const index_t r = first[j];
      if (r < 0) continue;
      const double inv = 1.0 / sigma[static_cast<std::size_t>(h * d + j)];
      for (index_t i = 0; i < rows; ++i) {
        a(i, r) = static_cast<T>(u(i, j) * inv);
        b(i, r) = static_cast<T>(v(i, j) * inv * inv);
      }
    }
  }
  // Heads with equal weights give equal triplets, which the ALS could never separate
  // (a start it refuses): such components get random columns too.
  std::vector<Matrix<T>> start{std::move(m0), std::move(a), std::move(b)};
  for (index_t r : tenfold::detail::stuck_components<T>(start, rank, {1, 2})) {
    for (index_t i = 0; i < rows; ++i) {
      start[1](i, r) = static_cast<T>(rng.uniform());
      start[2](i, r) = static_cast<T>(rng.uniform());
    }
  }
  return start;
}

// The model's factors with lambda folded into the first (a start for CpInit::given).
template <class T>
std::vector<Matrix<T>> folded(KTensor<T>&& model) {
  Matrix<T>& f = model.factors[0];
  for (index_t j = 0; j < f.cols(); ++j)
    for (index_t i = 0; i < f.rows(); ++i) f(i, j) *= model.weights[static_cast<std::size_t>(j)];
  return std::move(model.factors);
}

// ||T - T~|| / ||T|| with T~[h] = A diag(m_h) B^T (context scale folded into M).
double relative_error(const Weights& w, const Matrix<double>& m, const Matrix<double>& a,
                      const Matrix<double>& b) {
  const auto host = host_compute();
  tenfold::detail::Compute<double>& c = *host;
  const index_t rows = w.q().rows(), d = w.d, r = m.cols();
  const double nt2 = qk_norm_squared(c, w.q(), w.k(), w.heads, d);
  if (!(nt2 > 0.0)) {
    throw InvalidArgument("the layer's QK tensor is zero (W_Q^h W_K^h^T vanishes for every head)");
  }
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
  // ||T~||^2 = sum_{r,t} (M^T M)(r,t) (A^T A)(r,t) (B^T B)(r,t)
  const auto rr = static_cast<std::size_t>(r * r);
  std::vector<double> mm(rr), aa(rr), bb(rr);
  c.syrk(Op::trans, r, w.heads, 1.0, m.data(), w.heads, 0.0, mm.data(), r);
  c.syrk(Op::trans, r, rows, 1.0, a.data(), rows, 0.0, aa.data(), r);
  c.syrk(Op::trans, r, rows, 1.0, b.data(), rows, 0.0, bb.data(), r);
  c.hadamard(rr, mm.data(), aa.data());
  const double nm2 = c.dot(rr, aa.data(), bb.data());
  // <T, T~> = sum_h sum_r m_hr sum_{j in head h} (A^T W_Q)(r,j) (B^T W_K)(r,j) / sqrt(d),
  // one head's r x d block at a time.
  Matrix<double> ca(r, d), cb(r, d);
  double inner = 0.0;
  for (index_t h = 0; h < w.heads; ++h) {
    c.gemm(Op::trans, Op::none, r, d, rows, 1.0, a.data(), rows, w.q().col(h * d), rows, 0.0,
           ca.data(), r);
    c.gemm(Op::trans, Op::none, r, d, rows, 1.0, b.data(), rows, w.k().col(h * d), rows, 0.0,
           cb.data(), r);
    for (index_t j = 0; j < d; ++j)
      for (index_t t = 0; t < r; ++t) inner += m(h, t) * ca(t, j) * cb(t, j);
  }
  inner *= inv_sqrt_d;
  const double resid2 = nt2 + nm2 - 2.0 * inner;
  if (resid2 > 1e-6 * nt2) return std::sqrt(resid2 / nt2);
  // The difference above cancels for near-exact models (relative error below 1e-3):
  // sum the squares of each head's residual [Q_h / sqrt(d), -A diag(m_h)] [K_h, B]^T.
  Matrix<double> x(rows, d + r), y(rows, d + r), e(rows, rows);
  std::copy_n(b.data(), b.size(), y.col(d));
  double sum = 0.0;
  for (index_t h = 0; h < w.heads; ++h) {
    for (index_t i = 0; i < rows * d; ++i) x.data()[i] = w.q().col(h * d)[i] * inv_sqrt_d;
    for (index_t t = 0; t < r; ++t)
      for (index_t i = 0; i < rows; ++i) x(i, d + t) = -a(i, t) * m(h, t);
    std::copy_n(w.k().col(h * d), rows * d, y.data());
    c.gemm(Op::none, Op::trans, rows, rows, d + r, 1.0, x.data(), rows, y.data(), rows, 0.0,
           e.data(), rows);
    sum += c.sum_squares(static_cast<std::size_t>(e.size()), e.data());
  }
  return std::sqrt(sum / nt2);
}

}  // namespace
}  // namespace detail

namespace {

// Validates both layers and that they belong together.
template <class T>
void check_pair(const QueryKeyLayer<T>& layer, const CollaborativeLayer<T>& collab) {
  layer.validate();
  collab.validate();
  if (collab.heads() != layer.heads || collab.input_dim() != layer.input_dim()) {
    throw DimensionMismatch("collaborative layer has " + std::to_string(collab.heads()) +
                            " heads and input width " + std::to_string(collab.input_dim()) +
                            ", the layer " + std::to_string(layer.heads) + " and " +
                            std::to_string(layer.input_dim()));
  }
}

// The mixing in double with the context scale folded in.
template <class T>
Matrix<double> scaled_mixing(const CollaborativeLayer<T>& collab) {
  Matrix<double> m = detail::to_double(collab.mixing);
  for (index_t i = 0; i < m.size(); ++i) m.data()[i] *= collab.context_scale;
  return m;
}

}  // namespace

template <class T>
double qk_error(const QueryKeyLayer<T>& layer, const CollaborativeLayer<T>& collab) {
  check_pair(layer, collab);
  return detail::relative_error(detail::Weights(layer), scaled_mixing(collab),
                                detail::AsDouble(collab.query).get(),
                                detail::AsDouble(collab.key).get());
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CP-ALS of rank R < H d on the layer's QK tensor from the chosen start.
template <class T>
void fit_rank(const QueryKeyLayer<T>& layer, const CompressOptions& options, CompressResult<T>& res,
              Clock::time_point call_start) {
  const index_t r = options.rank;
  const KTensor<T> x = qk_tensor(layer);
  CpOptions cp;
  cp.rank = r;
  cp.tol = options.tol;
  cp.seed = options.seed;
  cp.backend = options.backend;
  // Progress: the sweeps of earlier runs, the start of the running one, whether the
  // callback stopped one.
  int sweeps = 0;
  Init running = Init::heads;
  bool stopped = false;
  if (options.callback) {
    cp.callback = [&](const CpProgress& p) {
      return options.callback(CompressProgress{-1, false, running, sweeps + p.iteration,
                                               1.0 - p.fit, seconds_since(call_start)});
    };
  }
  // The start is made (and its double weights dropped) before the iteration runs.
  const auto heads_start = [&] {
    return detail::structured_start<T>(detail::Weights(layer), r, options.seed);
  };
  auto run = [&](Init from, CpInit init, const std::vector<Matrix<T>>& start, int iters) {
    running = from;
    cp.init = init;
    cp.max_iters = iters;
    CpResult<T> out = cp_als(x, cp, start);
    sweeps += out.iterations;
    stopped = stopped || out.stop == CpStop::callback;
    return out;
  };
  CpResult<T> fit;
  switch (options.init) {
    case Init::structured: {
      // Both structured starts for a few sweeps (nvecs only when heads has not already
      // converged); the better one goes on from where it is.
      const int trial = std::min(options.max_iters, detail::kTrialIterations);
      Init kept = Init::heads;
      fit = run(Init::heads, CpInit::given, heads_start(), trial);
      if (!fit.converged && !stopped) {
        CpResult<T> nvecs = run(Init::nvecs, CpInit::nvecs, {}, trial);
        if (nvecs.fit > fit.fit) {
          fit = std::move(nvecs);
          kept = Init::nvecs;
        }
      }
      if (!stopped && fit.stop == CpStop::max_iters && options.max_iters > trial) {
        const int done = fit.iterations;
        fit = run(kept, CpInit::given, detail::folded(std::move(fit.model)),
                  options.max_iters - trial);
        fit.iterations += done;
      }
      break;
    }
    case Init::heads:
      fit = run(Init::heads, CpInit::given, heads_start(), options.max_iters);
      break;
    case Init::nvecs:
      fit = run(Init::nvecs, CpInit::nvecs, {}, options.max_iters);
      break;
    case Init::random:
      fit = run(Init::random, CpInit::random, {}, options.max_iters);
      break;
  }

  // T~ = [[lambda; M_0, A, B]]: mixing = M_0 diag(lambda), W~_Q = A, W~_K = B.
  CollaborativeLayer<T>& out = res.layer;
  std::vector<Matrix<T>> f = detail::folded(std::move(fit.model));
  out.mixing = std::move(f[0]);
  out.query = std::move(f[1]);
  out.key = std::move(f[2]);
  res.iterations = fit.iterations;
  res.converged = fit.converged;
  res.stopped = stopped;
}

// The lower Cholesky factors of both damped moments (the key side's is the query
// side's for self-attention).
struct Whitening {
  Matrix<double> query, key;
  const Matrix<double>& key_side() const { return key.size() > 0 ? key : query; }
};

template <class T>
CompressResult<T> compress_impl(const QueryKeyLayer<T>& layer, const CompressOptions& options,
                                const Whitening* whitening, Clock::time_point start) {
  layer.validate();
  const index_t s = layer.key_dim(), r = options.rank;
  if (r < 1 || r > s) {
    throw InvalidOption(
        "rank", "must be in [1, H d] = [1, " + std::to_string(s) + "], got " + std::to_string(r));
  }
  if (options.max_iters < 1) {
    throw InvalidOption("max_iters",
                        "must be at least 1, got " + std::to_string(options.max_iters));
  }
  // Below H d the ALS runs on the H x D x D tensor, whose rank is at most
  // min(H D, D^2) (max_cp_rank); only the exact form may have more components.
  const index_t rows = layer.input_dim(), dims[3] = {layer.heads, rows, rows};
  if (const index_t bound = max_cp_rank(dims); r < s && r > bound) {
    throw InvalidOption(
        "rank", std::to_string(r) + " exceeds " + std::to_string(bound) +
                    ", the largest CP rank of the H x D x D = " + std::to_string(layer.heads) +
                    " x " + std::to_string(rows) + " x " + std::to_string(rows) +
                    " QK tensor; use at most " + std::to_string(bound) +
                    ", or H d = " + std::to_string(s) + " for the exact form");
  }
  {
    const auto host = detail::host_compute();
    tenfold::detail::Compute<double>& c = *host;
    // Host memory besides the ALS (which checks its own): the CP form of T and the
    // weights in double, the structured start's per-head d x d blocks and D x d
    // products, the start and the result (H + 2 D) x R each, and the error's R x R
    // Grams and D x (d + R), D x D residual blocks.
    const double h = static_cast<double>(layer.heads), d = static_cast<double>(layer.head_dim),
                 dd = static_cast<double>(rows), ss = static_cast<double>(s),
                 rr = static_cast<double>(r);
    tenfold::detail::require_memory(c,
                                    (h + 4.0 * dd) * ss + 4.0 * h * d * d + 3.0 * dd * d +
                                        2.0 * (h + 2.0 * dd) * rr + 3.0 * rr * rr +
                                        2.0 * dd * (d + rr) + dd * dd,
                                    "compressing a layer at rank " + std::to_string(r));
    const detail::Weights w(layer);
    if (!(detail::qk_norm_squared(c, w.q(), w.k(), w.heads, w.d) > 0.0)) {
      throw InvalidArgument("the layer's QK tensor is zero: nothing to compress");
    }
  }
  CompressResult<T> res;
  CollaborativeLayer<T>& out = res.layer;
  if (r == s) {
    // Full rank: the exact form, no iteration (exact in every objective).
    out = exact(layer);
    res.converged = true;
  } else if (whitening) {
    // CP of the whitened operand (L_Q^T W_Q^h, L_K^T W_K^h), then W~ = L^{-T} A.
    fit_rank(detail::whitened(layer, whitening->query, whitening->key_side()), options, res, start);
    detail::unwhiten(out, whitening->query, whitening->key_side());
    out.content = detail::content_vectors(layer);
  } else {
    fit_rank(layer, options, res, start);
    out.content = detail::content_vectors(layer);
  }
  res.relative_error =
      detail::relative_error(detail::Weights(layer), detail::to_double(out.mixing),
                             detail::AsDouble(out.query).get(), detail::AsDouble(out.key).get());
  const index_t biases = (layer.query_bias.empty() ? 0 : 1) + (layer.key_bias.empty() ? 0 : 1);
  res.params_before = 2 * rows * s + biases * s;
  res.params_after = layer.heads * r + 2 * rows * r + out.content.size();
  return res;
}

void validate_moments(const InputMoments& moments, index_t input_dim) {
  // The moments may come from float computations: judged at float round-off.
  const double eps = std::numeric_limits<float>::epsilon();
  validate_moment(moments.query, input_dim, "the query-side input moment", eps);
  if (moments.key.size() > 0) {
    validate_moment(moments.key, input_dim, "the key-side input moment", eps);
  }
}

}  // namespace

template <class T>
CompressResult<T> compress(const QueryKeyLayer<T>& layer, const CompressOptions& options) {
  const auto start = Clock::now();
  CompressResult<T> res = compress_impl(layer, options, nullptr, start);
  res.seconds = seconds_since(start);
  return res;
}

template <class T>
CompressResult<T> compress(const QueryKeyLayer<T>& layer, const CompressOptions& options,
                           const InputMoments& moments) {
  const auto start = Clock::now();
  layer.validate();
  validate_moments(moments, layer.input_dim());
  if (!(options.damping >= 0.0 && std::isfinite(options.damping))) {
    throw InvalidOption("damping", "must be finite and >= 0, got " +
                                       tenfold::detail::number_string(options.damping));
  }
  const bool self = moments.key.size() == 0;
  CompressResult<T> res;
  if (detail::is_scaled_identity(moments.query) &&
      (self || detail::is_scaled_identity(moments.key))) {
    // sum_h ||c_Q^(1/2) (T_h - T~_h) c_K^(1/2)||^2 = c_Q c_K ||T - T~||^2: the weight-space
    // objective, so the weight-only computation runs as it stands.
    res = compress_impl(layer, options, nullptr, start);
  } else {
    Whitening w;
    w.query =
        detail::damped_cholesky(moments.query, options.damping, "the query-side input moment");
    if (!self) {
      w.key = detail::damped_cholesky(moments.key, options.damping, "the key-side input moment");
    }
    res = compress_impl(layer, options, &w, start);
  }
  res.data_error = qk_data_error(layer, res.layer, moments);
  res.seconds = seconds_since(start);
  return res;
}

template <class T>
double qk_data_error(const QueryKeyLayer<T>& layer, const CollaborativeLayer<T>& collab,
                     const InputMoments& moments) {
  check_pair(layer, collab);
  validate_moments(moments, layer.input_dim());
  // sum_h E[(x^T E_h y)^2] = sum_h ||F_Q^T E_h F_K||^2 for S = F F^T on either side: the
  // weight-space error of the operand and model with both D-modes multiplied by F^T.
  const Matrix<double> fq = detail::psd_factor(moments.query);
  const Matrix<double> fk = moments.key.size() > 0 ? detail::psd_factor(moments.key) : fq;
  const detail::Weights w(layer);
  QueryKeyLayer<double> mapped;
  mapped.heads = layer.heads;
  mapped.head_dim = layer.head_dim;
  mapped.query_weight = detail::transform(fq, w.q());
  mapped.key_weight = detail::transform(fk, w.k());
  const auto host = detail::host_compute();
  tenfold::detail::Compute<double>& c = *host;
  if (!(detail::qk_norm_squared(c, mapped.query_weight, mapped.key_weight, w.heads, w.d) > 0.0)) {
    throw InvalidArgument(
        "the layer's logits x^T T_h y vanish for every input the moments describe");
  }
  return detail::relative_error(detail::Weights(mapped), scaled_mixing(collab),
                                detail::transform(fq, detail::AsDouble(collab.query).get()),
                                detail::transform(fk, detail::AsDouble(collab.key).get()));
}

template double qk_error<float>(const QueryKeyLayer<float>&, const CollaborativeLayer<float>&);
template double qk_error<double>(const QueryKeyLayer<double>&, const CollaborativeLayer<double>&);
template CompressResult<float> compress<float>(const QueryKeyLayer<float>&, const CompressOptions&);
template CompressResult<double> compress<double>(const QueryKeyLayer<double>&,
                                                 const CompressOptions&);
template CompressResult<float> compress<float>(const QueryKeyLayer<float>&, const CompressOptions&,
                                               const InputMoments&);
template CompressResult<double> compress<double>(const QueryKeyLayer<double>&,
                                                 const CompressOptions&, const InputMoments&);
template double qk_data_error<float>(const QueryKeyLayer<float>&, const CollaborativeLayer<float>&,
                                     const InputMoments&);
template double qk_data_error<double>(const QueryKeyLayer<double>&,
                                      const CollaborativeLayer<double>&, const InputMoments&);

}  // namespace tenfold::attention
