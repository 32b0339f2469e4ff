// Bro's line search (extrapolation) for CP-ALS, as TensorLy's parafac(linesearch=True):
// every second iteration after the fifth, the model moves further along the direction of
// the last sweep,
//   U_n <- P_n + j (U_n - P_n),   j = k^(1/p)   (k the 0-based iteration, p from 2 up),
// (P_n the factors before the sweep, the weights folded into the last mode) and the
// jump is kept only if it lowers the error; after 4 rejected jumps in a row p grows by 1.
#pragma once

#include <span>
#include <vector>

#include "cp/operand.hpp"

namespace tenfold::detail {

template <class T>
class LineSearch {
 public:
  LineSearch(Compute<T>& c, const std::vector<index_t>& dims, index_t rank);

  /// Whether iteration `iter` (1-based) tries a jump.
  static bool tries(int iter) { return iter > 6 && (iter - 1) % 2 == 0; }

  /// Before the sweep of an iteration that tries a jump: P_n = U_n, P_last = U_last diag(lambda).
  void remember(std::span<T* const> u, const T* lambda, int last);

  /// After that sweep, whose model [[lambda; U]] has squared residual `resid2`: forms
  /// the jump, and when its squared residual is smaller, makes it the model (U, the
  /// Grams G_n = U_n^T U_n and lambda updated). Returns the model's squared residual.
  double jump(CpOperand<T>& x, int iter, double resid2, double norm_x2, std::span<T* const> u,
              std::span<T* const> gram, T* lambda, int last);

  int accepted() const { return accepted_; }

 private:
  Compute<T>& c_;
  std::vector<index_t> dims_;
  index_t r_;
  std::vector<Buffer<T>> prev_, cand_;
  std::vector<const T*> cand_ptrs_;
  Buffer<T> gram_, v_, m_;
  double power_ = 2.0;
  int failures_ = 0;
  int accepted_ = 0;
};

}  // namespace tenfold::detail
