#include "cp/compressed.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/random.hpp"
#include "cp/cp_als.hpp"
#include "cp/dense_operand.hpp"
#include "cp/gevd.hpp"
#include "cp/reversed_operand.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold {
namespace detail {
namespace {

// Sweeps of one start on the core that the automatic count of starts assumes: from a
// random start on planted problems (issue 29's 200^3 to 400^3 at R 32) the core runs
// converged in 10 to 20. The random starts get that many sweeps each in all.
constexpr int kCoreSweepsPerStart = 20;

// out (rows x R) = U (rows x k) B (k x R), or with `trans` U^T B (U then k x rows), on the host.
template <class T>
Matrix<T> times(Compute<T>& host, const Matrix<T>& u, const Matrix<T>& b, bool trans) {
  Matrix<T> out(trans ? u.cols() : u.rows(), b.cols());
  host.gemm(trans ? Op::trans : Op::none, Op::none, out.rows(), out.cols(), b.rows(), T(1),
            u.data(), u.rows(), b.data(), b.rows(), T(0), out.data(), out.rows());
  return out;
}

// The start of the core phase (empty when the core phase resolves its own start).
// nvecs (and automatic) run on the core: the leading eigenvectors of G_(n) G_(n)^T,
// lifted, are those of the compressed tensor's mode Gram. A random or given start A_n
// enters as its projection B_n = U_n^T A_n, so that the first core update equals the
// first update of plain ALS on the compressed tensor.
template <class T>
std::vector<Matrix<T>> core_start(const CpOptions& o, std::span<const Matrix<T>> initial_factors,
                                  const TTensor<T>& tt, Compute<T>& host) {
  if (o.init != CpInit::random && initial_factors.empty()) return {};
  std::vector<Matrix<T>> start(initial_factors.begin(), initial_factors.end());
  if (initial_factors.empty()) {
    // The draws of run_cp_als's random start: uniform in [0, 1), mode 0 first.
    Rng rng(o.seed);
    for (const Matrix<T>& u : tt.factors) {
      Matrix<T> a(u.rows(), o.rank);
      for (index_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<T>(rng.uniform());
      start.push_back(std::move(a));
    }
  }
  std::vector<Matrix<T>> projected;
  for (std::size_t n = 0; n < start.size(); ++n) {
    projected.push_back(times(host, tt.factors[n], start[n], true));
  }
  return projected;
}

}  // namespace

std::vector<index_t> planned_compression(const CpOptions& o, const std::vector<index_t>& dims) {
  if (o.compress == CpCompress::off) return {};
  if (o.max_iters == 0) {
    if (o.compress == CpCompress::on) {
      throw InvalidArgument("compress = on needs max_iters >= 1 (max_iters = 0 returns the start)");
    }
    return {};
  }
  if (!o.fixed_modes.empty()) {
    if (o.compress == CpCompress::on) {
      throw InvalidArgument(
          "compress = on cannot be combined with fixed modes (the core's "
          "factors would replace them)");
    }
    return {};
  }
  if (o.sparsity > 0) {
    if (o.compress == CpCompress::on) {
      throw InvalidArgument(
          "compress = on cannot be combined with sparsity (the core's sweeps would measure "
          "the plain error)");
    }
    return {};
  }
  if (o.orthogonalise > 0) {
    if (o.compress == CpCompress::on) {
      throw InvalidArgument(
          "compress = on cannot be combined with orthogonalise (the sweeps "
          "on the core would orthogonalise the core's factors)");
    }
    return {};
  }
  if (o.nonnegative) {
    if (o.compress == CpCompress::on) {
      throw InvalidArgument(
          "compress = on cannot be combined with nonnegative (the lifted factors would not be "
          "non-negative)");
    }
    return {};
  }
  std::vector<index_t> ranks = cp_compression_ranks(dims, o.rank);
  double reduction = 1.0, numel = 1.0;
  for (std::size_t n = 0; n < dims.size(); ++n) {
    reduction *= static_cast<double>(dims[n]) / static_cast<double>(ranks[n]);
    numel *= static_cast<double>(dims[n]);
  }
  // automatic: also every I_n x I_n Gram that ST-HOSVD forms must be affordable (plain
  // CP-ALS forms none of mode 0).
  const bool grams =
      std::all_of(dims.begin(), dims.end(), [](index_t d) { return d <= kCpNvecsMaxSize; });
  const bool pays = o.compress == CpCompress::on
                        ? reduction > 1.0
                        : grams && reduction >= kCpCompressMinReduction &&
                              numel >= static_cast<double>(kCpCompressMinEntries);
  if (!pays) ranks.clear();
  return ranks;
}

template <class T>
CpResult<T> run_compressed_cp(TensorView<const T> x, bool reversed, Compute<T>& c,
                              const CpOptions& o, std::span<const Matrix<T>> initial_factors,
                              const std::vector<index_t>& ranks, Clock::time_point start) {
  auto host_compute = make_compute<T>(Backend::cpu);
  Compute<T>& host = *host_compute;
  // X ~ X^ = G x_0 U_0 ... x_{N-1} U_{N-1} with orthonormal U_n (ST-HOSVD), in axis order
  auto t0 = Clock::now();
  TuckerOptions to;
  to.backend = o.backend;
  to.ranks = ranks;
  if (reversed) {
    to.layout = Layout::row_major;
    to.row_major_input = RowMajorInput::in_place;
    to.ranks = detail::reversed(ranks);
  }
  TTensor<T> tt = tucker(x, to).model;
  if (reversed) {
    tt = TTensor<T>(reverse_modes<T>(std::as_const(tt.core).view()),
                    detail::reversed(std::move(tt.factors)));
  }
  double norm_x2 = 0.0, norm_g2 = 0.0;
  for (index_t i = 0; i < x.numel(); ++i) norm_x2 += static_cast<double>(x[i]) * x[i];
  for (index_t i = 0; i < tt.core.numel(); ++i)
    norm_g2 += static_cast<double>(tt.core[i]) * tt.core[i];
  double compress_seconds = seconds_since(t0);
  // For M = [[lambda; U_0 B_0, ...]] inside the subspaces, X - X^ is orthogonal to
  // X^ - M, so ||X - M||^2 = (||X||^2 - ||G||^2) + ||G - [[lambda; B_0, ...]]||^2.
  const double discarded = std::max(0.0, norm_x2 - norm_g2);
  const auto full_fit = [&](double core_fit) {
    if (norm_x2 <= 0.0) return 1.0;
    const double core_resid = (1.0 - core_fit) * std::sqrt(norm_g2);
    return 1.0 - std::sqrt(discarded + core_resid * core_resid) / std::sqrt(norm_x2);
  };

  // Phase 1: CP-ALS of the core, every start there.
  CpOptions oc = o;
  oc.compress = CpCompress::off;
  // Automatic starts: from the default start, several on the core, where a sweep costs
  // numel(G) / numel(X) of one on the tensor (issue 29: one start misses planted
  // solutions that one of a few random starts finds).
  const bool structured =
      (o.init == CpInit::automatic || o.init == CpInit::nvecs || o.init == CpInit::gevd) &&
      initial_factors.empty();
  // Automatic: the count's random starts share its budget of core sweeps, so that starts
  // that run longer than it assumes (swamps) do not cost more in all.
  int extra_sweeps = -1;
  if (o.n_starts == 0) {
    oc.n_starts = structured ? cp_compressed_starts(x.dims(), o.rank) : 1;
    extra_sweeps = (oc.n_starts - 1) * kCoreSweepsPerStart;
  }
  std::vector<Matrix<T>> core_initial = core_start(o, initial_factors, tt, host);
  // The algebraic start on the core (asked for, or automatic's where it applies; nvecs
  // when automatic's meets a singular step).
  bool gevd = false;
  if (o.init == CpInit::gevd || (o.init == CpInit::automatic && initial_factors.empty())) {
    if (gevd_applies(tt.core.dims(), o.rank)) {
      core_initial = gevd_start<T>(std::as_const(tt.core).view(), o.rank, o.seed);
      gevd = !core_initial.empty();
      if (!gevd && o.init == CpInit::gevd) {
        throw NumericalError(
            "init = gevd: a mixture of the core's slices or its eigenvectors are singular "
            "(the tensor's rank may be below R); use init = nvecs or random");
      }
    } else if (o.init == CpInit::gevd) {
      const auto& g = tt.core.dims();
      throw InvalidArgument(
          "init = gevd needs a 3-way tensor whose first two axes have at least rank = " +
          std::to_string(o.rank) + " entries and whose third has 2 or more (compressed core " +
          std::to_string(g[0]) + (g.size() > 1 ? "x" + std::to_string(g[1]) : "") +
          (g.size() > 2 ? "x" + std::to_string(g[2]) : "") + (g.size() > 3 ? "x..." : "") + ")");
    }
  }
  if (!core_initial.empty()) oc.init = CpInit::given;
  double last_fit = 0.0;
  if (o.callback) {
    oc.callback = [&](const CpProgress& p) {
      CpProgress q = p;
      q.fit = full_fit(p.fit);
      q.model = nullptr;  // the core's model, not the tensor's
      q.delta = p.iteration == 1 ? q.fit : std::abs(q.fit - last_fit);
      last_fit = q.fit;
      return o.callback(q);
    };
  }
  DenseOperand<T> core_operand(c, tt.core.view());
  CpResult<T> core = run_cp_starts<T>(core_operand, c, oc, core_initial, start, extra_sweeps);

  // A_n = U_n B_n
  t0 = Clock::now();
  std::vector<Matrix<T>> lifted;
  for (std::size_t n = 0; n < tt.factors.size(); ++n) {
    lifted.push_back(times(host, tt.factors[n], core.model.factors[n], false));
  }
  compress_seconds += seconds_since(t0);

  CpResult<T> res;
  const int left = o.max_iters - core.iterations;
  if (left < 1 || core.stop == CpStop::callback || core.stop == CpStop::time_limit) {
    // No sweep left for the full tensor: the lifted model is the answer.
    res.model = KTensor<T>(core.model.weights, std::move(lifted));
    arrange(res.model);
    res.iterations = 0;
    res.stop = core.stop;
    res.converged = res.stop == CpStop::converged;
    res.fit = full_fit(core.fit);
    res.relative_error = 1.0 - res.fit;
  } else {
    // Phase 2: ALS on the full tensor from the lifted factors, the usual stopping rule.
    CpOptions of = o;
    of.compress = CpCompress::off;
    of.init = CpInit::given;
    of.n_starts = 1;
    of.max_iters = left;
    const double offset = seconds_since(start);
    if (o.time_limit > 0.0) of.time_limit = std::max(o.time_limit - offset, 1e-9);
    last_fit = full_fit(core.fit);
    if (o.callback) {
      of.callback = [&](const CpProgress& p) {
        CpProgress q = p;
        q.iteration += core.iterations;
        q.delta = std::abs(q.fit - last_fit);
        q.seconds += offset;
        last_fit = q.fit;
        return o.callback(q);
      };
    }
    DenseOperand<T> full(c, x);
    res = run_in_axis_numbering(c, full, reversed, [&](CpOperand<T>& a) {
      return run_cp_als<T>(a, c, of, lifted, Clock::now());
    });
  }

  res.compressed = true;
  res.compression_ranks = ranks;
  res.compressed_iterations = core.iterations;
  res.iterations += core.iterations;
  std::vector<double> history;
  for (double f : core.fit_history) history.push_back(full_fit(f));
  history.insert(history.end(), res.fit_history.begin(), res.fit_history.end());
  res.fit_history = std::move(history);
  const CpInit asked = initial_factors.empty() ? o.init : CpInit::given;
  // (the gevd start entered the core phase as given factors, start 0)
  res.init = asked == CpInit::random || asked == CpInit::given ? asked
             : gevd && core.best_start == 0                    ? CpInit::gevd
                                                               : core.init;
  res.best_start = core.best_start;
  res.start_fits.clear();
  for (double f : core.start_fits) res.start_fits.push_back(full_fit(f));
  res.eigen_fallbacks += core.eigen_fallbacks;
  res.line_search_accepted += core.line_search_accepted;
  CpTimings& t = res.timings;
  t.init += core.timings.init - compress_seconds;
  t.compress = compress_seconds;
  t.mttkrp += core.timings.mttkrp;
  t.gram += core.timings.gram;
  t.solve += core.timings.solve;
  t.other += core.timings.other;
  t.total = seconds_since(start);
  return res;
}

template CpResult<float> run_compressed_cp<float>(TensorView<const float>, bool, Compute<float>&,
                                                  const CpOptions&, std::span<const Matrix<float>>,
                                                  const std::vector<index_t>&, Clock::time_point);
template CpResult<double> run_compressed_cp<double>(TensorView<const double>, bool,
                                                    Compute<double>&, const CpOptions&,
                                                    std::span<const Matrix<double>>,
                                                    const std::vector<index_t>&, Clock::time_point);

}  // namespace detail

std::vector<index_t> cp_compression_ranks(std::span<const index_t> dims, index_t rank) {
  // r_n = min(I_n, R, prod_{m != n} I_m): an exact rank-R tensor lies in the span of its
  // leading R mode-n singular vectors, so its CP is recovered exactly (CANDELINC); the
  // refining sweeps take up what noise leaves outside.
  std::vector<index_t> ranks;
  for (std::size_t n = 0; n < dims.size(); ++n) {
    index_t others = 1;  // prod_{m != n} I_m, saturating at R
    for (std::size_t m = 0; m < dims.size(); ++m)
      if (m != n) others = std::min(rank, others * dims[m]);
    ranks.push_back(std::min({dims[n], rank, others}));
  }
  return ranks;
}

int cp_compressed_starts(std::span<const index_t> dims, index_t rank) {
  // What a sweep costs beside its flops (thread wake-ups, small BLAS calls, the fit):
  // about 0.2 ms, worth 4e5 flops at a small core's rate (docs/algorithms.md), more
  // than a whole sweep of a 16^3 core at R 16.
  constexpr double kSweepOverheadFlops = 4e5;
  const std::vector<index_t> ranks = cp_compression_ranks(dims, rank);
  // ST-HOSVD: per mode the Gram (I_n P) and the shrinking TTM (2 r_n P) of the current
  // size P; then two sweeps of the full tensor and one start's sweeps of the core.
  double p = 1.0, core = 1.0, sthosvd = 0.0;
  for (index_t d : dims) p *= static_cast<double>(d);
  const double full_sweeps = 2.0 * 4.0 * static_cast<double>(rank) * p;
  for (std::size_t n = 0; n < dims.size(); ++n) {
    sthosvd += (static_cast<double>(dims[n]) + 2.0 * static_cast<double>(ranks[n])) * p;
    p *= static_cast<double>(ranks[n]) / static_cast<double>(dims[n]);
    core *= static_cast<double>(ranks[n]);
  }
  const double start =
      detail::kCoreSweepsPerStart * (4.0 * static_cast<double>(rank) * core + kSweepOverheadFlops);
  // Two fifths of one start's estimate: the default then takes at most about 1.5x a
  // single start (its gevd start converges in fewer sweeps than the estimate's).
  const double more = 0.4 * (sthosvd + full_sweeps + start) / start;
  return static_cast<int>(std::min<double>(kCpMaxCompressedStarts, 1.0 + std::floor(more)));
}

std::string_view to_string(CpCompress compress) {
  switch (compress) {
    case CpCompress::automatic:
      return "auto";
    case CpCompress::on:
      return "on";
    case CpCompress::off:
      return "off";
  }
  return "?";
}

CpCompress parse_cp_compress(std::string_view name) {
  if (name == "auto") return CpCompress::automatic;
  if (name == "on") return CpCompress::on;
  if (name == "off") return CpCompress::off;
  throw InvalidArgument("unknown compress '" + std::string(name) + "' (expected auto, on or off)");
}

}  // namespace tenfold
