// A tensor given in Tucker form X = G x_0 U_0 ... x_{N-1} U_{N-1} as a CP-ALS operand;
// the tensor is never formed. With A_m the CP factors and Gamma_m = U_m^T U_m:
//   MTTKRP(n)     = U_n MTTKRP_G(n; {U_m^T A_m})   (dense MTTKRP on the small core),
//   ||X||^2       = <G, G x_0 Gamma_0 ... x_{N-1} Gamma_{N-1}>,
//   X_(n) X_(n)^T = U_n G_(n) W_(n)^T U_n^T with W = G x_{m != n} Gamma_m.
// No orthonormality is assumed: the factor Grams cost O(sum_n I_n r_n^2) once.
#pragma once

#include <vector>

#include "cp/cross_products.hpp"
#include "cp/dense_operand.hpp"
#include "cp/factor_cache.hpp"
#include "cp/operand.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::detail {

template <class T>
class TuckerOperand final : public CpOperand<T> {
 public:
  /// `x` must outlive the operand (its core is viewed on the cpu backend).
  TuckerOperand(Compute<T>& c, const TTensor<T>& x);

  const std::vector<index_t>& dims() const override { return dims_; }
  double norm_squared() override;
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override;
  void factor_changed(int m) override;
  void mode_gram(int n, T* out) override;
  double workspace_elements(index_t rank, bool mode_grams) const override;

 private:
  // G x_m Gamma_m over all modes m != skip (every mode when skip < 0), in w0_ or w1_.
  const T* weighted_core(int skip);

  std::vector<index_t> dims_, ranks_;
  DenseOperand<T> core_;
  std::vector<Buffer<T>> u_, gamma_;
  CrossProducts<T> b_;  // U_m^T A_m (r_m x R)
  double norm_squared_ = -1.0;
  Buffer<T> m_, w0_, w1_, h_, uh_;
};

}  // namespace tenfold::detail
