#include "tenfold/ktensor.hpp"

#include <cmath>
#include <string>

#include "core/dense_mttkrp.hpp"
#include "core/factors.hpp"
#include "core/instantiate.hpp"
#include "tenfold/error.hpp"

namespace tenfold {

template <class T>
std::vector<index_t> KTensor<T>::dims() const {
  return detail::factor_rows(factors);
}

template <class T>
void KTensor<T>::validate() const {
  if (factors.empty()) throw InvalidArgument("CP model has no factor matrices");
  if (weights.empty()) throw InvalidArgument("CP model has rank 0 (no weights)");
  for (std::size_t n = 0; n < factors.size(); ++n) {
    const Matrix<T>& f = factors[n];
    if (f.cols() != rank()) {
      throw DimensionMismatch("factor " + std::to_string(n) + " has " + std::to_string(f.cols()) +
                              " columns, but the model has " + std::to_string(rank()) + " weights");
    }
    if (f.rows() < 1) throw InvalidArgument("factor " + std::to_string(n) + " has no rows");
    check_finite(TensorView<const T>(f.data(), {f.rows(), f.cols()}),
                 ("factor " + std::to_string(n)).c_str());
  }
  check_finite(TensorView<const T>(weights.data(), {rank()}), "weights");
}

template <class T>
Tensor<T> KTensor<T>::full() const {
  validate();
  const auto host = detail::make_compute<T>(Backend::cpu);
  detail::Compute<T>& c = *host;
  const index_t r = rank();
  Tensor<T> x(dims());
  // X_(0) = U_0 diag(lambda) (U_{N-1} (.) ... (.) U_1)^T
  Matrix<T> left = factors[0];
  for (index_t j = 0; j < r; ++j)
    for (index_t i = 0; i < left.rows(); ++i) left(i, j) *= weights[static_cast<std::size_t>(j)];
  Matrix<T> kr(1, r);
  std::fill(kr.values().begin(), kr.values().end(), T(1));
  for (int n = 1; n < order(); ++n) {
    const Matrix<T>& f = factors[static_cast<std::size_t>(n)];
    Matrix<T> next(kr.rows() * f.rows(), r);
    c.khatri_rao(kr.rows(), f.rows(), r, kr.data(), f.data(), next.data());
    kr = std::move(next);
  }
  c.gemm(detail::Op::none, detail::Op::trans, left.rows(), kr.rows(), r, T(1), left.data(),
         left.rows(), kr.data(), kr.rows(), T(0), x.data(), left.rows());
  return x;
}

template <class T>
double KTensor<T>::norm() const {
  validate();
  const index_t r = rank();
  // ||M||^2 = lambda^T (*_n U_n^T U_n) lambda, in double.
  std::vector<double> v(static_cast<std::size_t>(r * r), 1.0);
  for (const Matrix<T>& f : factors) {
    for (index_t a = 0; a < r; ++a)
      for (index_t b = 0; b < r; ++b) {
        double s = 0.0;
        for (index_t i = 0; i < f.rows(); ++i) s += static_cast<double>(f(i, a)) * f(i, b);
        v[static_cast<std::size_t>(a + b * r)] *= s;
      }
  }
  double s = 0.0;
  for (index_t a = 0; a < r; ++a)
    for (index_t b = 0; b < r; ++b)
      s += static_cast<double>(weights[static_cast<std::size_t>(a)]) *
           v[static_cast<std::size_t>(a + b * r)] * weights[static_cast<std::size_t>(b)];
  return std::sqrt(std::max(s, 0.0));
}

template <class T>
double KTensor<T>::inner(TensorView<const T> x) const {
  validate();
  if (x.dims() != dims()) {
    throw DimensionMismatch("inner product of a tensor and a CP model of different shapes");
  }
  const auto host = detail::make_compute<T>(Backend::cpu);
  detail::Compute<T>& c = *host;
  if (order() == 1) {
    // <x, M> = sum_r lambda_r <x, a_r>
    double s = 0.0;
    for (index_t j = 0; j < rank(); ++j) {
      s += weights[static_cast<std::size_t>(j)] *
           c.dot(static_cast<std::size_t>(x.numel()), x.data(), factors[0].col(j));
    }
    return s;
  }
  // <X, M> = sum_r lambda_r <MTTKRP_{N-1}(:, r), U_{N-1}(:, r)>
  detail::DenseMttkrp<T> op(c, x);
  const int last = order() - 1;
  const Matrix<T>& fl = factors[static_cast<std::size_t>(last)];
  std::vector<const T*> ptrs;
  for (const Matrix<T>& f : factors) ptrs.push_back(f.data());
  Matrix<T> m(fl.rows(), rank());
  op.mttkrp(last, ptrs, rank(), m.data());
  double s = 0.0;
  for (index_t j = 0; j < rank(); ++j) {
    double col = 0.0;
    for (index_t i = 0; i < fl.rows(); ++i) col += static_cast<double>(m(i, j)) * fl(i, j);
    s += col * weights[static_cast<std::size_t>(j)];
  }
  return s;
}

template struct KTensor<float>;
template struct KTensor<double>;
// Complex models (CP-ALS of complex tensors): shape, validation and the full tensor.
#define TENFOLD_INSTANTIATE_COMPLEX_KTENSOR(T)            \
  template std::vector<index_t> KTensor<T>::dims() const; \
  template void KTensor<T>::validate() const;             \
  template Tensor<T> KTensor<T>::full() const;
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_COMPLEX_KTENSOR)

}  // namespace tenfold
