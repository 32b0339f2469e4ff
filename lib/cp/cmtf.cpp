// Coupled matrix-tensor factorisation by ALS, as TensorLy 0.10's
// coupled_matrix_tensor_3d_factorization, every update one pass of the CP-ALS loop with
// the other factors fixed; missing entries by EM (MaskedOperand on Z = [X_(0), Y]),
// complete data without (DenseOperand on Z).
#include "tenfold/cmtf.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>

#include "core/memory.hpp"
#include "core/random.hpp"
#include "cp/cp_als.hpp"
#include "cp/dense_operand.hpp"
#include "cp/masked_operand.hpp"
#include "cp/mode_update.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace tenfold {
namespace detail {
namespace {

// I, J, K of the tensor and M of the matrix, in the caller's terms.
struct CmtfShape {
  index_t i = 0, j = 0, k = 0, m = 0;
  index_t cols() const { return j * k + m; }  // of Z = [X_(0), Y]
};

std::string triple(index_t a, index_t b, index_t c) {
  return std::to_string(a) + " x " + std::to_string(b) + " x " + std::to_string(c);
}

template <class T>
CmtfShape validate(TensorView<const T> x, TensorView<const T> y,
                   const TensorView<const std::uint8_t>* ox,
                   const TensorView<const std::uint8_t>* oy, const CmtfOptions& o,
                   CmtfStart<T> start) {
  const bool row_major = o.layout == Layout::row_major;
  if (x.order() != 3) {
    throw InvalidArgument("the tensor must be 3-way, got order " + std::to_string(x.order()));
  }
  if (y.order() != 2) {
    throw InvalidArgument("the matrix must be 2-D, got order " + std::to_string(y.order()));
  }
  CmtfShape s;
  s.i = x.dim(row_major ? 2 : 0);
  s.j = x.dim(1);
  s.k = x.dim(row_major ? 0 : 2);
  s.m = y.dim(row_major ? 0 : 1);
  const index_t yi = y.dim(row_major ? 1 : 0);
  if (s.i < 1 || s.j < 1 || s.k < 1 || s.m < 1) {
    throw InvalidArgument("the tensor (" + triple(s.i, s.j, s.k) + ") and the matrix (" +
                          std::to_string(yi) + " x " + std::to_string(s.m) +
                          ") need at least one entry along every mode");
  }
  if (yi != s.i) {
    throw DimensionMismatch("the matrix has " + std::to_string(yi) +
                            " rows, the tensor's first mode " + std::to_string(s.i) +
                            " (they share it)");
  }
  if (ox != nullptr && ox->dims() != x.dims()) {
    throw DimensionMismatch("the tensor's mask has another shape than the tensor (" +
                            triple(s.i, s.j, s.k) + ")");
  }
  if (oy != nullptr && oy->dims() != y.dims()) {
    throw DimensionMismatch("the matrix's mask has another shape than the matrix (" +
                            std::to_string(s.i) + " x " + std::to_string(s.m) + ")");
  }
  const std::vector<index_t> dims = {s.i, s.j, s.k};
  const index_t bound = max_cp_rank(dims);
  if (o.rank < 1 || o.rank > bound) {
    throw InvalidOption("rank", "must be between 1 and " + std::to_string(bound) +
                                    " (the tensor's largest CP rank), got " +
                                    std::to_string(o.rank));
  }
  if (o.max_iters < 1) {
    throw InvalidOption("max_iters", "must be >= 1, got " + std::to_string(o.max_iters));
  }
  if (!(o.tol >= 0.0)) throw InvalidOption("tol", "must be >= 0, got " + std::to_string(o.tol));
  const bool given = o.init == CmtfInit::given;
  if (given != !start.empty()) {
    throw InvalidArgument(given ? "init = given needs a start (A, B, C)"
                                : "a start (A, B, C) is given: init must be given");
  }
  if (o.init == CmtfInit::svd && std::max(s.i, std::max(s.j, s.k)) > kCpNvecsMaxSize) {
    throw InvalidArgument("init = svd forms each mode's Gram; a mode of size above " +
                          std::to_string(kCpNvecsMaxSize) + " needs init = random or a start");
  }
  if (!given) return s;
  if (start.size() != 3) {
    throw InvalidArgument("the start needs 3 factors (A, B, C), got " +
                          std::to_string(start.size()));
  }
  const char* names[3] = {"A", "B", "C"};
  for (std::size_t n = 0; n < 3; ++n) {
    if (start[n].rows() != dims[n] || start[n].cols() != o.rank) {
      throw DimensionMismatch(std::string("start factor ") + names[n] + " has shape " +
                              std::to_string(start[n].rows()) + " x " +
                              std::to_string(start[n].cols()) + ", expected " +
                              std::to_string(dims[n]) + " x " + std::to_string(o.rank));
    }
    for (index_t q = 0; q < start[n].size(); ++q) {
      if (!std::isfinite(start[n].data()[q])) {
        throw InvalidArgument(std::string("start factor ") + names[n] + " has a non-finite entry");
      }
    }
  }
  return s;
}

// Z(a, b + J c) = X(a, b, c) for an I x J x K block of either layout (the matrix: J = 1),
// observed entries only (mask null: all), into z (column-major, leading dimension I) and,
// with masks, a 1 into w; returns the observed entries' squared norm, or sets `bad` to the
// (a, b, c) of a non-finite observed entry. Plain locals, so that the byte stores of w do
// not make the compiler reload the sizes at every entry.
template <class T>
double gather(const T* x, const std::uint8_t* mask, bool row_major, index_t ni, index_t nj,
              index_t nk, T* z, std::uint8_t* w, std::array<index_t, 3>& bad) {
  double norm = 0.0;
  // Blocks of 8 rows a, c faster than b: row-major input is read in runs along c, Z
  // written in runs along a, either layout touching few cache lines at a time.
  constexpr index_t kRows = 8;
  for (index_t a0 = 0; a0 < ni; a0 += kRows) {
    const index_t a1 = std::min(ni, a0 + kRows);
    for (index_t b = 0; b < nj; ++b)
      for (index_t c = 0; c < nk; ++c)
        for (index_t a = a0; a < a1; ++a) {
          const index_t at = row_major ? c + nk * (b + nj * a) : a + ni * (b + nj * c);
          if (mask != nullptr && mask[at] == 0) continue;
          const T v = x[at];
          if (!std::isfinite(v)) {
            bad = {a, b, c};
            return norm;
          }
          const index_t to = a + ni * (b + nj * c);
          z[to] = v;
          if (w != nullptr) w[to] = 1;
          norm += static_cast<double>(v) * static_cast<double>(v);
        }
  }
  return norm;
}

// Z = [X_(0), Y] (I x (JK + M), column-major) and, with masks, its mask, on the host;
// observed entries checked finite. Returns ||W X||^2 and ||W Y||^2.
template <class T>
std::pair<double, double> couple(TensorView<const T> x, TensorView<const T> y,
                                 const TensorView<const std::uint8_t>* ox,
                                 const TensorView<const std::uint8_t>* oy, const CmtfShape& s,
                                 Layout layout, std::vector<T>& z, std::vector<std::uint8_t>& w) {
  const bool row_major = layout == Layout::row_major;
  z.assign(static_cast<std::size_t>(s.i * s.cols()), T(0));
  w.assign(ox != nullptr ? z.size() : 0, 0);
  const index_t off = s.i * s.j * s.k;
  std::uint8_t* wp = w.empty() ? nullptr : w.data();
  const std::string why =
      ox != nullptr ? " that its mask marks observed" : " (pass masks to treat it as missing)";
  std::array<index_t, 3> bad = {-1, -1, -1};
  const double nx = gather(x.data(), ox != nullptr ? ox->data() : nullptr, row_major, s.i, s.j, s.k,
                           z.data(), wp, bad);
  if (bad[0] >= 0) {
    throw InvalidArgument("the tensor has a non-finite entry at (" + std::to_string(bad[0]) + ", " +
                          std::to_string(bad[1]) + ", " + std::to_string(bad[2]) + ")" + why);
  }
  const double ny =
      gather(y.data(), oy != nullptr ? oy->data() : nullptr, row_major, s.i, index_t{1}, s.m,
             z.data() + off, wp != nullptr ? wp + off : nullptr, bad);
  if (bad[0] >= 0) {
    throw InvalidArgument("the matrix has a non-finite entry at (" + std::to_string(bad[0]) + ", " +
                          std::to_string(bad[2]) + ")" + why);
  }
  return {nx, ny};
}

// The leading r eigenvectors of an operand's mode-n Gram (largest first), scaled by the
// square roots of their eigenvalues with `scaled`; random columns in [0, 1) past I_n.
template <class T>
Matrix<T> leading_vectors(Compute<T>& c, CpOperand<T>& op, int n, index_t r, bool scaled,
                          Rng& rng) {
  const index_t in = op.dims()[static_cast<std::size_t>(n)];
  Buffer<T> g(c, static_cast<std::size_t>(in * in));
  std::vector<T> w(static_cast<std::size_t>(in));
  op.mode_gram(n, g.get());
  c.syevd(in, g.get(), in, w.data());
  Matrix<T> u(in, r);
  for (index_t q = 0; q < r; ++q) {
    if (q >= in) {
      for (index_t i = 0; i < in; ++i) u(i, q) = static_cast<T>(rng.uniform());
      continue;
    }
    c.download(u.col(q), g.get() + (in - 1 - q) * in, static_cast<std::size_t>(in));
    const T s = scaled ? std::sqrt(std::max(T(0), w[static_cast<std::size_t>(in - 1 - q)])) : T(1);
    for (index_t i = 0; i < in; ++i) u(i, q) *= s;
  }
  return u;
}

// W = [C (.) B; V] ((JK + M) x R): row b + J c of the top block is B(b, :) * C(c, :).
template <class T>
Matrix<T> coupled_factor(const Matrix<T>& b, const Matrix<T>& cm, const Matrix<T>& v) {
  const index_t j = b.rows(), k = cm.rows(), m = v.rows(), r = b.cols();
  Matrix<T> w(j * k + m, r);
  for (index_t q = 0; q < r; ++q) {
    for (index_t c = 0; c < k; ++c)
      for (index_t a = 0; a < j; ++a) w(a + j * c, q) = b(a, q) * cm(c, q);
    for (index_t a = 0; a < m; ++a) w(j * k + a, q) = v(a, q);
  }
  return w;
}

template <class T>
CmtfResult<T> run_cmtf(TensorView<const T> x, TensorView<const T> y,
                       const TensorView<const std::uint8_t>* ox,
                       const TensorView<const std::uint8_t>* oy, const CmtfOptions& o,
                       CmtfStart<T> start) {
  const auto t0 = Clock::now();
  const CmtfShape s = validate(x, y, ox, oy, o, start);
  auto c = make_compute<T>(o.backend);
  const bool masked = ox != nullptr;
  // Z (and its mask) on the host, the masked operand's four copies of Z or the plain
  // operand's device copy, the coupled factor W ((JK + M) x R) on the host and in the loop
  const double zsize = static_cast<double>(s.i) * static_cast<double>(s.cols());
  require_memory(*c,
                 (masked ? 6.0 : 2.0) * zsize +
                     3.0 * static_cast<double>(s.cols()) * static_cast<double>(o.rank),
                 "CMTF at rank " + std::to_string(o.rank));
  std::vector<T> zh;
  std::vector<std::uint8_t> wh;
  const auto [nx, ny] = couple(x, y, ox, oy, s, o.layout, zh, wh);
  if (nx == 0.0 || ny == 0.0) {
    throw InvalidArgument(std::string("the ") + (nx == 0.0 ? "tensor" : "matrix") +
                          " is zero (every observed entry is 0)");
  }
  if (!std::isfinite(nx + ny)) {
    throw NumericalError("the squared norm of the data overflows double; scale it down");
  }
  // Z as an operand (with masks: its filled copy, EM), and the operands that view its two
  // blocks
  std::optional<MaskedOperand<T>> zm;
  std::optional<DenseOperand<T>> zd;
  if (masked) {
    zm.emplace(*c, TensorView<const T>(zh.data(), {s.i, s.cols()}),
               TensorView<const std::uint8_t>(wh.data(), {s.i, s.cols()}));
    std::vector<T>().swap(zh);
    std::vector<std::uint8_t>().swap(wh);
  } else {
    zd.emplace(*c, TensorView<const T>(zh.data(), {s.i, s.cols()}));  // views zh on the host
  }
  CpOperand<T>& z = masked ? static_cast<CpOperand<T>&>(*zm) : *zd;
  const T* zdata = masked ? zm->filled() : zd->data();
  DenseOperand<T> xo(*c, zdata, {s.i, s.j, s.k});
  DenseOperand<T> yo(*c, zdata + s.i * s.j * s.k, {s.i, s.m});
  const index_t r = o.rank;
  std::vector<Matrix<T>> f(3);  // A, B, C
  Rng rng(o.seed);
  if (o.init == CmtfInit::given) {
    f.assign(start.begin(), start.end());
  } else if (o.init == CmtfInit::random) {
    for (int n = 0; n < 3; ++n) {
      f[static_cast<std::size_t>(n)] = Matrix<T>(xo.dims()[static_cast<std::size_t>(n)], r);
      for (T& v : f[static_cast<std::size_t>(n)].values()) v = static_cast<T>(rng.uniform());
    }
  } else {
    // B, C: leading eigenvectors of the tensor's mode Grams; A: of Z Z^T, scaled
    f[1] = leading_vectors(*c, xo, 1, r, false, rng);
    f[2] = leading_vectors(*c, xo, 2, r, false, rng);
    f[0] = leading_vectors(*c, z, 0, r, true, rng);
  }
  Matrix<T> v(s.m, r);
  const double norm = std::sqrt(nx + ny);
  CmtfResult<T> res;
  double e_old = 0.0, e_new = 0.0;
  for (int it = 0; it < o.max_iters; ++it) {
    if (masked) {  // EM changed the missing entries (without masks: none to change)
      xo.data_changed();
      yo.data_changed();
    }
    // V = Y^T A (A^T A)^{-1}  (Y ~ A V^T, A fixed)
    const std::vector<Matrix<T>> av = {f[0], std::move(v)};
    v = update_one_mode(yo, *c, std::span<const Matrix<T>>(av), 1, o.backend).factor;
    // C, then B: X ~ [[A, B, C]], the others fixed. B and A changed since (A last: C's
    // MTTKRP then contracts X with A, and B's finishes from the same contraction)
    xo.factor_changed(1);
    xo.factor_changed(0);
    f[2] = update_one_mode(xo, *c, std::span<const Matrix<T>>(f), 2, o.backend, false,
                           FactorsSeen::reported)
               .factor;
    f[1] = update_one_mode(xo, *c, std::span<const Matrix<T>>(f), 1, o.backend, false,
                           FactorsSeen::reported)
               .factor;
    // A: Z ~ A W^T, W = [C (.) B; V]; the pass ends with the missing entries of Z set to
    // A W^T (EM) and the error ||W (Z - A W^T)|| over the observed ones
    const std::vector<Matrix<T>> aw = {f[0], coupled_factor(f[1], f[2], v)};
    ModeUpdate<T> a = update_one_mode(z, *c, std::span<const Matrix<T>>(aw), 0, o.backend);
    f[0] = std::move(a.factor);
    e_new = a.relative_error * norm * a.relative_error * norm;
    res.iterations = it + 1;
    if (it > 0 && (std::abs(e_new - e_old) <= o.tol * e_old || e_new < o.tol)) {
      res.converged = true;
      break;
    }
    e_old = e_new;
    res.error_history.push_back(e_new);
  }
  res.relative_error = std::sqrt(e_new) / norm;
  res.tensor_model = KTensor<T>(std::vector<T>(static_cast<std::size_t>(r), T(1)), f);
  res.matrix_model = KTensor<T>(std::vector<T>(static_cast<std::size_t>(r), T(1)),
                                {std::move(f[0]), std::move(v)});
  res.seconds = seconds_since(t0);
  return res;
}

}  // namespace
}  // namespace detail

template <class T>
CmtfResult<T> cmtf(TensorView<const T> x, TensorView<const T> y, const CmtfOptions& options,
                   CmtfStart<T> start) {
  return detail::run_cmtf<T>(x, y, nullptr, nullptr, options, start);
}

template <class T>
CmtfResult<T> cmtf(TensorView<const T> x, TensorView<const T> y,
                   TensorView<const std::uint8_t> observed_x,
                   TensorView<const std::uint8_t> observed_y, const CmtfOptions& options,
                   CmtfStart<T> start) {
  return detail::run_cmtf<T>(x, y, &observed_x, &observed_y, options, start);
}

#define TENFOLD_INSTANTIATE_CMTF(T)                                                              \
  template CmtfResult<T> cmtf<T>(TensorView<const T>, TensorView<const T>, const CmtfOptions&,   \
                                 CmtfStart<T>);                                                  \
  template CmtfResult<T> cmtf<T>(TensorView<const T>, TensorView<const T>,                       \
                                 TensorView<const std::uint8_t>, TensorView<const std::uint8_t>, \
                                 const CmtfOptions&, CmtfStart<T>);
TENFOLD_INSTANTIATE_CMTF(float)
TENFOLD_INSTANTIATE_CMTF(double)

}  // namespace tenfold
