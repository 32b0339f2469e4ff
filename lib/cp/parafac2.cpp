// PARAFAC2 by ALS (Kiers, ten Berge and Bro 1999), as TensorLy 0.10's parafac2: per outer
// iteration the projections P_k (orthogonal Procrustes), the projected tensor Y, and a few
// sweeps of its CP through the CP-ALS loop; Bro's line search, EM for missing entries.
#include "tenfold/parafac2.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/memory.hpp"
#include "core/random.hpp"
#include "cp/cp_als.hpp"
#include "cp/dense_operand.hpp"
#include "cp/mode_update.hpp"
#include "cp/parafac2_steps.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace tenfold {
namespace detail {
namespace {

std::string shape_of(index_t rows, index_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

// (I_k, J) of slice view s in the caller's terms
std::pair<index_t, index_t> slice_shape(const auto& s, Layout layout) {
  return layout == Layout::row_major ? std::pair{s.dim(1), s.dim(0)}
                                     : std::pair{s.dim(0), s.dim(1)};
}

template <class T>
void validate(std::span<const TensorView<const T>> slices,
              std::span<const TensorView<const std::uint8_t>> observed, const Parafac2Options& o,
              Parafac2Start<T> start) {
  if (slices.empty()) throw InvalidArgument("parafac2 needs at least one slice, got none");
  index_t j = 0;
  for (std::size_t k = 0; k < slices.size(); ++k) {
    if (slices[k].order() != 2) {
      throw InvalidArgument("slice " + std::to_string(k) + " must be a matrix (2-D), got order " +
                            std::to_string(slices[k].order()));
    }
    const auto [ik, jk] = slice_shape(slices[k], o.layout);
    if (ik < 1 || jk < 1) {
      throw InvalidArgument("slice " + std::to_string(k) + " is empty (shape " + shape_of(ik, jk) +
                            ")");
    }
    if (k == 0) j = jk;
    if (jk != j) {
      throw DimensionMismatch("slice " + std::to_string(k) + " has " + std::to_string(jk) +
                              " columns, slice 0 has " + std::to_string(j) +
                              " (every slice needs the same column count J)");
    }
  }
  if (!observed.empty()) {
    if (observed.size() != slices.size()) {
      throw DimensionMismatch("got " + std::to_string(observed.size()) + " masks for " +
                              std::to_string(slices.size()) + " slices");
    }
    for (std::size_t k = 0; k < slices.size(); ++k) {
      if (observed[k].dims() != slices[k].dims()) {
        const auto [ik, jk] = slice_shape(slices[k], o.layout);
        const bool matrix = observed[k].order() == 2;
        const auto [mi, mj] =
            matrix ? slice_shape(observed[k], o.layout) : std::pair<index_t, index_t>{0, 0};
        throw DimensionMismatch(
            "mask " + std::to_string(k) + " has shape " +
            (matrix ? shape_of(mi, mj) : "of order " + std::to_string(observed[k].order())) +
            ", slice " + std::to_string(k) + " " + shape_of(ik, jk));
      }
    }
  }
  if (o.rank < 1 || o.rank > j) {
    throw InvalidOption("rank", "must be between 1 and the slices' column count J = " +
                                    std::to_string(j) + ", got " + std::to_string(o.rank));
  }
  if (o.init == Parafac2Init::svd && j > kCpNvecsMaxSize) {
    throw InvalidArgument(
        "init = svd forms the J x J cross product of the slices; J = " + std::to_string(j) +
        " is above " + std::to_string(kCpNvecsMaxSize) + ": start at random or from given factors");
  }
  if (o.max_iters < 0) {
    throw InvalidOption("max_iters", "must be >= 0, got " + std::to_string(o.max_iters));
  }
  if (o.inner_iters < 1) {
    throw InvalidOption("inner_iters", "must be >= 1, got " + std::to_string(o.inner_iters));
  }
  if (!(o.tol >= 0.0)) throw InvalidOption("tol", "must be >= 0, got " + std::to_string(o.tol));
  for (int n : o.nonnegative_modes) {
    if (n < 0 || n > 2) {
      throw InvalidOption("nonnegative_modes",
                          "must hold modes 0 (A), 1 (B) or 2 (C), got " + std::to_string(n));
    }
  }
  const bool given = o.init == Parafac2Init::given;
  if (given != !start.empty()) {
    throw InvalidArgument(given ? "init = given needs a start (A, B, C)"
                                : "a start (A, B, C) is given: init must be given");
  }
  if (!given) return;
  if (start.size() != 3) {
    throw InvalidArgument("the start needs 3 factors (A, B, C), got " +
                          std::to_string(start.size()));
  }
  const index_t r = o.rank;
  const index_t want[3][2] = {{static_cast<index_t>(slices.size()), r}, {r, r}, {j, r}};
  const char* names[3] = {"A", "B", "C"};
  for (std::size_t n = 0; n < 3; ++n) {
    if (start[n].rows() != want[n][0] || start[n].cols() != want[n][1]) {
      throw DimensionMismatch(std::string("start factor ") + names[n] + " has shape " +
                              shape_of(start[n].rows(), start[n].cols()) + ", expected " +
                              shape_of(want[n][0], want[n][1]));
    }
    for (index_t i = 0; i < start[n].size(); ++i) {
      if (!std::isfinite(start[n].data()[i])) {
        throw InvalidArgument(std::string("start factor ") + names[n] + " has a non-finite entry");
      }
    }
  }
}

template <class T>
Parafac2Factors<T> make_start(Parafac2Steps<T>& steps, const Parafac2Options& o, index_t k,
                              index_t j, Parafac2Start<T> start) {
  const index_t r = o.rank;
  Parafac2Factors<T> f;
  f.by_mode.resize(3);
  if (o.init == Parafac2Init::given) {
    f.a() = start[0];
    f.b() = start[1];
    f.c() = start[2];
  } else if (o.init == Parafac2Init::random) {
    Rng rng(o.seed);
    f.a() = Matrix<T>(k, r);
    f.b() = Matrix<T>(r, r);
    f.c() = Matrix<T>(j, r);
    for (int n : {2, 0, 1})
      for (T& v :
           std::span<T>(f.by_mode[static_cast<std::size_t>(n)].data(),
                        static_cast<std::size_t>(f.by_mode[static_cast<std::size_t>(n)].size())))
        v = static_cast<T>(rng.uniform());
  } else {
    // A = ones, B = I, C = the leading eigenvectors of sum_k X_k^T X_k
    f.a() = Matrix<T>(k, r, std::vector<T>(static_cast<std::size_t>(k * r), T(1)));
    f.b() = Matrix<T>(r, r);
    for (index_t i = 0; i < r; ++i) f.b()(i, i) = T(1);
    f.c() = steps.leading_column_space(r);
  }
  return f;
}

// The modes of Y (R x J x K) are B, C, A; PARAFAC2's modes 0, 1, 2 are A, B, C.
constexpr int kYMode[3] = {2, 0, 1};

// `inner_iters` sweeps of the CP of Y, each updating A, B, C in turn (as TensorLy's
// parafac with normalize_factors=False), every factor at the scale of TensorLy's
// unnormalised update.
template <class T>
void inner_sweeps(Compute<T>& c, DenseOperand<T>& y, Parafac2Factors<T>& f,
                  const Parafac2Options& o, const std::vector<bool>& nonnegative) {
  for (int sweep = 0; sweep < o.inner_iters; ++sweep) {
    for (int mode = 0; mode < 3; ++mode) {
      const int n = kYMode[mode];
      f.by_mode[static_cast<std::size_t>(n)] =
          update_one_mode(y, c, std::span<const Matrix<T>>(f.by_mode), n, o.backend,
                          nonnegative[static_cast<std::size_t>(mode)])
              .factor;
    }
  }
}

// TensorLy's cp_normalize: unit columns, the norms into the weights (zero columns stay).
template <class T>
void normalize(Parafac2Factors<T>& f, std::vector<T>& weights) {
  for (Matrix<T>& m : f.by_mode) {
    for (index_t q = 0; q < m.cols(); ++q) {
      double s = 0.0;
      for (index_t i = 0; i < m.rows(); ++i) s += static_cast<double>(m(i, q)) * m(i, q);
      const double norm = std::sqrt(s);
      weights[static_cast<std::size_t>(q)] *= static_cast<T>(norm);
      if (norm == 0.0) continue;
      for (index_t i = 0; i < m.rows(); ++i) m(i, q) = static_cast<T>(m(i, q) / norm);
    }
  }
}

// Bro's line search as TensorLy's _BroThesisLineSearch.
struct JumpRule {
  double power = 2.0;
  int failures = 0;
};

template <class T>
Parafac2Result<T> run_parafac2(Compute<T>& c, Parafac2Slices<T>& x, const Parafac2Options& o,
                               Parafac2Start<T> start, Clock::time_point t0) {
  const index_t r = o.rank;
  Parafac2Result<T> res;
  if (x.norm2() == 0.0) {
    throw InvalidArgument(
        "the slices are zero (every observed entry is 0): the relative error is undefined");
  }
  if (!std::isfinite(x.norm2())) {
    throw NumericalError("the squared norm of the slices overflows double; scale them down");
  }
  const double norm = std::sqrt(x.norm2());
  Parafac2Steps<T> steps(c, x, r);
  Parafac2Factors<T> f = make_start(steps, o, x.count(), x.cols(), start);
  std::vector<T> weights(static_cast<std::size_t>(r), T(1));
  std::vector<bool> nonnegative(3, false);
  for (int n : o.nonnegative_modes) nonnegative[static_cast<std::size_t>(n)] = true;
  Parafac2Projection<T> pr = steps.make_projection(), jump = steps.make_projection();
  DenseOperand<T> y(c, pr.y.get(), {r, x.cols(), x.count()});
  const auto relative = [&](double e2) { return std::sqrt(std::max(0.0, e2)) / norm; };
  JumpRule rule;
  if (o.max_iters == 0) steps.project(f, pr);
  for (int it = 0; it < o.max_iters; ++it) {
    // B takes the weights (TensorLy's start of an iteration)
    for (index_t q = 0; q < r; ++q) {
      for (index_t i = 0; i < r; ++i) f.b()(i, q) *= weights[static_cast<std::size_t>(q)];
      weights[static_cast<std::size_t>(q)] = T(1);
    }
    const bool line_iter = o.line_search && it % 2 == 0 && it > 5;
    const Parafac2Factors<T> last = line_iter ? f : Parafac2Factors<T>();
    // P_k by Procrustes, Y_k = P_k^T X_k, then the CP of Y
    steps.project(f, pr);
    y.data_changed();
    inner_sweeps(c, y, f, o, nonnegative);
    if (line_iter) {
      // F_jump = F_last + j (F - F_last), j = it^(1/p); non-negative A and C clipped
      const double step = std::pow(static_cast<double>(it), 1.0 / rule.power);
      Parafac2Factors<T> cand = f;
      for (int mode = 0; mode < 3; ++mode) {
        const auto n = static_cast<std::size_t>(kYMode[mode]);
        const bool clip = nonnegative[static_cast<std::size_t>(mode)] && mode != 1;
        T* v = cand.by_mode[n].data();
        const T* p = last.by_mode[n].data();
        for (index_t i = 0; i < cand.by_mode[n].size(); ++i) {
          v[i] = static_cast<T>(p[i] + (v[i] - p[i]) * step);
          if (clip) v[i] = std::max(v[i], T(0));
        }
      }
      steps.project(cand, jump);
      const double e = relative(steps.error2(cand, jump, false));
      if (e < res.error_history.back()) {
        rule.failures = 0;
        ++res.line_search_accepted;
        f = std::move(cand);
        // (copied: the operand y views pr.y)
        c.copy(pr.p.get(), jump.p.get(), pr.p.size());
        c.copy(pr.y.get(), jump.y.get(), pr.y.size());
        pr.host = jump.host;
        pr.q = jump.q;
        pr.formed = jump.formed;
        res.error_history.back() = e;
      } else if (++rule.failures == 4) {
        rule.power += 1.0;
        rule.failures = 0;
      }
    }
    // Missing entries take the model's values; the error (over the observed entries)
    double e2 = -1.0;
    if (x.masked()) e2 = steps.error2(f, pr, true);
    if (!line_iter) {
      if (e2 < 0.0) e2 = steps.error2(f, pr, false);
      const double e = relative(e2);
      if (!std::isfinite(e)) {
        throw NumericalError("PARAFAC2 produced a non-finite error at iteration " +
                             std::to_string(it + 1) + " (overflow: scale the slices down)");
      }
      res.error_history.push_back(e);
    }
    if (o.normalize) normalize(f, weights);
    res.iterations = it + 1;
    const auto& h = res.error_history;
    if (o.tol > 0.0 && it >= 1 && std::abs(h[h.size() - 2] - h.back()) < o.tol) {
      res.converged = true;
      break;
    }
  }
  // The returned model's error (Y is its projections'), and its P_k formed
  steps.materialise(pr);
  Parafac2Factors<T> folded = f;
  for (index_t q = 0; q < r; ++q)
    for (index_t i = 0; i < x.count(); ++i)
      folded.a()(i, q) *= weights[static_cast<std::size_t>(q)];
  res.relative_error = relative(steps.error2(folded, pr, false));
  res.model.weights = weights;
  res.model.a = std::move(f.a());
  res.model.b = std::move(f.b());
  res.model.c = std::move(f.c());
  for (index_t k = 0; k < x.count(); ++k) {
    Matrix<T> p(x.rows(k), r);
    for (index_t q = 0; q < r; ++q)
      for (index_t i = 0; i < x.rows(k); ++i)
        p(i, q) = pr.host[static_cast<std::size_t>(x.offset(k) + i + x.rows() * q)];
    res.model.projections.push_back(std::move(p));
  }
  res.seconds = seconds_since(t0);
  return res;
}

}  // namespace
}  // namespace detail

template <class T>
Parafac2Result<T> parafac2(std::span<const TensorView<const T>> slices,
                           std::span<const TensorView<const std::uint8_t>> observed,
                           const Parafac2Options& options, Parafac2Start<T> start) {
  const auto t0 = detail::Clock::now();
  detail::validate(slices, observed, options, start);
  auto c = detail::make_compute<T>(options.backend);
  // The slices' copies (with masks: the filled slices, W X, W, the model and a residual;
  // without: the stacked slices and R_k), X C, the projections and Y (two sets).
  double n = 0.0, j = 0.0;
  for (const auto& s : slices) {
    const auto [ik, jk] = detail::slice_shape(s, options.layout);
    n += static_cast<double>(ik);
    j = static_cast<double>(jk);
  }
  const double r = static_cast<double>(options.rank), k = static_cast<double>(slices.size());
  detail::require_memory(*c, (observed.empty() ? 2.0 : 5.0) * n * j + 3.0 * n * r + 2.0 * r * j * k,
                         "PARAFAC2 of " + std::to_string(slices.size()) + " slices at rank " +
                             std::to_string(options.rank));
  detail::Parafac2Slices<T> x(*c, slices, observed, options.layout);
  return detail::run_parafac2(*c, x, options, start, t0);
}

template <class T>
Parafac2Result<T> parafac2(std::span<const TensorView<const T>> slices,
                           const Parafac2Options& options, Parafac2Start<T> start) {
  return parafac2<T>(slices, {}, options, start);
}

#define TENFOLD_INSTANTIATE_PARAFAC2(T)                                                   \
  template Parafac2Result<T> parafac2<T>(std::span<const TensorView<const T>>,            \
                                         const Parafac2Options&, Parafac2Start<T>);       \
  template Parafac2Result<T> parafac2<T>(std::span<const TensorView<const T>>,            \
                                         std::span<const TensorView<const std::uint8_t>>, \
                                         const Parafac2Options&, Parafac2Start<T>);
TENFOLD_INSTANTIATE_PARAFAC2(float)
TENFOLD_INSTANTIATE_PARAFAC2(double)

}  // namespace tenfold
