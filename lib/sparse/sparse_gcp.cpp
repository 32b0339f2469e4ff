// Stochastic GCP of a sparse tensor (include/tenfold/gcp.hpp, GcpSampling), after the
// Tensor Toolbox's gcp_opt (Kolda and Hong, "Stochastic gradients for large-scale
// tensor decomposition", SIMODS 2020). With Z the number of zeros:
//   sample S = p nonzeros (uniform, weight nnz / p) + q zeros (uniform coordinates not
//              stored in x, weight Z / q)
//   F~ = sum_{k in S} w_k f(x_k, m_k),   m_k = sum_r prod_n U_n(i_kn, r)
//   G~_n(i_kn, :) += w_k df/dm(x_k, m_k) prod_{j != n} U_j(i_kj, :)
// Adam on G~ (a fresh sample per iteration), projected onto U >= 0 for gamma and
// rayleigh; per epoch F~ on a fixed sample decides whether the epoch is kept.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/instantiate.hpp"
#include "core/memory.hpp"
#include "core/random.hpp"
#include "cp/cp_als.hpp"
#include "cp/gcp_objective.hpp"
#include "cp/gcp_setup.hpp"
#include "cp/stop.hpp"
#include "tenfold/error.hpp"
#include "tenfold/gcp.hpp"

namespace tenfold {
namespace {

// Sampled entries: coordinates row by row (S x N), values and weights.
struct Sample {
  std::vector<index_t> coords;
  std::vector<double> values, weights;
  std::size_t size() const { return values.size(); }
};

template <class T>
class Sampler {
 public:
  Sampler(const SparseTensor<T>& x, std::uint64_t seed) : x_(x), rng_(seed) {
    zeros_ = 1.0;
    for (index_t d : x.dims()) zeros_ *= static_cast<double>(d);
    zeros_ -= static_cast<double>(x.nnz());
  }
  double zeros() const { return zeros_; }

  // p nonzeros and q zeros, uniformly with replacement (stratified).
  void draw(index_t p, index_t q, Sample& s) {
    const int order = x_.order();
    s.coords.clear();
    s.values.clear();
    s.weights.clear();
    const double wp = p > 0 ? static_cast<double>(x_.nnz()) / static_cast<double>(p) : 0.0;
    for (index_t k = 0; k < p; ++k) {
      const index_t e = pick(x_.nnz());
      for (int n = 0; n < order; ++n)
        s.coords.push_back(x_.indices(n)[static_cast<std::size_t>(e)]);
      s.values.push_back(static_cast<double>(x_.values()[static_cast<std::size_t>(e)]));
      s.weights.push_back(wp);
    }
    const double wq = q > 0 ? zeros_ / static_cast<double>(q) : 0.0;
    std::vector<index_t> c(static_cast<std::size_t>(order));
    for (index_t k = 0; k < q; ++k) {
      do {  // rejection: a uniform coordinate that is not stored
        for (int n = 0; n < order; ++n) c[static_cast<std::size_t>(n)] = pick(x_.dim(n));
      } while (stored(c));
      s.coords.insert(s.coords.end(), c.begin(), c.end());
      s.values.push_back(0.0);
      s.weights.push_back(wq);
    }
  }

 private:
  index_t pick(index_t n) {
    return std::min(n - 1, static_cast<index_t>(rng_.uniform() * static_cast<double>(n)));
  }
  // Binary search of the canonical (lexicographic, mode 0 slowest) entries.
  bool stored(const std::vector<index_t>& c) const {
    index_t lo = 0, hi = x_.nnz();
    while (lo < hi) {
      const index_t mid = lo + (hi - lo) / 2;
      int cmp = 0;
      for (int n = 0; n < x_.order() && cmp == 0; ++n) {
        const index_t v = x_.indices(n)[static_cast<std::size_t>(mid)];
        const index_t w = c[static_cast<std::size_t>(n)];
        cmp = v < w ? -1 : (v > w ? 1 : 0);
      }
      if (cmp == 0) return true;
      if (cmp < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    return false;
  }

  const SparseTensor<T>& x_;
  detail::Rng rng_;
  double zeros_ = 0.0;
};

// The model's factors row-major (I_n x R each, rows of mode n at offset[n]).
struct RowFactors {
  std::vector<std::size_t> offset;
  index_t r = 0;
  const double* row(const std::vector<double>& u, int n, index_t i) const {
    return u.data() + offset[static_cast<std::size_t>(n)] + static_cast<std::size_t>(i * r);
  }
};

// F~ over the sample; with grad, also G~ (grad row-major as u).
double sampled(const RowFactors& f, const std::vector<double>& u, const Sample& s, GcpLoss loss,
               double huber_delta, std::vector<double>* grad) {
  const int order = static_cast<int>(f.offset.size());
  const auto r = static_cast<std::size_t>(f.r);
  if (grad != nullptr) grad->assign(u.size(), 0.0);
  std::vector<const double*> rows(static_cast<std::size_t>(order));
  std::vector<double> prod(r);
  double total = 0.0;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const index_t* c = s.coords.data() + k * static_cast<std::size_t>(order);
    for (int n = 0; n < order; ++n) rows[static_cast<std::size_t>(n)] = f.row(u, n, c[n]);
    double m = 0.0;
    for (std::size_t j = 0; j < r; ++j) {
      double p = 1.0;
      for (int n = 0; n < order; ++n) p *= rows[static_cast<std::size_t>(n)][j];
      m += p;
    }
    const detail::LossAt l = detail::loss_at(loss, s.values[k], m, huber_delta);
    total += s.weights[k] * l.f;
    if (grad == nullptr) continue;
    const double y = s.weights[k] * l.d;
    for (int n = 0; n < order; ++n) {
      std::fill(prod.begin(), prod.end(), y);
      for (int j = 0; j < order; ++j) {
        if (j == n) continue;
        for (std::size_t q = 0; q < r; ++q) prod[q] *= rows[static_cast<std::size_t>(j)][q];
      }
      double* g =
          grad->data() + f.offset[static_cast<std::size_t>(n)] + static_cast<std::size_t>(c[n]) * r;
      for (std::size_t q = 0; q < r; ++q) g[q] += prod[q];
    }
  }
  return total;
}

// The default count of a stratum: `want`, at most `cap` (and at least 0).
index_t stratum(index_t given, double want, double cap) {
  if (given > 0) return given;
  return static_cast<index_t>(std::max(0.0, std::min(want, cap)));
}

}  // namespace

template <class T>
GcpResult<T> gcp(const SparseTensor<T>& x, const GcpOptions& o, CpStart<T> initial_factors) {
  const auto start = detail::Clock::now();
  if (x.order() < 2) {
    throw InvalidArgument("GCP needs a tensor of order >= 2, got order " +
                          std::to_string(x.order()));
  }
  if (x.nnz() == 0) throw InvalidArgument("GCP of a sparse tensor needs at least one nonzero");
  detail::validate_gcp_options(o);
  detail::check_cp_rank(o.rank, x.dims());
  const GcpSampling& sp = o.sampling;
  detail::validate_gcp_sampling(sp);
  const int order = x.order();
  double sum = 0.0;
  for (index_t k = 0; k < x.nnz(); ++k) {
    const double v = static_cast<double>(x.values()[static_cast<std::size_t>(k)]);
    if (const char* why = gcp_value_requirement(o.loss, v)) {
      std::string at = "(";
      for (int n = 0; n < order; ++n)
        at += (n > 0 ? ", " : "") + std::to_string(x.indices(n)[static_cast<std::size_t>(k)]);
      detail::refuse_gcp_value(o.loss, why, at + ")", v);
    }
    sum += v;
  }
  Sampler<T> sampler(x, o.seed ^ 0x5851f42d4c957f2dULL);
  const double nnz = static_cast<double>(x.nnz());
  const double zeros = sampler.zeros();
  const double g_want = std::max(1000.0, std::ceil(3.0 * nnz / o.max_iters));
  const double f_want = std::max(std::ceil(nnz / 100.0), 1e5);
  const index_t gp = stratum(sp.gradient_nonzeros, g_want, nnz);
  const index_t gq = stratum(sp.gradient_zeros, g_want, std::min(nnz, zeros));
  const index_t fp = stratum(sp.function_nonzeros, f_want, nnz);
  const index_t fq = stratum(sp.function_zeros, f_want, std::min(nnz, zeros));
  if ((gq > 0 || fq > 0) && zeros < 1.0) {
    throw InvalidArgument("the tensor has no zeros to sample; set the zero sample counts to 0");
  }
  const index_t r = o.rank;
  double unknowns = 0.0;
  for (index_t d : x.dims()) unknowns += static_cast<double>(d) * static_cast<double>(r);
  auto c = detail::make_compute<double>(Backend::cpu);
  detail::require_memory(*c, 8.0 * unknowns + static_cast<double>(gp + gq + fp + fq) * (order + 2),
                         "sparse GCP at rank " + std::to_string(r));

  // The start, then its factors row-major.
  const std::vector<double> packed =
      detail::gcp_start<T>(x.dims(), o, sum / (nnz + zeros), initial_factors);
  RowFactors rf;
  rf.r = r;
  std::vector<double> u(packed.size());
  {
    std::size_t at = 0;
    for (int n = 0; n < order; ++n) {
      rf.offset.push_back(at);
      const index_t rows = x.dim(n);
      for (index_t i = 0; i < rows; ++i)
        for (index_t q = 0; q < r; ++q)
          u[at + static_cast<std::size_t>(i * r + q)] =
              packed[at + static_cast<std::size_t>(q * rows + i)];
      at += static_cast<std::size_t>(rows * r);
    }
  }
  const double lower = gcp_loss_is_bounded(o.loss) ? 0.0 : -std::numeric_limits<double>::infinity();
  for (double& v : u) v = std::max(v, lower);

  Sample fs, gs;
  sampler.draw(fp, fq, fs);
  double f = sampled(rf, u, fs, o.loss, o.huber_delta, nullptr);
  if (!std::isfinite(f)) {
    throw NumericalError("the GCP objective is not finite at the start; scale the start down");
  }
  // Adam: moments m, v and step count t; the epoch's start kept to undo a failed epoch.
  constexpr double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::vector<double> m(u.size(), 0.0), v(u.size(), 0.0), g;
  std::vector<double> u0 = u, m0 = m, v0 = v;
  long long t = 0, t0 = 0;
  int fails = 0;
  GcpResult<T> res;
  for (int epoch = 1; epoch <= o.max_iters; ++epoch) {
    const double step = sp.rate * std::pow(sp.decay, fails);
    for (int it = 0; it < sp.epoch_iters; ++it) {
      sampler.draw(gp, gq, gs);
      sampled(rf, u, gs, o.loss, o.huber_delta, &g);
      ++t;
      const double c1 = 1.0 - std::pow(beta1, static_cast<double>(t));
      const double c2 = 1.0 - std::pow(beta2, static_cast<double>(t));
      for (std::size_t i = 0; i < u.size(); ++i) {
        m[i] = beta1 * m[i] + (1.0 - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0 - beta2) * g[i] * g[i];
        u[i] = std::max(lower, u[i] - step * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps));
      }
    }
    const double f_new = sampled(rf, u, fs, o.loss, o.huber_delta, nullptr);
    const bool failed = !(f_new <= f);  // a rise, or a step out of the domain
    if (failed) {                       // undo the epoch; a smaller rate from the next
      ++fails;
      u = u0;
      m = m0;
      v = v0;
      t = t0;
    } else {
      f = f_new;
      u0 = u;
      m0 = m;
      v0 = v;
      t0 = t;
    }
    res.iterations = epoch;
    res.objective_history.push_back(f);
    const double elapsed = detail::seconds_since(start);
    const bool go_on = !o.callback || o.callback(GcpProgress{epoch, f, 0.0, elapsed});
    const auto stop =
        detail::stop_after_iteration(fails > sp.max_fails, go_on, o.time_limit, elapsed);
    res.stop = stop.value_or(CpStop::max_iters);
    if (stop) break;
  }
  res.converged = res.stop == CpStop::converged;
  res.objective = f;
  // Back to column-major factors.
  std::vector<double> out(u.size());
  for (int n = 0; n < order; ++n) {
    const std::size_t at = rf.offset[static_cast<std::size_t>(n)];
    const index_t rows = x.dim(n);
    for (index_t i = 0; i < rows; ++i)
      for (index_t q = 0; q < r; ++q)
        out[at + static_cast<std::size_t>(q * rows + i)] =
            u[at + static_cast<std::size_t>(i * r + q)];
  }
  res.model = detail::gcp_model<T>(x.dims(), r, out);
  detail::arrange(res.model);
  res.seconds = detail::seconds_since(start);
  return res;
}

#define TENFOLD_INSTANTIATE_SPARSE_GCP(T) \
  template GcpResult<T> gcp<T>(const SparseTensor<T>&, const GcpOptions&, CpStart<T>);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_SPARSE_GCP)

}  // namespace tenfold
