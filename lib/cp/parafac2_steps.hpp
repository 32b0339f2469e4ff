// The slices of a PARAFAC2 problem on the backend and the steps of its outer iteration
// (lib/cp/parafac2.cpp): the projections P_k by orthogonal Procrustes, the projected
// slices Y_k = P_k^T X_k, the error of a model and the EM imputation of missing entries.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/compute.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// X_k (I_k x J) stacked into one N x J column-major matrix (N = sum I_k, slice k in rows
/// offset(k) ... offset(k) + rows(k) - 1), copied once; with masks, the missing entries
/// hold the current imputation.
template <class T>
class Parafac2Slices {
 public:
  /// `observed` is empty or has one mask per slice (non-zero: observed; already
  /// checked against the slices' shapes). row_major: slice views are J x I_k.
  Parafac2Slices(Compute<T>& c, std::span<const TensorView<const T>> slices,
                 std::span<const TensorView<const std::uint8_t>> observed, Layout layout);

  index_t count() const { return static_cast<index_t>(offsets_.size()) - 1; }
  index_t rows() const { return offsets_.back(); }
  index_t rows(index_t k) const { return offset(k + 1) - offset(k); }
  index_t offset(index_t k) const { return offsets_[static_cast<std::size_t>(k)]; }
  index_t cols() const { return cols_; }
  bool masked() const { return masked_; }
  /// The (filled) slices, N x J, backend memory.
  const T* data() const { return x_.get(); }
  /// ||W X||^2 (W the mask; all ones without one).
  double norm2() const { return norm2_; }
  /// ||W (X - M)||^2 for a model M (N x J, backend, overwritten); with `impute`, the
  /// missing entries of X take M's values.
  double masked_error2(T* model, bool impute);

 private:
  Compute<T>& c_;
  std::vector<index_t> offsets_;  // K + 1 row offsets
  index_t cols_ = 0;
  bool masked_ = false;
  Buffer<T> x_;           // X, missing entries filled
  Buffer<T> observed_x_;  // W X
  Buffer<T> weight_;      // W (1 observed, 0 missing)
  double norm2_ = 0.0;
};

/// Host factors of the model X_k ~ P_k B diag(a_k) C^T, in the mode order of the projected
/// tensor Y (R x J x K): by_mode = {B, C, A}.
template <class T>
struct Parafac2Factors {
  std::vector<Matrix<T>> by_mode;
  Matrix<T>& a() { return by_mode[2]; }
  Matrix<T>& b() { return by_mode[0]; }
  Matrix<T>& c() { return by_mode[1]; }
  const Matrix<T>& a() const { return by_mode[2]; }
  const Matrix<T>& b() const { return by_mode[0]; }
  const Matrix<T>& c() const { return by_mode[1]; }
};

/// The projections P_k stacked (N x R, backend and host) and the projected tensor Y
/// (R x J x K, Y(:, :, k) = P_k^T X_k, backend). Complete data: P_k is held as Q_k Pm_k,
/// Q_k of the thin QR X_k = Q_k R_k and Pm_k (min(I_k, J) x R) in q, until materialise()
/// forms it (formed[k] = 0 until then).
template <class T>
struct Parafac2Projection {
  Buffer<T> p;
  std::vector<T> host;
  Buffer<T> y;
  std::vector<double> q;
  std::vector<std::uint8_t> formed;
};

template <class T>
class Parafac2Steps {
 public:
  Parafac2Steps(Compute<T>& c, Parafac2Slices<T>& x, index_t rank);

  Parafac2Projection<T> make_projection();
  /// P_k = U V^T for Z_k = X_k C diag(a_k) B^T = U S V^T (the orthonormal P_k that maximises
  /// tr(P_k^T Z_k)), then Y. Complete data: with X_k = Q_k R_k (thin QR, formed once) and
  /// W = C diag(a_k) B^T, Z_k = Q_k (R_k W), so
  ///   P_k = Q_k polar(R_k W),   Y_k = polar(R_k W)^T R_k,
  /// at O(min(I_k, J) J R) per slice; with masks (the slices change), Z_k itself.
  void project(const Parafac2Factors<T>& f, Parafac2Projection<T>& out);
  /// Forms every P_k still held as X_k Q_k (out.p and out.host).
  void materialise(Parafac2Projection<T>& out);
  /// ||W (X - M)||^2, M_k = P_k B diag(a_k) C^T; with `impute` (masks only) the missing
  /// entries take M's values. Without masks, from Y in closed form:
  ///   ||X||^2 - 2 sum_k <Y_k, B diag(a_k) C^T> + sum_k a_k^T ((B^T P_k^T P_k B) * C^T C) a_k.
  double error2(const Parafac2Factors<T>& f, const Parafac2Projection<T>& pr, bool impute);
  /// The leading r eigenvectors of X^T X = sum_k X_k^T X_k (J x J), largest first (J x r).
  Matrix<T> leading_column_space(index_t r);

 private:
  // A^T (R x K), B and C uploaded.
  void upload_factors(const Parafac2Factors<T>& f);
  // Slice k of X on the host (I_k x J).
  std::vector<double> slice(index_t k);
  // Y(:, :, k) = P_k^T X_k for the P_k in out.p (the direct route for every slice).
  void project_slices(Parafac2Projection<T>& out);

  Compute<T>& c_;
  Parafac2Slices<T>& x_;
  index_t r_;
  Buffer<T> at_, b_, cf_, xc_, zz_, model_;
  std::vector<T> host_;
  std::vector<double> cross_;      // complete data: R_k of X_k = Q_k R_k, one after another
  std::vector<index_t> cross_at_;  // where R_k starts in cross_
};

}  // namespace tenfold::detail
