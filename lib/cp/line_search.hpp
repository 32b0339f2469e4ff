// Bro's line search (extrapolation) for CP-ALS, as TensorLy's parafac(linesearch=True):
// every second iteration after the fifth, the model moves further along the direction of
// the last sweep,
//   U_n <- P_n + j (U_n - P_n),   j = k^(1/p)   (k the 0-based iteration, p from 2 up),
// (P_n the factors before the sweep) and the jump is kept only if it lowers the error;
// after 4 rejected jumps in a row p grows by 1. Tenfold's rule folds the weights into the
// last mode and compares with the sweep's error; TensorLy's rule extrapolates the factors
// at the scales TensorLy's own factors have and compares with the previous sweep's error
// (CpLineSearchRule, docs/algorithms.md). Scaling TensorLy's factors between iterations
// (its normalize_factors=True: unit columns, the norms into its weights) scales P_n and
// U_n alike and leaves the jump's model unchanged, so its weights are taken as ones.
#pragma once

#include <span>
#include <vector>

#include "cp/operand.hpp"
#include "tenfold/cp.hpp"

namespace tenfold::detail {

template <class T>
class LineSearch {
 public:
  /// `fixed_modes` (CpOptions) keep their factors: a jump leaves them as they are.
  LineSearch(Compute<T>& c, const std::vector<index_t>& dims, index_t rank, CpLineSearchRule rule,
             const std::vector<int>& fixed_modes);

  /// Whether iteration `iter` (1-based) tries a jump.
  static bool tries(int iter) { return iter > 6 && (iter - 1) % 2 == 0; }

  /// TensorLy's rule: after mode n's update normalised U_n (scales in `lambda`), or
  /// after its QR (`lambda` null: U_n is TensorLy's factor itself). No-op for Tenfold's.
  void factor_updated(int n, const T* lambda);

  /// Before the sweep of an iteration that tries a jump: P_n = U_n, P_last = U_last
  /// diag(lambda) (TensorLy's rule: P_n = U_n diag(d_n), TensorLy's factors).
  void remember(std::span<T* const> u, const T* lambda, int last);

  /// After that sweep, whose model [[lambda; U]] has squared residual `resid2` (the
  /// previous iteration's: `previous_resid2`): forms the jump, and when its squared
  /// residual is smaller than the rule's reference, makes it the model (U, the Grams
  /// G_n = U_n^T U_n and lambda updated). Returns the model's squared residual.
  double jump(CpOperand<T>& x, int iter, double resid2, double previous_resid2, double norm_x2,
              std::span<T* const> u, std::span<T* const> gram, T* lambda, int last);

  int accepted() const { return accepted_; }

 private:
  bool tensorly() const { return rule_ != CpLineSearchRule::tenfold; }

  Compute<T>& c_;
  std::vector<index_t> dims_;
  index_t r_;
  CpLineSearchRule rule_;
  std::vector<bool> fixed_;
  std::vector<Buffer<T>> prev_, cand_;
  std::vector<const T*> cand_ptrs_;
  Buffer<T> gram_, v_, m_, scale_;
  // TensorLy's rule: its factor n is U_n diag(d_[n]) (host, double), its weights ones.
  std::vector<std::vector<double>> d_;
  double power_ = 2.0;
  int failures_ = 0;
  int accepted_ = 0;
};

}  // namespace tenfold::detail
