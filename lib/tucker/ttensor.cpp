#include <algorithm>
#include <cmath>
#include <string>

#include "core/compute.hpp"
#include "core/factors.hpp"
#include "core/format.hpp"
#include "core/multilinear.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold {

template <class T>
std::vector<index_t> TTensor<T>::dims() const {
  return detail::factor_rows(factors);
}

template <class T>
std::vector<index_t> TTensor<T>::ranks() const {
  return core.dims();
}

template <class T>
void TTensor<T>::validate() const {
  if (factors.empty()) throw InvalidArgument("Tucker model has no factor matrices");
  if (core.order() != order()) {
    throw DimensionMismatch("Tucker model has " + std::to_string(order()) +
                            " factors, but its core has order " + std::to_string(core.order()));
  }
  for (int n = 0; n < order(); ++n) {
    const Matrix<T>& f = factors[static_cast<std::size_t>(n)];
    const std::string name = "factor " + std::to_string(n);
    if (core.dim(n) < 1) {
      throw InvalidArgument("Tucker core of shape " + detail::shape_string(core.dims()) +
                            " is empty (mode " + std::to_string(n) + " has size 0)");
    }
    if (f.cols() != core.dim(n)) {
      throw DimensionMismatch(name + " has " + std::to_string(f.cols()) +
                              " columns, but the core has size " + std::to_string(core.dim(n)) +
                              " in mode " + std::to_string(n));
    }
    if (f.rows() < 1) throw InvalidArgument(name + " has no rows");
    check_finite(TensorView<const T>(f.data(), {f.rows(), f.cols()}), name.c_str());
  }
  check_finite(core.view(), "Tucker core");
}

template <class T>
Tensor<T> TTensor<T>::full() const {
  validate();
  const auto host = detail::make_compute<T>(Backend::cpu);
  detail::Compute<T>& c = *host;
  detail::Buffer<T> w0, w1;
  std::vector<detail::ModeProduct<T>> products;
  for (int n = 0; n < order(); ++n) {
    const Matrix<T>& f = factors[static_cast<std::size_t>(n)];
    products.push_back({n, detail::Op::none, f.data(), f.rows(), f.rows()});
  }
  // X = G x_0 U_0 x_1 U_1 ...
  std::vector<index_t> shape = core.dims();
  const T* x = detail::ttm_chain<T>(c, core.data(), shape, products, w0, w1);
  return Tensor<T>(shape, std::vector<T>(x, x + checked_numel(shape)));
}

template <class T>
double TTensor<T>::norm() const {
  validate();
  const auto host = detail::make_compute<T>(Backend::cpu);
  detail::Compute<T>& c = *host;
  std::vector<Matrix<T>> grams;
  std::vector<detail::ModeProduct<T>> products;
  for (int n = 0; n < order(); ++n) {
    const Matrix<T>& f = factors[static_cast<std::size_t>(n)];
    grams.emplace_back(f.cols(), f.cols());
    // Gamma_n = U_n^T U_n
    c.syrk(detail::Op::trans, f.cols(), f.rows(), T(1), f.data(), f.rows(), T(0),
           grams.back().data(), f.cols());
    products.push_back({n, detail::Op::none, grams.back().data(), f.cols(), f.cols()});
  }
  // ||X||^2 = <G, G x_0 Gamma_0 x_1 Gamma_1 ...>
  detail::Buffer<T> w0, w1;
  std::vector<index_t> shape = core.dims();
  const T* w = detail::ttm_chain<T>(c, core.data(), shape, products, w0, w1);
  return std::sqrt(std::max(0.0, c.dot(static_cast<std::size_t>(core.numel()), core.data(), w)));
}

template <class T>
double TTensor<T>::inner(TensorView<const T> x) const {
  validate();
  if (x.dims() != dims()) {
    throw DimensionMismatch("inner product of a tensor of shape " + detail::shape_string(x.dims()) +
                            " and a Tucker model of shape " + detail::shape_string(dims()));
  }
  const auto host = detail::make_compute<T>(Backend::cpu);
  detail::Compute<T>& c = *host;
  std::vector<detail::ModeProduct<T>> products;
  for (int n = 0; n < order(); ++n) {
    const Matrix<T>& f = factors[static_cast<std::size_t>(n)];
    products.push_back({n, detail::Op::trans, f.data(), f.rows(), f.cols()});
  }
  // <X, G x_n U_n> = <X x_0 U_0^T x_1 U_1^T ..., G>
  detail::Buffer<T> w0, w1;
  std::vector<index_t> shape = x.dims();
  const T* y = detail::ttm_chain<T>(c, x.data(), shape, products, w0, w1);
  return c.dot(static_cast<std::size_t>(core.numel()), y, core.data());
}

template struct TTensor<float>;
template struct TTensor<double>;

}  // namespace tenfold
