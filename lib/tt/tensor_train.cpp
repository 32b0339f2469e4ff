// tenfold::TensorTrain: checks, the dense tensor, and norms and inner products from the
// cores, on the cpu backend.
#include "tenfold/tensor_train.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/compute.hpp"
#include "core/format.hpp"
#include "tenfold/error.hpp"
#include "tt/contract.hpp"

namespace tenfold {

namespace detail {

template <class T>
T* tt_full(Compute<T>& c, const std::vector<Tensor<T>>& cores, Buffer<T>& work0, Buffer<T>& work1) {
  Buffer<T>* work[2] = {&work0, &work1};
  Buffer<T> g;
  T* p = nullptr;
  index_t left = 1;  // prod_{m<k} I_m, the rows of P_k
  for (std::size_t k = 0; k < cores.size(); ++k) {
    const Tensor<T>& core = cores[k];
    const index_t rk = core.dim(0), cols = core.dim(1) * core.dim(2);
    const auto size = static_cast<std::size_t>(core.numel());
    T* gk = ensure(c, g, size);
    c.upload(gk, core.data(), size);
    T* next = ensure(c, *work[k % 2], static_cast<std::size_t>(left * cols));
    if (k == 0) {
      c.copy(next, gk, size);  // P_1 = G_0 (r_0 = 1)
    } else {
      // P_{k+1} = P_k G_k: (left x r_k) (r_k x I_k r_{k+1})
      c.gemm(Op::none, Op::none, left, cols, rk, T(1), p, left, gk, rk, T(0), next, left);
    }
    p = next;
    left *= core.dim(1);
  }
  return p;
}

template float* tt_full<float>(Compute<float>&, const std::vector<Tensor<float>>&, Buffer<float>&,
                               Buffer<float>&);
template double* tt_full<double>(Compute<double>&, const std::vector<Tensor<double>>&,
                                 Buffer<double>&, Buffer<double>&);

}  // namespace detail

template <class T>
std::vector<index_t> TensorTrain<T>::dims() const {
  std::vector<index_t> d;
  for (const Tensor<T>& g : cores) d.push_back(g.order() == 3 ? g.dim(1) : 0);
  return d;
}

template <class T>
std::vector<index_t> TensorTrain<T>::ranks() const {
  std::vector<index_t> r;
  for (const Tensor<T>& g : cores) r.push_back(g.order() == 3 ? g.dim(0) : 0);
  r.push_back(cores.empty() || cores.back().order() != 3 ? 0 : cores.back().dim(2));
  return r;
}

template <class T>
void TensorTrain<T>::validate() const {
  if (cores.empty()) throw InvalidArgument("tensor train has no cores");
  for (std::size_t k = 0; k < cores.size(); ++k) {
    const Tensor<T>& g = cores[k];
    const std::string name = "TT core " + std::to_string(k);
    if (g.order() != 3) {
      throw InvalidArgument(name + " has order " + std::to_string(g.order()) +
                            ", expected 3 (r_k, I_k, r_k+1)");
    }
    if (g.numel() == 0) {
      throw InvalidArgument(name + " of shape " + detail::shape_string(g.dims()) + " is empty");
    }
    if (k + 1 < cores.size() && g.dim(2) != cores[k + 1].dim(0)) {
      throw DimensionMismatch(name + " has shape " + detail::shape_string(g.dims()) +
                              ", but TT core " + std::to_string(k + 1) + " has shape " +
                              detail::shape_string(cores[k + 1].dims()) +
                              ": the ranks do not chain");
    }
    check_finite(g.view(), name.c_str());
  }
  if (cores.front().dim(0) != 1 || cores.back().dim(2) != 1) {
    throw InvalidArgument("tensor train's boundary ranks must be 1, got r_0 = " +
                          std::to_string(cores.front().dim(0)) +
                          " and r_N = " + std::to_string(cores.back().dim(2)));
  }
}

template <class T>
Tensor<T> TensorTrain<T>::full() const {
  validate();
  const std::vector<index_t> shape = dims();
  checked_numel(shape);
  const auto host = detail::make_compute<T>(Backend::cpu);
  detail::Buffer<T> w0, w1;
  const T* x = detail::tt_full(*host, cores, w0, w1);
  return Tensor<T>(shape, std::vector<T>(x, x + checked_numel(shape)));
}

template <class T>
double TensorTrain<T>::inner(TensorView<const T> x) const {
  validate();
  if (x.dims() != dims()) {
    throw DimensionMismatch("inner product of a tensor of shape " + detail::shape_string(x.dims()) +
                            " and a tensor train of shape " + detail::shape_string(dims()));
  }
  const auto host = detail::make_compute<T>(Backend::cpu);
  detail::Compute<T>& c = *host;
  // V_0 = X as 1 x numel; V_{k+1} = G_k^T V_k, with G_k as (r_k I_k) x r_{k+1} and V_k as
  // (r_k I_k) x (prod_{m>k} I_m); the last step is a dot in double.
  detail::Buffer<T> w[2];
  const T* v = x.data();
  index_t right = x.numel();
  for (std::size_t k = 0; k + 1 < cores.size(); ++k) {
    const Tensor<T>& g = cores[k];
    const index_t rows = g.dim(0) * g.dim(1), next = g.dim(2);
    right /= g.dim(1);
    T* out = detail::ensure(c, w[k % 2], static_cast<std::size_t>(next * right));
    c.gemm(detail::Op::trans, detail::Op::none, next, right, rows, T(1), g.data(), rows, v, rows,
           T(0), out, next);
    v = out;
  }
  return c.dot(static_cast<std::size_t>(cores.back().numel()), cores.back().data(), v);
}

template <class T>
double TensorTrain<T>::inner(const TensorTrain<T>& other) const {
  validate();
  other.validate();
  if (other.dims() != dims()) {
    throw DimensionMismatch("inner product of tensor trains of shapes " +
                            detail::shape_string(other.dims()) + " and " +
                            detail::shape_string(dims()));
  }
  const auto host = detail::make_compute<T>(Backend::cpu);
  detail::Compute<T>& c = *host;
  // M_0 = 1; Z = M_k H_k (H_k as r^H_k x (I_k r^H_{k+1})), M_{k+1} = G_k^T Z with G_k as
  // (r^G_k I_k) x r^G_{k+1} and Z as (r^G_k I_k) x r^H_{k+1}; the last step a dot in double.
  std::vector<T> m(1, T(1)), z;
  const auto times_m = [&](const Tensor<T>& h, index_t rg) {
    z.resize(static_cast<std::size_t>(rg * h.dim(1) * h.dim(2)));
    c.gemm(detail::Op::none, detail::Op::none, rg, h.dim(1) * h.dim(2), h.dim(0), T(1), m.data(),
           rg, h.data(), h.dim(0), T(0), z.data(), rg);
  };
  for (std::size_t k = 0; k + 1 < cores.size(); ++k) {
    const Tensor<T>& g = other.cores[k];
    const index_t rows = g.dim(0) * g.dim(1);
    times_m(cores[k], g.dim(0));
    m.resize(static_cast<std::size_t>(g.dim(2) * cores[k].dim(2)));
    c.gemm(detail::Op::trans, detail::Op::none, g.dim(2), cores[k].dim(2), rows, T(1), g.data(),
           rows, z.data(), rows, T(0), m.data(), g.dim(2));
  }
  times_m(cores.back(), other.cores.back().dim(0));
  return c.dot(z.size(), other.cores.back().data(), z.data());
}

template <class T>
double TensorTrain<T>::norm() const {
  return std::sqrt(std::max(0.0, inner(*this)));
}

template struct TensorTrain<float>;
template struct TensorTrain<double>;

}  // namespace tenfold
