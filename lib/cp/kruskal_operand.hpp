// A tensor given in CP form [[mu; A_0, ..., A_{N-1}]] (S components) as a CP-ALS
// operand. The tensor is never formed: MTTKRP(n) = A_n diag(mu) (*_{m!=n} A_m^T U_m),
// ||X||^2 = mu^T (*_m A_m^T A_m) mu. The cross products A_m^T U_m are cached.
#pragma once

#include <vector>

#include "cp/cross_products.hpp"
#include "cp/operand.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold::detail {

template <class T>
class KruskalOperand final : public CpOperand<T> {
 public:
  /// Views x's factors on the cpu backend (x must outlive the operand); copies them
  /// to the device once otherwise.
  KruskalOperand(Compute<T>& c, const KTensor<T>& x);

  const std::vector<index_t>& dims() const override { return dims_; }
  double norm_squared() override;
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override;
  void factor_changed(int m) override { cross_.changed(m); }
  void mode_gram(int n, T* out) override;
  double workspace_elements(index_t rank, bool mode_grams) const override;

 private:
  // W (S x R or S x S) = mu mu^T-weighted Hadamard product of A_m^T B_m over m != n.
  void weighted_product(int n, const std::vector<const T*>& blocks, index_t cols, T* w);

  std::vector<index_t> dims_;
  index_t s_ = 0;
  std::vector<const T*> a_;        // A_m on the backend
  std::vector<Buffer<T>> a_copy_;  // device copies of the A_m (none on the cpu backend)
  Buffer<T> mu_;                   // S
  CrossProducts<T> cross_;         // A_m^T U_m (S x R)
  Buffer<T> w_, mu_cols_;
  index_t mu_cols_width_ = 0;
};

}  // namespace tenfold::detail
