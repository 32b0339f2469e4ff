// Mode-n products of a dense tensor, on its natural unfoldings (no permutation).
// A column-major tensor X of shape (I_0, ..., I_{N-1}) is viewed, for mode n, as a
// three-way array I_L x I_n x I_R with I_L = prod_{m<n} I_m and I_R = prod_{m>n} I_m:
// mode 0 (I_L = 1) and the last mode (I_R = 1) are plain matrices, a middle mode is
// a sequence of I_R contiguous I_L x I_n slices.
#pragma once

#include <span>
#include <vector>

#include "core/compute.hpp"

namespace tenfold::detail {

/// out (I_n x I_n) = X_(n) Y_(n)^T for two tensors of the same shape (backend
/// memory); Y = X when y is null, which uses syrk (out is symmetric).
template <class T>
void mode_gram(Compute<T>& c, const T* x, std::span<const index_t> dims, int n, T* out,
               const T* y = nullptr);

/// out (I_n x J_n) = X_(n) Y_(n)^T for X of shape dims and Y of shape dims with I_n
/// replaced by J_n (backend memory; the same order of the other modes in both unfoldings).
template <class T>
void mode_cross(Compute<T>& c, const T* x, std::span<const index_t> dims, int n, const T* y,
                index_t jn, T* out);

/// Y = X x_n op(U), i.e. Y_(n) = op(U) X_(n), where op(U) is j x I_n and U has
/// leading dimension ldu. Y has the shape of X with I_n replaced by j; y must not
/// overlap x.
template <class T>
void ttm(Compute<T>& c, const T* x, std::span<const index_t> dims, int n, Op op, const T* u,
         index_t ldu, index_t j, T* y);

/// One mode product of a chain: X x_mode op(U), op(U) is rows x I_mode.
template <class T>
struct ModeProduct {
  int mode = 0;
  Op op = Op::none;
  const T* u = nullptr;
  index_t ldu = 1;
  index_t rows = 1;
};

/// Applies the mode products (distinct modes, so they commute) to X, cheapest first:
/// in increasing order of rows / I_mode (stable), so the tensor shrinks as early
/// and grows as late as possible. `dims` (X's shape on entry) receives the result's
/// shape. Intermediate results alternate between work0 and work1, which grow as
/// needed (x must not lie in them); returns the result, which lies in one of them
/// (x itself if there are no products).
template <class T>
const T* ttm_chain(Compute<T>& c, const T* x, std::vector<index_t>& dims,
                   std::vector<ModeProduct<T>> products, Buffer<T>& work0, Buffer<T>& work1);

}  // namespace tenfold::detail
