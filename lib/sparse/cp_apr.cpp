// CP-APR with multiplicative updates (Chi and Kolda 2012; the Tensor Toolbox's
// cp_apr 'mu'). For the Poisson model M = [[lambda; A_0, ..., A_{N-1}]] with columns of
// unit 1-norm, each outer iteration visits every mode n:
//   fix inadmissible zeros:  A_n(i,r) += kappa where A_n(i,r) < kappa_tol and Phi_n(i,r) > 1
//   B = A_n diag(lambda),  Pi = the Khatri-Rao rows of the other factors at the nonzeros
//   repeat (at most max_inner_iters times):
//     Phi = (X_(n) ./ max(B Pi^T, eps)) Pi          (only the nonzeros of X contribute)
//     stop when max |min(B, 1 - Phi)| < tol          (the KKT conditions of the subproblem)
//     B = B .* Phi
//   lambda = column sums of B,  A_n = B diag(lambda)^{-1}
// and the iteration ends when no mode needed an update.
#include "tenfold/cp_apr.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>

#include "core/format.hpp"
#include "core/instantiate.hpp"
#include "core/memory.hpp"
#include "core/random.hpp"
#include "core/thread_pool.hpp"
#include "cp/cp_als.hpp"
#include "cp/start_check.hpp"
#include "cp/stop.hpp"
#include "sparse/csf.hpp"
#include "sparse/entry_order.hpp"
#include "tenfold/error.hpp"

namespace tenfold {
namespace {

using detail::Csf;

void validate_apr_options(const CpAprOptions& o) {
  // Numbers as typed: integers without a fraction, reals in shortest round-trip form.
  const auto bad = [](const char* name, double v, const char* need) {
    throw InvalidOption(name, std::string("must be ") + need + ", got " + detail::number_string(v));
  };
  if (o.rank < 1) bad("rank", static_cast<double>(o.rank), "at least 1");
  if (o.max_iters < 1) bad("max_iters", o.max_iters, "at least 1");
  if (o.max_inner_iters < 1) bad("max_inner_iters", o.max_inner_iters, "at least 1");
  if (!(o.tol > 0.0) || !std::isfinite(o.tol)) bad("tol", o.tol, "finite and > 0");
  if (!(o.kappa >= 0.0) || !std::isfinite(o.kappa)) bad("kappa", o.kappa, "finite and >= 0");
  if (!(o.kappa_tol >= 0.0) || !std::isfinite(o.kappa_tol))
    bad("kappa_tol", o.kappa_tol, "finite and >= 0");
  if (!(o.eps_div_zero > 0.0) || !std::isfinite(o.eps_div_zero))
    bad("eps_div_zero", o.eps_div_zero, "finite and > 0");
  if (!(o.time_limit >= 0.0)) bad("time_limit", o.time_limit, ">= 0");
}

template <class T>
void validate_counts(const SparseTensor<T>& x) {
  if (x.order() < 2) {
    throw InvalidArgument("CP-APR needs a tensor of order >= 2, got order " +
                          std::to_string(x.order()));
  }
  for (index_t k = 0; k < x.nnz(); ++k) {
    const T v = x.values()[static_cast<std::size_t>(k)];
    if (v >= T(0)) continue;
    std::string at;
    for (int n = 0; n < x.order(); ++n)
      at += (n > 0 ? ", " : "") + std::to_string(x.indices(n)[static_cast<std::size_t>(k)]);
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, v).ptr;
    throw InvalidArgument("CP-APR (Poisson) needs nonnegative counts; the entry at (" + at +
                          ") is " + std::string(text, end));
  }
  if (x.nnz() == 0) {
    throw InvalidArgument(
        "CP-APR needs at least one nonzero count (the model of an all-zero "
        "tensor is zero)");
  }
  // The weights sum to the total count, and Phi holds ratios of counts to the model:
  // the total must stay well inside T's range.
  double total = 0.0;
  for (const T v : x.values()) total += static_cast<double>(v);
  const double limit = static_cast<double>(std::numeric_limits<T>::max()) * 1e-6;
  if (!(total <= limit)) {
    throw InvalidArgument("CP-APR: the counts sum to " + detail::number_string(total) +
                          ", beyond " + detail::number_string(limit) + " that " +
                          (sizeof(T) == 4 ? "float32" : "float64") +
                          " holds through the updates; scale the counts down");
  }
}

// The Poisson model during the iteration: row-major factors (I_n x R) with unit 1-norm
// columns, and lambda.
template <class T>
struct AprModel {
  std::vector<std::vector<T>> a;
  std::vector<T> lambda;
  index_t r;

  std::vector<const T*> rows() const {
    std::vector<const T*> p;
    for (const auto& f : a) p.push_back(f.data());
    return p;
  }
  // lambda_j *= sum_i A_n(i,j); A_n(:,j) /= that sum (a zero column stays zero).
  void normalise(int n, std::vector<T>& b) {
    const auto rows_n = static_cast<index_t>(b.size()) / r;
    std::vector<double> sums(static_cast<std::size_t>(r), 0.0);
    for (index_t i = 0; i < rows_n; ++i)
      for (index_t j = 0; j < r; ++j)
        sums[static_cast<std::size_t>(j)] += b[static_cast<std::size_t>(i * r + j)];
    for (index_t j = 0; j < r; ++j)
      lambda[static_cast<std::size_t>(j)] = static_cast<T>(sums[static_cast<std::size_t>(j)]);
    for (index_t i = 0; i < rows_n; ++i)
      for (index_t j = 0; j < r; ++j) {
        const double s = sums[static_cast<std::size_t>(j)];
        b[static_cast<std::size_t>(i * r + j)] =
            s > 0.0 ? static_cast<T>(b[static_cast<std::size_t>(i * r + j)] / s) : T(0);
      }
    a[static_cast<std::size_t>(n)].swap(b);
  }
};

// sum over nonzeros of x log(m) - sum of all m (= sum lambda with unit 1-norm columns).
template <class T>
double log_likelihood(const Csf<T>& tree, const AprModel<T>& m) {
  const index_t r = m.r;
  const auto& cuts = tree.cuts();
  const std::vector<const T*> rows = m.rows();
  const T* a0 = m.a[static_cast<std::size_t>(tree.mode(0))].data();
  std::vector<double> partial(cuts.size() - 1, 0.0);
  detail::with_index(tree, [&](const auto& ix) {
    detail::parallel_for(static_cast<index_t>(cuts.size()) - 1, [&](index_t piece) {
      detail::TreeScratch<T> scratch(tree.levels(), r);
      double s = 0.0;
      for (index_t root = cuts[static_cast<std::size_t>(piece)];
           root < cuts[static_cast<std::size_t>(piece) + 1]; ++root) {
        const T* ai = a0 + ix.ids(0)[root] * r;
        detail::for_each_leaf(tree, ix, root, rows.data(), r, scratch, [&](T x, const T* pi) {
          double v = 0.0;
          for (index_t j = 0; j < r; ++j)
            v += static_cast<double>(m.lambda[static_cast<std::size_t>(j)]) * ai[j] * pi[j];
          s += static_cast<double>(x) * std::log(v);
        });
      }
      partial[static_cast<std::size_t>(piece)] = s;
    });
  });
  double f = 0.0;
  for (double p : partial) f += p;
  for (T l : m.lambda) f -= static_cast<double>(l);
  return f;
}

}  // namespace

template <class T>
CpAprResult<T> cp_apr(const SparseTensor<T>& x, const CpAprOptions& o, CpStart<T> initial_factors) {
  const auto start = detail::Clock::now();
  validate_apr_options(o);
  validate_counts(x);
  detail::check_cp_rank(o.rank, x.dims());
  const int order = x.order();
  const index_t r = o.rank;
  if (!initial_factors.empty()) {
    if (initial_factors.size() != static_cast<std::size_t>(order)) {
      throw DimensionMismatch("the start needs " + std::to_string(order) +
                              " initial factors, got " + std::to_string(initial_factors.size()));
    }
    for (int n = 0; n < order; ++n) {
      const Matrix<T>& f = initial_factors[static_cast<std::size_t>(n)];
      if (f.rows() != x.dim(n) || f.cols() != r) {
        throw DimensionMismatch("initial factor " + std::to_string(n) + " is " +
                                std::to_string(f.rows()) + "x" + std::to_string(f.cols()) +
                                ", expected " + std::to_string(x.dim(n)) + "x" + std::to_string(r));
      }
      check_finite(TensorView<const T>(f.data(), {f.rows(), f.cols()}),
                   ("initial factor " + std::to_string(n)).c_str());
    }
    const std::string why = "the multiplicative updates keep zeros and signs";
    detail::require_nonnegative_start(initial_factors, "CP-APR", why);
    detail::require_live_components(initial_factors, 0, "CP-APR", why);
  }
  // Memory: one CSF tree per mode, then factors and Phi per mode.
  double factor_bytes = 0.0;
  for (index_t d : x.dims()) factor_bytes += 3.0 * static_cast<double>(d) * r * sizeof(T);
  std::vector<int> roots(static_cast<std::size_t>(order));
  std::iota(roots.begin(), roots.end(), 0);
  const std::vector<std::unique_ptr<Csf<T>>> trees =
      detail::build_csf_trees(x, roots, factor_bytes,
                              "CP-APR at rank " + std::to_string(r) + " of a sparse tensor with " +
                                  std::to_string(x.nnz()) + " nonzeros");
  // The Khatri-Rao rows of the mode being updated are kept through its inner iterations
  // (nnz x R) when they take at most a quarter of the free memory; recomputed otherwise.
  const double pi_bytes = static_cast<double>(x.nnz()) * static_cast<double>(r) * sizeof(T);
  const bool keep_pi = pi_bytes <= 0.25 * static_cast<double>(detail::host_available_bytes());
  std::vector<T> pi(keep_pi ? static_cast<std::size_t>(x.nnz() * r) : 0);

  // The start: given or uniform in [0, 1) (drawn column-major, mode by mode), columns
  // normalised to unit 1-norm into lambda.
  AprModel<T> m{{}, std::vector<T>(static_cast<std::size_t>(r), T(1)), r};
  detail::Rng rng(o.seed);
  for (int n = 0; n < order; ++n) {
    const index_t in = x.dim(n);
    std::vector<T> rowmajor(static_cast<std::size_t>(in * r));
    for (index_t j = 0; j < r; ++j)
      for (index_t i = 0; i < in; ++i)
        rowmajor[static_cast<std::size_t>(i * r + j)] =
            initial_factors.empty() ? static_cast<T>(rng.uniform())
                                    : initial_factors[static_cast<std::size_t>(n)](i, j);
    m.a.emplace_back();
    std::vector<T> lambda_before = m.lambda;
    m.normalise(n, rowmajor);
    for (index_t j = 0; j < r; ++j)
      m.lambda[static_cast<std::size_t>(j)] *= lambda_before[static_cast<std::size_t>(j)];
  }

  CpAprResult<T> res;
  std::vector<std::vector<T>> phi(static_cast<std::size_t>(order));
  std::vector<T> b;
  const T eps = static_cast<T>(o.eps_div_zero);
  for (int iter = 1; iter <= o.max_iters; ++iter) {
    bool converged = true;
    double kkt = 0.0;
    int inner = 0;
    for (int n = 0; n < order; ++n) {
      const auto ns = static_cast<std::size_t>(n);
      const index_t in = x.dim(n);
      b = m.a[ns];
      // Inadmissible zeros: entries stuck at zero although the gradient says grow.
      if (iter > 1) {
        bool shifted = false;
        for (std::size_t e = 0; e < b.size(); ++e) {
          if (phi[ns][e] > T(1) && b[e] < static_cast<T>(o.kappa_tol)) {
            b[e] += static_cast<T>(o.kappa);
            shifted = true;
          }
        }
        res.inadmissible_zero_fixes += shifted;
      }
      // B = A_n diag(lambda)
      for (index_t i = 0; i < in; ++i)
        for (index_t j = 0; j < r; ++j)
          b[static_cast<std::size_t>(i * r + j)] *= m.lambda[static_cast<std::size_t>(j)];
      phi[ns].resize(static_cast<std::size_t>(in * r));
      const std::vector<const T*> rows = m.rows();
      if (keep_pi) detail::csf_khatri_rao_rows(*trees[ns], rows, r, pi.data());
      double violation = 0.0;
      for (int k = 0; k < o.max_inner_iters; ++k) {
        ++inner;
        if (keep_pi) {
          detail::csf_poisson_phi_kept(*trees[ns], pi.data(), b.data(), r, eps, phi[ns].data());
        } else {
          detail::csf_poisson_phi(*trees[ns], rows, b.data(), r, eps, phi[ns].data());
        }
        violation = 0.0;
        for (std::size_t e = 0; e < b.size(); ++e)
          violation =
              std::max(violation, std::abs(static_cast<double>(std::min(b[e], T(1) - phi[ns][e]))));
        if (violation < o.tol) break;
        converged = false;
        for (std::size_t e = 0; e < b.size(); ++e) b[e] *= phi[ns][e];
      }
      kkt = std::max(kkt, violation);
      m.normalise(n, b);
    }
    if (!std::isfinite(kkt) ||
        !std::all_of(m.lambda.begin(), m.lambda.end(), [](T v) { return std::isfinite(v); })) {
      throw NumericalError("CP-APR produced a non-finite model at iteration " +
                           std::to_string(iter) +
                           " (overflow: scale the counts down, or compute in float64)");
    }
    res.iterations = iter;
    res.inner_iterations += inner;
    res.kkt_violation = kkt;
    res.kkt_history.push_back(kkt);
    const double elapsed = detail::seconds_since(start);
    const bool go_on = !o.callback || o.callback(CpAprProgress{iter, kkt, inner, elapsed});
    const auto stop = detail::stop_after_iteration(converged, go_on, o.time_limit, elapsed);
    res.stop = stop.value_or(CpStop::max_iters);
    if (stop) break;
  }
  res.converged = res.stop == CpStop::converged;
  res.log_likelihood = log_likelihood(*trees[0], m);
  if (std::isnan(res.log_likelihood)) {
    throw NumericalError(
        "CP-APR: the log-likelihood of the model is not a number (overflow: "
        "scale the counts down, or compute in float64)");
  }
  res.model.weights = m.lambda;
  for (int n = 0; n < order; ++n) {
    const index_t in = x.dim(n);
    Matrix<T> f(in, r);
    for (index_t i = 0; i < in; ++i)
      for (index_t j = 0; j < r; ++j)
        f(i, j) = m.a[static_cast<std::size_t>(n)][static_cast<std::size_t>(i * r + j)];
    res.model.factors.push_back(std::move(f));
  }
  detail::arrange(res.model);
  res.seconds = detail::seconds_since(start);
  return res;
}

template <class T>
CpAprResult<T> cp_apr(TensorView<const T> x, const CpAprOptions& options,
                      CpStart<T> initial_factors) {
  const auto start = detail::Clock::now();
  validate_apr_options(options);
  // The memory check of from_dense comes before the nonzeros are stored.
  CpAprResult<T> res = cp_apr(SparseTensor<T>::from_dense(x), options, initial_factors);
  res.seconds = detail::seconds_since(start);
  return res;
}

#define TENFOLD_INSTANTIATE_CP_APR(T)                                                         \
  template CpAprResult<T> cp_apr<T>(const SparseTensor<T>&, const CpAprOptions&, CpStart<T>); \
  template CpAprResult<T> cp_apr<T>(TensorView<const T>, const CpAprOptions&, CpStart<T>);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CP_APR)

}  // namespace tenfold
