#include "core/multilinear.hpp"

#include <algorithm>

#include "core/instantiate.hpp"

namespace tenfold::detail {
namespace {

// I_L, I_n, I_R of mode n (see multilinear.hpp).
struct ModeSplit {
  index_t left = 1, mid = 1, right = 1;
};

ModeSplit split(std::span<const index_t> dims, int n) {
  ModeSplit s;
  for (int m = 0; m < static_cast<int>(dims.size()); ++m) {
    const index_t d = dims[static_cast<std::size_t>(m)];
    if (m < n) s.left *= d;
    if (m == n) s.mid = d;
    if (m > n) s.right *= d;
  }
  return s;
}

}  // namespace

template <class T>
void mode_gram(Compute<T>& c, const T* x, std::span<const index_t> dims, int n, T* out,
               const T* y) {
  if (y != nullptr) {
    mode_cross(c, x, dims, n, y, dims[static_cast<std::size_t>(n)], out);
    return;
  }
  const auto [il, in, ir] = split(dims, n);
  if (il == 1) {
    // X_(n) is X viewed as I_n x I_R.
    c.syrk(Op::none, in, ir, T(1), x, in, T(0), out, in);
    return;
  }
  // X_(n) X_(n)^T = sum_k S_k^T S_k over the I_L x I_n slices S_k of X.
  for (index_t k = 0; k < ir; ++k) {
    c.syrk(Op::trans, in, il, T(1), x + k * il * in, il, k == 0 ? T(0) : T(1), out, in);
  }
}

template <class T>
void mode_cross(Compute<T>& c, const T* x, std::span<const index_t> dims, int n, const T* y,
                index_t jn, T* out) {
  const auto [il, in, ir] = split(dims, n);
  if (il == 1) {
    // X_(n) is X viewed as I_n x I_R, Y_(n) as J_n x I_R.
    c.gemm(Op::none, Op::trans, in, jn, ir, T(1), x, in, y, jn, T(0), out, in);
    return;
  }
  // X_(n) Y_(n)^T = sum_k S_k^T R_k over the I_L x I_n slices S_k of X and I_L x J_n R_k of Y.
  for (index_t k = 0; k < ir; ++k) {
    c.gemm(Op::trans, Op::none, in, jn, il, T(1), x + k * il * in, il, y + k * il * jn, il,
           k == 0 ? T(0) : T(1), out, in);
  }
}

template <class T>
void ttm(Compute<T>& c, const T* x, std::span<const index_t> dims, int n, Op op, const T* u,
         index_t ldu, index_t j, T* y) {
  const auto [il, in, ir] = split(dims, n);
  if (il == 1) {
    // Y (j x I_R) = op(U) X (I_n x I_R)
    c.gemm(op, Op::none, j, ir, in, T(1), u, ldu, x, in, T(0), y, j);
    return;
  }
  // Each slice: Y_k (I_L x j) = X_k (I_L x I_n) op(U)^T; one product when I_R = 1.
  const Op op_t = op == Op::none ? Op::trans : Op::none;
  c.gemm_strided_batched(Op::none, op_t, il, j, in, T(1), x, il, il * in, u, ldu, 0, T(0), y, il,
                         il * j, ir);
}

template <class T>
const T* ttm_chain(Compute<T>& c, const T* x, std::vector<index_t>& dims,
                   std::vector<ModeProduct<T>> products, Buffer<T>& work0, Buffer<T>& work1) {
  // Ratios compared by cross-multiplication: a.rows / I_a < b.rows / I_b.
  std::stable_sort(products.begin(), products.end(), [&](const auto& a, const auto& b) {
    return a.rows * dims[static_cast<std::size_t>(b.mode)] <
           b.rows * dims[static_cast<std::size_t>(a.mode)];
  });
  Buffer<T>* work[2] = {&work0, &work1};
  const T* cur = x;
  for (std::size_t s = 0; s < products.size(); ++s) {
    const ModeProduct<T>& p = products[s];
    std::vector<index_t> next = dims;
    next[static_cast<std::size_t>(p.mode)] = p.rows;
    T* y = ensure(c, *work[s % 2], static_cast<std::size_t>(checked_numel(next)));
    ttm(c, cur, dims, p.mode, p.op, p.u, p.ldu, p.rows, y);
    dims = std::move(next);
    cur = y;
  }
  return cur;
}

#define TENFOLD_INSTANTIATE_MULTILINEAR(T)                                                        \
  template void mode_gram<T>(Compute<T>&, const T*, std::span<const index_t>, int, T*, const T*); \
  template void mode_cross<T>(Compute<T>&, const T*, std::span<const index_t>, int, const T*,     \
                              index_t, T*);                                                       \
  template void ttm<T>(Compute<T>&, const T*, std::span<const index_t>, int, Op, const T*,        \
                       index_t, index_t, T*);                                                     \
  template const T* ttm_chain<T>(Compute<T>&, const T*, std::vector<index_t>&,                    \
                                 std::vector<ModeProduct<T>>, Buffer<T>&, Buffer<T>&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_MULTILINEAR)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_MULTILINEAR)

}  // namespace tenfold::detail
