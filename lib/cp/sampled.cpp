// CP-ARLS-LEV (Larsen and Kolda, "Practical leverage-based sampling for low-rank tensor
// decomposition", SIMAX 2022) for dense tensors, run by the one ALS loop through an
// operand that updates the factors itself.
//
// Mode n's least-squares problem is min_U ||X_(n)^T - K U^T|| with K the Khatri-Rao
// product of the other factors (prod_{m != n} I_m rows). The leverage score of row
// (i_m)_{m != n} of K is at most prod_m l_m(i_m), l_m the leverage scores of U_m, so
// drawing each i_m from p_m = l_m / sum(l_m) independently samples K's rows nearly by
// leverage at O(sum_m I_m R^2) cost. With S draws, weights w_s = 1 / sqrt(S p_s) and
// Z = diag(w) K(rows, :), Y = X_(n)(:, rows) diag(w), the update is U = Y Z (Z^T Z)^{-1}:
// a relative-error least-squares solution for S = O(R log R) rows, whatever the noise,
// at O(S (I_n + R) R) instead of O(prod(I) R). CPRAND (Battaglino, Ballard and Kolda
// 2018) needs a mixing transform of the whole tensor (FFT of every mode) first to make
// uniform sampling safe, which costs more than several sampled sweeps here; the
// leverage scores need none.
#include "cp/sampled.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/random.hpp"
#include "core/thread_pool.hpp"
#include "cp/dense_operand.hpp"
#include "cp/reversed_operand.hpp"
#include "tenfold/error.hpp"

namespace tenfold {
namespace detail {
namespace {

// Entries of the fixed sample from which the fit of unchecked sweeps is estimated.
constexpr index_t kFitSampleEntries = index_t{1} << 14;
// Seed offsets of the two random streams (sampled rows, fit entries) from options.seed,
// so that neither repeats the draws of the random start.
constexpr std::uint64_t kRowStream = 0x5A4D504C45524F57ull;
constexpr std::uint64_t kFitStream = 0x46495453414D504Cull;
// fit_check_every >= 1: checks in a row without a gain above tol that stop the run.
constexpr int kStaleChecks = 3;
// fit_check_every = 0: sweeps in a row whose estimated fit does not beat the reference
// by more than the noise of the difference before an exact check: as many as the rule of
// fit_check_every = 5 waits (three stale checks), which lets sampled ALS leave swamps that
// stop exact ALS (with 5, the Gaussian 400^3 R32 problem of
// bench/cp_variants/sampled_time_to_fit.py stopped at fit 0.743; with checks every 5
// sweeps, the same iterates reach 0.990 at sweep 20).
constexpr int kStaleSweeps = 15;
// Standard errors a gain of the estimate must exceed to count (one-sided, about 2 %
// of gains of pure noise count); and that the exact fit may differ from the estimate by
// for the estimate to be trusted (two-sided, 0.3 % of honest samples distrusted, which
// costs one more check).
constexpr double kGainErrors = 2.0;
constexpr double kTrustErrors = 3.0;
constexpr std::uint64_t kGramStream = 0x4752414D53414D50ull;
// The random stream of the randomised eigensolver of the nvecs start.
constexpr std::uint64_t kSketchStream = 0x534B45544348454Eull;

// ||X - [[lambda; U_0, ..., U_{N-1}]]||^2 = ||X||^2 + lambda^T (*_n U_n^T U_n) lambda
// - 2 <X_(N-1) (Khatri-Rao of the others), U_{N-1} diag(lambda)>, through x's exact MTTKRP
// (any cached contraction is dropped first and after); factors and lambda in host memory.
template <class T>
double exact_residual(CpOperand<T>& x, Compute<T>& c, std::span<const T* const> factors,
                      const T* lambda, index_t r, double norm_x2) {
  const auto& dims = x.dims();
  const int last = x.order() - 1;
  const index_t il = dims[static_cast<std::size_t>(last)];
  std::vector<T> m(static_cast<std::size_t>(il * r)), gram(static_cast<std::size_t>(r * r));
  for (int n = 0; n <= last; ++n) x.factor_changed(n);
  x.mttkrp(last, factors, r, m.data());
  for (int n = 0; n <= last; ++n) x.factor_changed(n);
  double inner = 0.0;
  const T* ul = factors[static_cast<std::size_t>(last)];
  for (index_t j = 0; j < r; ++j) {
    double col = 0.0;
    for (index_t i = 0; i < il; ++i) col += static_cast<double>(m[i + j * il]) * ul[i + j * il];
    inner += col * lambda[j];
  }
  std::vector<double> had(static_cast<std::size_t>(r * r), 1.0);
  for (int n = 0; n <= last; ++n) {
    const index_t in = dims[static_cast<std::size_t>(n)];
    c.syrk(Op::trans, r, in, T(1), factors[static_cast<std::size_t>(n)], in, T(0), gram.data(), r);
    for (index_t j = 0; j < r; ++j)
      for (index_t i = 0; i <= j; ++i) had[i + j * r] *= gram[i + j * r];
  }
  double norm_m2 = 0.0;
  for (index_t j = 0; j < r; ++j) {
    for (index_t i = 0; i <= j; ++i) {
      const double v = had[i + j * r] * lambda[i] * lambda[j];
      norm_m2 += i == j ? v : 2.0 * v;
    }
  }
  return norm_x2 + norm_m2 - 2.0 * inner;
}

// The dense tensor with the sampled update: exact MTTKRP, norm and mode Grams come from
// the DenseOperand underneath (nvecs start, exact fits).
template <class T>
class SampledOperand final : public CpOperand<T> {
 public:
  SampledOperand(Compute<T>& c, DenseOperand<T>& dense, TensorView<const T> x, const CpOptions& o)
      : CpOperand<T>(c),
        dense_(dense),
        x_(x),
        strides_(strides_of(x.dims())),
        r_(o.rank),
        seed_(o.seed),
        check_every_(o.fit_check_every),
        max_iters_(o.max_iters),
        tol_(o.tol),
        fit_sample_(x, std::min(kFitSampleEntries, x.numel()), o.seed ^ kFitStream),
        cdf_(x.dims().size()) {
    for (std::size_t n = 0; n < x.dims().size(); ++n) {
      // S = min(asked, rows of K); all rows when that is the smaller.
      const index_t want = o.samples > 0 ? o.samples : kCpSamplesPerRank * o.rank;
      const index_t rows = rows_of_k(n, want);
      samples_.push_back(std::min(want, rows));
      all_rows_.push_back(rows <= want && rows < std::numeric_limits<index_t>::max());
    }
    reset();
  }

  const std::vector<index_t>& dims() const override { return dense_.dims(); }
  double norm_squared() override {
    if (norm_x2_ < 0.0) norm_x2_ = dense_.norm_squared();
    return norm_x2_;
  }
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override {
    dense_.mttkrp(n, factors, rank, out);
  }
  void factor_changed(int m) override {
    dense_.factor_changed(m);
    cdf_[static_cast<std::size_t>(m)].clear();
  }
  /// The Gram of S uniformly drawn mode-n fibres, Y Y^T (the nvecs start): its leading
  /// eigenvectors span nearly what those of X_(n) X_(n)^T do (a column-sampled range
  /// finder) at O(I_n^2 S) instead of O(I_n prod(I)).
  void mode_gram(int n, T* out) override;
  /// The Gram's leading eigenvectors by a randomised eigensolver (the Gram is itself a
  /// sample) where the mode is large against the rank; small modes solve exactly.
  bool gram_eigenvectors(int n, const T* gram, index_t r, T* out) override;
  bool updates_factors() const override { return true; }
  void reset() override {
    rows_rng_ = Rng(seed_ ^ kRowStream);
    sweep_ = 0;
    stale_checks_ = stale_sweeps_ = 0;
    best_fit_ = reference_fit_ = -std::numeric_limits<double>::infinity();
    reference_squares_.clear();
    stalled_ = checked_last_ = false;
    for (auto& cdf : cdf_) cdf.clear();
  }
  double workspace_elements(index_t rank, bool mode_grams) const override {
    double most = 0.0;
    for (std::size_t n = 0; n < samples_.size(); ++n) {
      most = std::max(most, static_cast<double>(samples_[n]) *
                                (static_cast<double>(x_.dims()[n]) + static_cast<double>(rank)));
    }
    double factors = 0.0;
    for (index_t d : x_.dims()) factors += static_cast<double>(d) * rank;
    return dense_.workspace_elements(rank, mode_grams) + most + 2.0 * factors;
  }

  void update_factor(int n, std::span<const T* const> factors, index_t rank, double ridge,
                     T* out) override;
  double end_sweep(std::span<const T* const> factors, const T* lambda, index_t rank) override;

  /// Whether the stopping rule has stopped the run (fit_check_every >= 1: the last
  /// kStaleChecks checks failed to raise the best checked fit by more than tol; 0: see
  /// end_sweep).
  bool stalled() const { return stalled_; }
  /// Whether the last sweep was checked, and its exact fit then.
  bool checked_last() const { return checked_last_; }
  double last_checked_fit() const { return last_fit_; }
  double best_fit() const { return best_fit_; }
  /// The best checked model (unit-free factors and weights, in this operand's numbering).
  KTensor<T> best_model() const { return KTensor<T>(best_lambda_, best_factors_); }
  /// The fit of a model (host memory), exact.
  double exact_fit(CpOperand<T>& x, std::span<const T* const> factors, const T* lambda) {
    return fit_of(exact_residual(x, this->c_, factors, lambda, r_, norm_squared()));
  }

 private:
  // prod_{m != n} I_m, or the largest index_t when it exceeds `cap` (no overflow).
  index_t rows_of_k(std::size_t n, index_t cap) const {
    index_t rows = 1;
    for (std::size_t m = 0; m < x_.dims().size(); ++m) {
      if (m == n) continue;
      if (rows > cap / x_.dims()[m]) return std::numeric_limits<index_t>::max();
      rows *= x_.dims()[m];
    }
    return rows;
  }
  double fit_of(double resid2) {
    const double nx = std::sqrt(norm_squared());
    return nx > 0.0 ? 1.0 - std::sqrt(std::max(0.0, resid2)) / nx : 1.0;
  }
  // yt (S x I_n) = Y^T, Y's column s the mode-n fibre at `offset[s]` scaled by weight[s].
  void gather_fibres(int n, const std::vector<index_t>& offset, const std::vector<T>& weight,
                     std::vector<T>& yt) const;
  void leverage_cdf(int m, const T* u);

  DenseOperand<T>& dense_;
  TensorView<const T> x_;
  std::vector<index_t> strides_;
  index_t r_;
  std::uint64_t seed_;
  int check_every_, max_iters_;
  double tol_;
  std::vector<index_t> samples_;
  std::vector<bool> all_rows_;            // per mode: the samples are all of K's rows
  FitSample<T> fit_sample_;               // fixed for the run: successive estimates compare
  std::vector<std::vector<double>> cdf_;  // cumulative leverage distribution of each U_m
  Rng rows_rng_{0};
  double norm_x2_ = -1.0;
  int sweep_ = 0, stale_checks_ = 0, stale_sweeps_ = 0;
  double best_fit_ = 0.0, last_fit_ = 0.0, reference_fit_ = 0.0;
  std::vector<double> squares_, reference_squares_;  // d_e^2 of this sweep, of the reference
  bool stalled_ = false, checked_last_ = false;
  std::vector<Matrix<T>> best_factors_;
  std::vector<T> best_lambda_;
};

template <class T>
void SampledOperand<T>::gather_fibres(int n, const std::vector<index_t>& offset,
                                      const std::vector<T>& weight, std::vector<T>& yt) const {
  // Entry i of every fibre, then entry i + 1, in blocks of i over the pool: the reads of
  // one i lie in one slab of the tensor (in mode n = N-1 a few MB), where reading fibre
  // by fibre touches a new page at every entry of a strided mode (measured 2x slower
  // for the last mode of 400^3; 4 KB pages). The entries i + 1 are fetched into the
  // cache while those of i are read: the reads of a slab are scattered, so the
  // processor's prefetchers do not find them, and each would wait on memory.
  const auto ni = static_cast<std::size_t>(n);
  const index_t in = x_.dims()[ni], count = static_cast<index_t>(offset.size());
  const index_t stride = strides_[ni], block = 16;
  const T* xd = x_.data();
  yt.resize(static_cast<std::size_t>(in * count));
  parallel_for((in + block - 1) / block, [&](index_t b) {
    for (index_t i = b * block; i < std::min(in, (b + 1) * block); ++i) {
      const T* slab = xd + i * stride;
      const T* next = i + 1 < in ? slab + stride : slab;
      T* row = yt.data() + i * count;
      for (index_t s = 0; s < count; ++s) {
        const index_t at = offset[static_cast<std::size_t>(s)];
        __builtin_prefetch(next + at);
        row[s] = weight[static_cast<std::size_t>(s)] * slab[at];
      }
    }
  });
}

template <class T>
void SampledOperand<T>::mode_gram(int n, T* out) {
  const auto& dims = x_.dims();
  const auto ni = static_cast<std::size_t>(n);
  const index_t count = samples_[ni];
  Rng rng(seed_ ^ kGramStream ^ static_cast<std::uint64_t>(n));
  std::vector<index_t> offset(static_cast<std::size_t>(count), 0);
  for (std::size_t m = 0; m < dims.size(); ++m) {
    if (m == ni) continue;
    for (index_t& o : offset) {
      o += std::min(dims[m] - 1,
                    static_cast<index_t>(rng.uniform() * static_cast<double>(dims[m]))) *
           strides_[m];
    }
  }
  std::vector<T> yt;
  gather_fibres(n, offset, std::vector<T>(static_cast<std::size_t>(count), T(1)), yt);
  this->c_.syrk(Op::trans, dims[ni], count, T(1), yt.data(), count, T(0), out, dims[ni]);
}

template <class T>
bool SampledOperand<T>::gram_eigenvectors(int n, const T* gram, index_t r, T* out) {
  const index_t in = x_.dims()[static_cast<std::size_t>(n)];
  if (4 * (r + kSketchOversampling) > in) return false;
  std::vector<double> g(gram, gram + in * in), u(static_cast<std::size_t>(in * r));
  if (!leading_eigenvectors_sketched(
          in, g.data(), r, seed_ ^ kSketchStream ^ static_cast<std::uint64_t>(n), u.data())) {
    return false;
  }
  std::transform(u.begin(), u.end(), out, [](double v) { return static_cast<T>(v); });
  return true;
}

template <class T>
void SampledOperand<T>::leverage_cdf(int m, const T* u) {
  // l_i = u_i G^+ u_i^T with G = U^T U = V diag(g) V^T: ||diag(g)^{-1/2} V^T u_i||^2 over
  // the eigenvalues above the rank tolerance.
  Compute<T>& c = this->c_;
  const index_t rows = x_.dims()[static_cast<std::size_t>(m)];
  const index_t r = r_;
  std::vector<T> g(static_cast<std::size_t>(r * r)), w(static_cast<std::size_t>(r));
  c.syrk(Op::trans, r, rows, T(1), u, rows, T(0), g.data(), r);
  c.syevd(r, g.data(), r, w.data());
  const double wmax = std::abs(static_cast<double>(w[static_cast<std::size_t>(r - 1)]));
  const double tol = wmax * static_cast<double>(r) * std::numeric_limits<T>::epsilon();
  for (index_t j = 0; j < r; ++j) {
    const double s = static_cast<double>(w[j]) > tol ? 1.0 / std::sqrt(double{w[j]}) : 0.0;
    for (index_t i = 0; i < r; ++i) g[i + j * r] = static_cast<T>(g[i + j * r] * s);
  }
  // P = U V diag(g)^{-1/2}: the leverage score of row i is ||P(i, :)||^2.
  std::vector<T> p(static_cast<std::size_t>(rows * r));
  c.gemm(Op::none, Op::none, rows, r, r, T(1), u, rows, g.data(), r, T(0), p.data(), rows);
  std::vector<double>& cdf = cdf_[static_cast<std::size_t>(m)];
  cdf.assign(static_cast<std::size_t>(rows), 0.0);
  double total = 0.0;
  for (index_t i = 0; i < rows; ++i) {
    double l = 0.0;
    for (index_t j = 0; j < r; ++j) l += static_cast<double>(p[i + j * rows]) * p[i + j * rows];
    total += l;
    cdf[static_cast<std::size_t>(i)] = total;
  }
  if (!(total > 0.0)) {
    throw NumericalError("solver = sampled: factor " + std::to_string(m) +
                         " is zero, so no row of the Khatri-Rao product can be sampled (the "
                         "start missed every nonzero of a very sparse tensor: start at random, "
                         "or use the exact solver, which restarts such components)");
  }
  for (double& v : cdf) v /= total;
  cdf.back() = 1.0;  // every uniform draw in [0, 1) then picks a row of positive mass
}

template <class T>
void SampledOperand<T>::update_factor(int n, std::span<const T* const> factors, index_t rank,
                                      double ridge, T* out) {
  Compute<T>& c = this->c_;
  const auto& dims = x_.dims();
  const int order = static_cast<int>(dims.size());
  const auto ni = static_cast<std::size_t>(n);
  const index_t in = dims[ni], s_count = samples_[ni], r = rank;
  for (int m = 0; m < order; ++m)
    if (m != n && cdf_[static_cast<std::size_t>(m)].empty())
      leverage_cdf(m, factors[static_cast<std::size_t>(m)]);
  // Draw S rows of K: i_m ~ p_m for every m != n (mode order, then sample order), the
  // fibre's offset and the row's probability p_s. When S is all of K's rows, each row
  // once instead (p_s = 1/S, w_s = 1): the exact solve, never worse than a sample of the
  // same size.
  const bool all_rows = all_rows_[ni];
  std::vector<index_t> offset(static_cast<std::size_t>(s_count), 0);
  std::vector<double> prob(static_cast<std::size_t>(s_count), 1.0);
  std::vector<index_t> pick(static_cast<std::size_t>(s_count * (order - 1)));  // i_m of s
  std::vector<std::vector<T>> ut;  // U_m^T (R x I_m): the rows of U_m contiguous
  index_t row_stride = 1;          // of mode m in K's row index (all_rows)
  for (int m = 0; m < order; ++m) {
    if (m == n) continue;
    const std::vector<double>& cdf = cdf_[static_cast<std::size_t>(m)];
    const index_t im = dims[static_cast<std::size_t>(m)];
    index_t* picked = pick.data() + static_cast<index_t>(ut.size()) * s_count;
    for (index_t s = 0; s < s_count; ++s) {
      index_t i = (s / row_stride) % im;
      if (all_rows) {
        prob[s] = 1.0 / static_cast<double>(s_count);
      } else {
        const auto draw = std::upper_bound(cdf.begin(), cdf.end(), rows_rng_.uniform());
        i = std::min<index_t>(im - 1, draw - cdf.begin());
        prob[s] *= cdf[i] - (i > 0 ? cdf[i - 1] : 0.0);
      }
      picked[s] = i;
      offset[s] += i * strides_[static_cast<std::size_t>(m)];
    }
    row_stride *= im;
    const T* u = factors[static_cast<std::size_t>(m)];
    std::vector<T>& t = ut.emplace_back(static_cast<std::size_t>(im * r));
    for (index_t j = 0; j < r; ++j)
      for (index_t i = 0; i < im; ++i) t[j + i * r] = u[i + j * im];
  }
  // The samples in the order of their offsets (the same least-squares problem): the
  // gather then reads each slab of the tensor forward.
  std::vector<index_t> sorted(static_cast<std::size_t>(s_count));
  std::iota(sorted.begin(), sorted.end(), index_t{0});
  std::sort(sorted.begin(), sorted.end(),
            [&](index_t a, index_t b) { return offset[a] < offset[b]; });
  std::vector<index_t> fibre(static_cast<std::size_t>(s_count));
  std::vector<T> weight(static_cast<std::size_t>(s_count));
  for (index_t s = 0; s < s_count; ++s) {
    fibre[s] = offset[sorted[s]];
    weight[s] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s_count) * prob[sorted[s]]));
  }
  // Z^T (R x S): column s = w_s * (Hadamard product of the U_m(i_m, :)), in blocks over
  // the pool.
  std::vector<T> zt(static_cast<std::size_t>(r * s_count));
  constexpr index_t kBlock = 128;
  parallel_for((s_count + kBlock - 1) / kBlock, [&](index_t b) {
    for (index_t s = b * kBlock; s < std::min(s_count, (b + 1) * kBlock); ++s) {
      T* col = zt.data() + s * r;
      std::fill_n(col, r, weight[s]);
      for (std::size_t k = 0; k < ut.size(); ++k) {
        const T* row = ut[k].data() + pick[k * s_count + sorted[s]] * r;
        for (index_t j = 0; j < r; ++j) col[j] *= row[j];
      }
    }
  });
  // Y(:, s) = w_s X(fibre s), stored as Y^T
  std::vector<T> yt;
  gather_fibres(n, fibre, weight, yt);
  // U_n = (Y Z) (Z^T Z + ridge I)^{-1}; Cholesky, or, when Z^T Z is numerically
  // singular, with the smallest shift R eps tr(Z^T Z) that makes it definite.
  std::vector<T> v(static_cast<std::size_t>(r * r));
  c.gemm(Op::trans, Op::trans, in, r, s_count, T(1), yt.data(), s_count, zt.data(), r, T(0), out,
         in);
  c.syrk(Op::none, r, s_count, T(1), zt.data(), r, T(0), v.data(), r);
  if (ridge > 0.0) c.add_diagonal(r, v.data(), r, static_cast<T>(ridge));
  std::vector<T> chol = v;
  if (!c.potrf(r, chol.data(), r)) {
    double trace = 0.0;
    for (index_t j = 0; j < r; ++j) trace += v[j + j * r];
    chol = v;
    c.add_diagonal(r, chol.data(), r,
                   static_cast<T>(static_cast<double>(r) * std::numeric_limits<T>::epsilon() *
                                  std::max(trace, std::numeric_limits<double>::min())));
    if (!c.potrf(r, chol.data(), r)) {
      throw NumericalError("solver = sampled: the sampled normal matrix of mode " +
                           std::to_string(n) +
                           " is not positive definite even when shifted; "
                           "try more samples or ridge > 0");
    }
  }
  c.potrs_right(r, chol.data(), r, in, out, in);
}

template <class T>
double SampledOperand<T>::end_sweep(std::span<const T* const> factors, const T* lambda,
                                    index_t rank) {
  ++sweep_;
  const bool fixed = check_every_ > 0;
  ResidualEstimate est;
  bool stale = false;
  if (fixed) {
    checked_last_ = sweep_ % check_every_ == 0 || sweep_ == max_iters_;
    if (!checked_last_) return fit_sample_.estimate(factors, lambda, rank).resid2;
  } else {
    // Automatic: the estimate of every sweep against the reference, the estimate at the
    // last gain that counted, on the same entries. A gain counts when it exceeds tol
    // and kGainErrors standard errors of the difference (below that the sample cannot
    // tell it from noise); kStaleSweeps sweeps in a row without one call for an exact
    // check.
    est = fit_sample_.estimate(factors, lambda, rank, &squares_);
    const double fit = fit_of(est.resid2);
    bool gain = reference_squares_.empty();
    if (!gain) {
      const double se = fit_sample_.difference_std_error(reference_squares_, squares_);
      const double noise = fit - fit_of(est.resid2 + kGainErrors * se);
      gain = fit > reference_fit_ + std::max(tol_, noise);
    }
    if (gain) {
      reference_fit_ = fit;
      reference_squares_.swap(squares_);
      stale_sweeps_ = 0;
    } else {
      ++stale_sweeps_;
    }
    stale = stale_sweeps_ >= kStaleSweeps;
    checked_last_ = stale || sweep_ == max_iters_;
    if (!checked_last_) return est.resid2;
  }
  // The exact fit; the best checked model is kept.
  const double resid2 = exact_residual<T>(dense_, this->c_, factors, lambda, rank, norm_squared());
  const double fit = fit_of(resid2);
  last_fit_ = fit;
  const bool first = best_fit_ == -std::numeric_limits<double>::infinity();
  const bool gained = first || fit > best_fit_ + tol_;
  if (fixed) {
    // The first check sets the best; each later one that does not beat it by more
    // than tol is stale, and kStaleChecks stale ones in a row stop the run (one alone
    // is often a dip of the sampling noise while the fit still rises).
    stale_checks_ = gained ? 0 : stale_checks_ + 1;
    stalled_ = stale_checks_ >= kStaleChecks;
  } else {
    // The estimate has stalled. At the first check it is trusted, and the run stops,
    // when the exact residual lies within kTrustErrors standard errors of it (or their
    // fits within tol): the sample represents the tensor. Otherwise, and at every later
    // check, the exact fits decide: stop when this one does not beat the best by tol.
    const bool trusted = std::abs(resid2 - est.resid2) <= kTrustErrors * est.std_error ||
                         std::abs(fit - fit_of(est.resid2)) <= tol_;
    stalled_ = stale && (first ? trusted : !gained);
    stale_sweeps_ = 0;
  }
  if (fit > best_fit_) {
    best_fit_ = fit;
    best_lambda_.assign(lambda, lambda + rank);
    best_factors_.clear();
    for (std::size_t m = 0; m < factors.size(); ++m) {
      Matrix<T> f(x_.dims()[m], rank);
      std::copy_n(factors[m], f.size(), f.data());
      best_factors_.push_back(std::move(f));
    }
  }
  return resid2;
}

}  // namespace

template <class T>
CpResult<T> run_sampled_cp(TensorView<const T> x, bool reversed, Compute<T>& c, const CpOptions& o,
                           std::span<const Matrix<T>> initial_factors, Clock::time_point start) {
  DenseOperand<T> dense(c, x);
  SampledOperand<T> sampled(c, dense, x, o);
  // The loop never stops on its own change of fit (tol 0): the checks decide.
  CpOptions ol = o;
  ol.tol = 0.0;
  ol.compress = CpCompress::off;
  if (ol.init == CpInit::automatic && initial_factors.empty()) ol.init = CpInit::nvecs;
  bool converged = false;
  ol.callback = [&](const CpProgress& p) {
    if (o.callback && !o.callback(p)) return false;
    converged = sampled.stalled();
    return !converged;
  };
  return run_in_axis_numbering(
      c, static_cast<CpOperand<T>&>(sampled), reversed, [&](CpOperand<T>& a) {
        CpResult<T> res = run_cp_als<T>(a, c, ol, initial_factors, start);
        if (converged) {
          res.stop = CpStop::converged;
          res.converged = true;
        }
        const auto t0 = Clock::now();
        // The last model, when unchecked (time limit, callback), is checked now (in the
        // loop's numbering, through `a`); the best checked one is returned.
        double last_fit = sampled.last_checked_fit();
        if (!sampled.checked_last()) {
          std::vector<const T*> f;
          for (const Matrix<T>& u : res.model.factors) f.push_back(u.data());
          last_fit = sampled.exact_fit(a, f, res.model.weights.data());
        }
        if (last_fit < sampled.best_fit()) {
          res.model = sampled.best_model();
          if (reversed) res.model.factors = detail::reversed(std::move(res.model.factors));
          arrange(res.model);
          last_fit = sampled.best_fit();
        }
        res.fit = last_fit;
        res.relative_error = 1.0 - last_fit;
        res.timings.other += seconds_since(t0);
        res.timings.total = seconds_since(start);
        return res;
      });
}

template CpResult<float> run_sampled_cp<float>(TensorView<const float>, bool, Compute<float>&,
                                               const CpOptions&, std::span<const Matrix<float>>,
                                               Clock::time_point);
template CpResult<double> run_sampled_cp<double>(TensorView<const double>, bool, Compute<double>&,
                                                 const CpOptions&, std::span<const Matrix<double>>,
                                                 Clock::time_point);

}  // namespace detail

std::string_view to_string(CpSolver solver) {
  return solver == CpSolver::exact ? "exact" : "sampled";
}

CpSolver parse_cp_solver(std::string_view name) {
  if (name == "exact") return CpSolver::exact;
  if (name == "sampled") return CpSolver::sampled;
  throw InvalidArgument("unknown solver '" + std::string(name) + "' (expected exact or sampled)");
}

}  // namespace tenfold
