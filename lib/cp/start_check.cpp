#include "cp/start_check.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <type_traits>

#include "core/compute.hpp"
#include "core/instantiate.hpp"
#include "core/layout.hpp"
#include "core/scalar.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

// Initial factor n as the caller numbers it: by mode, or by NumPy axis for row-major input.
std::string factor_name(int n, int order, Layout layout) {
  if (layout == Layout::col_major) return "initial factor " + std::to_string(n);
  return "initial factor of NumPy axis " + std::to_string(order - 1 - n) + " (mode " +
         std::to_string(n) + ")";
}

// Modes the first update reads, in sweep (NumPy axis) order: all but that of axis 0.
std::vector<int> modes_read_first(int order, Layout layout) {
  std::vector<int> read;
  for (int axis = 1; axis < order; ++axis) read.push_back(array_axis(layout, order, axis));
  return read;
}

template <class T>
bool zero_column(const Matrix<T>& f, index_t j) {
  return std::all_of(f.col(j), f.col(j) + f.rows(), [](T v) { return v == T(0); });
}

}  // namespace

template <class T>
std::vector<index_t> stuck_components(std::span<const Matrix<T>> factors, index_t rank,
                                      const std::vector<int>& read) {
  const index_t r = rank;
  const auto rr = static_cast<std::size_t>(r * r);
  // In double, or complex double for complex factors.
  using D = std::conditional_t<is_complex_v<T>, std::complex<double>, double>;
  const auto compute = make_compute<D>(Backend::cpu);  // host memory
  Compute<D>& c = *compute;
  // C = *_m (unit columns of U_m)^T conj(unit columns of U_m): conj(K^H K) for K's columns
  // scaled to unit norm (a zero column stays zero); its pivots are those of K^H K.
  std::vector<D> cosines(rr, D(1)), unit, gram(rr);
  std::vector<bool> zero(static_cast<std::size_t>(r), false);
  double rows = 1.0;  // rows of K, in double (the product can exceed index_t)
  for (int n : read) {
    const Matrix<T>& f = factors[static_cast<std::size_t>(n)];
    unit.assign(static_cast<std::size_t>(f.size()), D(0));
    for (index_t j = 0; j < r; ++j) {
      // Scaled by the largest magnitude first, so that no square overflows or underflows.
      double peak = 0.0;
      for (index_t i = 0; i < f.rows(); ++i)
        peak = std::max(peak, static_cast<double>(std::abs(f(i, j))));
      if (peak == 0.0) {
        zero[static_cast<std::size_t>(j)] = true;
        continue;
      }
      double s = 0.0;
      for (index_t i = 0; i < f.rows(); ++i) s += abs2(D(f(i, j)) / peak);
      s = std::sqrt(s);
      for (index_t i = 0; i < f.rows(); ++i)
        unit[static_cast<std::size_t>(i + j * f.rows())] = D(f(i, j)) / peak / s;
    }
    c.syrk(Op::trans, r, f.rows(), D(1), unit.data(), f.rows(), D(0), gram.data(), r);
    c.hadamard(rr, gram.data(), cosines.data());
    rows *= static_cast<double>(f.rows());
  }
  std::vector<index_t> stuck;
  if (static_cast<double>(r) > rows) {
    // Dependence is unavoidable for every start: only zero columns are stuck.
    for (index_t j = 0; j < r; ++j)
      if (zero[static_cast<std::size_t>(j)]) stuck.push_back(j);
    return stuck;
  }
  // Column j of K is dependent when its pivot in the Cholesky factor of C (its squared
  // distance from the span of the earlier unit columns) is <= delta. Every pivot is at
  // least the smallest eigenvalue of C, so a successful Cholesky of C - delta I (the
  // usual case, one LAPACK call) means that none is.
  const double delta = static_cast<double>(r) * 64.0 * std::numeric_limits<double>::epsilon();
  std::vector<D> l = cosines;
  c.add_diagonal(r, l.data(), r, D(-delta));
  if (c.potrf(r, l.data(), r)) return stuck;
  // Left-looking Cholesky C = L L^H that leaves a zero column for each dependent column.
  l = cosines;
  const auto at = [r](index_t i, index_t j) { return static_cast<std::size_t>(i + j * r); };
  for (index_t j = 0; j < r; ++j) {
    double d = real_part(l[at(j, j)]);
    for (index_t k = 0; k < j; ++k) d -= abs2(l[at(j, k)]);
    if (d <= delta) {
      stuck.push_back(j);
      for (index_t i = j; i < r; ++i) l[at(i, j)] = D(0);
      continue;
    }
    const double ljj = std::sqrt(d);
    l[at(j, j)] = D(ljj);
    for (index_t i = j + 1; i < r; ++i) {
      D v = l[at(i, j)];
      for (index_t k = 0; k < j; ++k) v -= l[at(i, k)] * conj_value(l[at(j, k)]);
      l[at(i, j)] = v / ljj;
    }
  }
  return stuck;
}

// A given start must let the ALS move (see stuck_components): zero columns are named
// by factor and column, dependent components by the first one.
template <class T>
void check_start_can_move(const CpOptions& o, std::span<const Matrix<T>> initial_factors,
                          const std::vector<index_t>& dims) {
  const int order = static_cast<int>(dims.size());
  const std::vector<int> read = modes_read_first(order, o.layout);
  for (int n : read) {
    const Matrix<T>& f = initial_factors[static_cast<std::size_t>(n)];
    for (index_t j = 0; j < f.cols(); ++j) {
      if (zero_column(f, j)) {
        throw InvalidArgument(factor_name(n, order, o.layout) + ": column " + std::to_string(j) +
                              " is zero, so component " + std::to_string(j) +
                              " could never leave zero; give a start with nonzero columns");
      }
    }
  }
  const std::vector<index_t> stuck = stuck_components(initial_factors, o.rank, read);
  if (stuck.empty()) return;
  std::string axes = "1";
  for (int axis = 2; axis < order; ++axis) axes += ", " + std::to_string(axis);
  throw InvalidArgument("component " + std::to_string(stuck[0]) +
                        " of the initial factors is a linear combination of the components "
                        "before it in the factors the first update reads (NumPy axes " +
                        axes +
                        "; e.g. two components equal there), and CP-ALS can never separate "
                        "them; give a start with independent components");
}

template <class T>
void require_live_components(std::span<const Matrix<T>> start, int zero_factors_allowed,
                             const std::string& solver, const std::string& why) {
  if (start.empty()) return;
  for (index_t j = 0; j < start[0].cols(); ++j) {
    std::vector<std::size_t> zero;
    for (std::size_t n = 0; n < start.size(); ++n)
      if (zero_column(start[n], j)) zero.push_back(n);
    if (static_cast<int>(zero.size()) <= zero_factors_allowed) continue;
    std::string factors = std::to_string(zero[0]);
    for (std::size_t k = 1; k < zero.size(); ++k)
      factors += (k + 1 == zero.size() ? " and " : ", ") + std::to_string(zero[k]);
    throw InvalidArgument(solver + ": column " + std::to_string(j) + " of initial factor" +
                          (zero.size() > 1 ? "s " : " ") + factors + " is zero, so component " +
                          std::to_string(j) + " could never leave zero (" + why +
                          "); give a start with nonzero columns");
  }
}

template <class T>
void require_nonnegative_start(std::span<const Matrix<T>> start, const std::string& solver,
                               const std::string& why) {
  for (std::size_t n = 0; n < start.size(); ++n) {
    const Matrix<T>& f = start[n];
    for (index_t j = 0; j < f.cols(); ++j)
      for (index_t i = 0; i < f.rows(); ++i)
        if (f(i, j) < T(0)) {
          throw InvalidArgument(solver + " needs a nonnegative start (" + why +
                                "); initial factor " + std::to_string(n) + " has " +
                                std::to_string(f(i, j)) + " at [" + std::to_string(i) + ", " +
                                std::to_string(j) + "]");
        }
  }
}

#define TENFOLD_INSTANTIATE_START_CHECK(T)                                                      \
  template std::vector<index_t> stuck_components<T>(std::span<const Matrix<T>>, index_t,        \
                                                    const std::vector<int>&);                   \
  template void check_start_can_move<T>(const CpOptions&, std::span<const Matrix<T>>,           \
                                        const std::vector<index_t>&);                           \
  template void require_live_components<T>(std::span<const Matrix<T>>, int, const std::string&, \
                                           const std::string&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_START_CHECK)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_START_CHECK)
template void require_nonnegative_start<float>(std::span<const Matrix<float>>, const std::string&,
                                               const std::string&);
template void require_nonnegative_start<double>(std::span<const Matrix<double>>, const std::string&,
                                                const std::string&);

}  // namespace tenfold::detail
