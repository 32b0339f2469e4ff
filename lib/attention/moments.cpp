#include "attention/moments.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

void validate_moment(const Matrix<double>& s, index_t input_dim, std::string_view what,
                     double eps) {
  const std::string name(what);
  const index_t n = s.rows();
  if (n != input_dim || s.cols() != input_dim) {
    throw DimensionMismatch(name + " is " + std::to_string(n) + "x" + std::to_string(s.cols()) +
                            ", expected D x D = " + std::to_string(input_dim) + "x" +
                            std::to_string(input_dim));
  }
  check_finite(TensorView<const double>(s.data(), {n, n}), name.c_str());
  double diag = 0.0;
  for (index_t i = 0; i < n; ++i) diag = std::max(diag, std::abs(s(i, i)));
  if (!(diag > 0.0)) throw InvalidArgument(name + " has a zero diagonal: no input was seen");
  // Round-off of a D-term sum in precision eps, relative to the largest diagonal entry
  // (which bounds every entry of a positive semi-definite matrix).
  const double tol = 4.0 * static_cast<double>(n) * eps * diag;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = j + 1; i < n; ++i)
      if (std::abs(s(i, j) - s(j, i)) > tol) {
        throw InvalidArgument(name + " is not symmetric: entry (" + std::to_string(i) + ", " +
                              std::to_string(j) + ") is " + number(s(i, j)) + ", entry (" +
                              std::to_string(j) + ", " + std::to_string(i) + ") is " +
                              number(s(j, i)));
      }
  // Positive semi-definite to tol: the Cholesky factorisation of the symmetric part plus
  // tol I exists when its smallest eigenvalue exceeds -tol; only when it does not is the
  // smallest eigenvalue computed (for the message, and to decide the borderline case).
  const auto host = detail::host_compute();
  tenfold::detail::Compute<double>& c = *host;
  Matrix<double> a(n, n);
  const auto symmetric_part = [&] {
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < n; ++i) a(i, j) = 0.5 * (s(i, j) + s(j, i));
  };
  symmetric_part();
  c.add_diagonal(n, a.data(), n, tol);
  if (c.potrf(n, a.data(), n)) return;
  symmetric_part();
  std::vector<double> lambda(static_cast<std::size_t>(n));
  c.syevd(n, a.data(), n, lambda.data());
  if (lambda.front() < -tol) {
    throw InvalidArgument(name + " is not positive semi-definite: smallest eigenvalue " +
                          number(lambda.front()) + " against largest " + number(lambda.back()));
  }
}

namespace detail {

bool is_scaled_identity(const Matrix<double>& s) {
  for (index_t j = 0; j < s.cols(); ++j)
    for (index_t i = 0; i < s.rows(); ++i)
      if (s(i, j) != (i == j ? s(0, 0) : 0.0)) return false;
  return true;
}

Matrix<double> damped_cholesky(const Matrix<double>& s, double damping, std::string_view what) {
  const auto host = host_compute();
  tenfold::detail::Compute<double>& c = *host;
  const index_t n = s.rows();
  Matrix<double> l(n, n);
  double trace = 0.0;
  for (index_t i = 0; i < n; ++i) trace += s(i, i);
  // Symmetric part of S, plus damping tr(S) / D on the diagonal.
  for (index_t j = 0; j < n; ++j)
    for (index_t i = j; i < n; ++i) l(i, j) = 0.5 * (s(i, j) + s(j, i));
  c.add_diagonal(n, l.data(), n, damping * trace / static_cast<double>(n));
  if (!c.potrf(n, l.data(), n)) {
    throw NumericalError(std::string(what) + " is singular (not positive definite with damping " +
                         number(damping) + "): use a damping > 0");
  }
  return l;
}

Matrix<double> psd_factor(const Matrix<double>& s) {
  const auto host = host_compute();
  tenfold::detail::Compute<double>& c = *host;
  const index_t n = s.rows();
  Matrix<double> f(n, n);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) f(i, j) = 0.5 * (s(i, j) + s(j, i));
  // S = V diag(lambda) V^T, F = V diag(sqrt(lambda)) (negative round-off clipped to zero)
  std::vector<double> lambda(static_cast<std::size_t>(n));
  c.syevd(n, f.data(), n, lambda.data());
  for (index_t j = 0; j < n; ++j) {
    const double root = std::sqrt(std::max(lambda[static_cast<std::size_t>(j)], 0.0));
    for (index_t i = 0; i < n; ++i) f(i, j) *= root;
  }
  return f;
}

Matrix<double> transform(const Matrix<double>& f, const Matrix<double>& w) {
  const auto host = host_compute();
  tenfold::detail::Compute<double>& c = *host;
  Matrix<double> out(f.cols(), w.cols());
  c.gemm(tenfold::detail::Op::trans, tenfold::detail::Op::none, f.cols(), w.cols(), f.rows(), 1.0,
         f.data(), f.rows(), w.data(), w.rows(), 0.0, out.data(), out.rows());
  return out;
}

template <class T>
QueryKeyLayer<T> whitened(const QueryKeyLayer<T>& layer, const Matrix<double>& lq,
                          const Matrix<double>& lk) {
  const auto cast = [](const Matrix<double>& m) {
    Matrix<T> out(m.rows(), m.cols());
    std::transform(m.values().begin(), m.values().end(), out.values().begin(),
                   [](double v) { return static_cast<T>(v); });
    return out;
  };
  QueryKeyLayer<T> w;
  w.heads = layer.heads;
  w.head_dim = layer.head_dim;
  w.query_weight = cast(transform(lq, AsDouble(layer.query_weight).get()));
  w.key_weight = cast(transform(lk, AsDouble(layer.key_weight).get()));
  return w;
}

template <class T>
void unwhiten(CollaborativeLayer<T>& collab, const Matrix<double>& lq, const Matrix<double>& lk) {
  const auto host = host_compute();
  tenfold::detail::Compute<double>& c = *host;
  const index_t rows = collab.input_dim(), r = collab.rank();
  std::vector<double> scale(static_cast<std::size_t>(r), 1.0);
  Matrix<double> ft(r, rows);
  for (auto [f, l] : {std::pair{&collab.query, &lq}, std::pair{&collab.key, &lk}}) {
    // L^{-T} F' = (F'^T L^{-1})^T: a right-side solve on the transpose
    for (index_t j = 0; j < r; ++j)
      for (index_t i = 0; i < rows; ++i) ft(j, i) = static_cast<double>((*f)(i, j));
    c.solve_lower_right(tenfold::detail::Op::none, rows, l->data(), rows, r, ft.data(), r);
    for (index_t j = 0; j < r; ++j) {
      double norm2 = 0.0;
      for (index_t i = 0; i < rows; ++i) norm2 += ft(j, i) * ft(j, i);
      const double norm = norm2 > 0.0 ? std::sqrt(norm2) : 1.0;
      scale[static_cast<std::size_t>(j)] *= norm;
      for (index_t i = 0; i < rows; ++i) (*f)(i, j) = static_cast<T>(ft(j, i) / norm);
    }
  }
  for (index_t j = 0; j < r; ++j)
    for (index_t h = 0; h < collab.heads(); ++h)
      collab.mixing(h, j) = static_cast<T>(static_cast<double>(collab.mixing(h, j)) *
                                           scale[static_cast<std::size_t>(j)]);
}

template QueryKeyLayer<float> whitened<float>(const QueryKeyLayer<float>&, const Matrix<double>&,
                                              const Matrix<double>&);
template QueryKeyLayer<double> whitened<double>(const QueryKeyLayer<double>&, const Matrix<double>&,
                                                const Matrix<double>&);
template void unwhiten<float>(CollaborativeLayer<float>&, const Matrix<double>&,
                              const Matrix<double>&);
template void unwhiten<double>(CollaborativeLayer<double>&, const Matrix<double>&,
                               const Matrix<double>&);

}  // namespace detail
}  // namespace tenfold::attention
