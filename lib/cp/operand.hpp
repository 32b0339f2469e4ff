// What the one CP-ALS loop needs from its input. Six methods every operand provides:
// its mode sizes, the squared norm, MTTKRP for a mode, the mode Grams (the nvecs start),
// factor_changed (operands cache partial contractions between MTTKRPs and drop them
// here) and workspace_elements (the memory the others need); dense, sparse, Kruskal-form
// and Tucker-form tensors each at their own cost. Six hooks with defaults, for the
// operands that need them: end_sweep (entries that follow the model: EM for missing
// values), model_error2 (an error other than ||X - model||^2: TensorLy's sparsity),
// updates_factors / update_factor / gram_eigenvectors (operands that solve the factor
// update their own way: sampled least squares), and reset (another start).
#pragma once

#include <span>
#include <vector>

#include "core/compute.hpp"

namespace tenfold::detail {

template <class T>
class CpOperand {
 public:
  explicit CpOperand(Compute<T>& compute) : c_(compute) {}
  virtual ~CpOperand() = default;
  CpOperand(const CpOperand&) = delete;
  CpOperand& operator=(const CpOperand&) = delete;

  /// Mode sizes I_0, ..., I_{N-1}.
  virtual const std::vector<index_t>& dims() const = 0;
  int order() const { return static_cast<int>(dims().size()); }

  /// ||X||^2, accumulated in double.
  virtual double norm_squared() = 0;

  /// out (I_n x R) = X_(n) (U_{N-1} (.) ... U_{n+1} (.) U_{n-1} ... (.) U_0), the factors
  /// U_m (I_m x R, backend memory) given for every mode (factors[n] is not read). For
  /// complex T the Khatri-Rao product is conjugated: out = X_(n) conj(K).
  /// Operands may cache partial contractions between calls: call factor_changed(m)
  /// whenever U_m (or R) changes.
  virtual void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) = 0;

  /// Invalidates cached contractions that involve factor m.
  virtual void factor_changed(int m) = 0;

  /// out (I_n x I_n) = X_(n) X_(n)^T (complex T: X_(n) X_(n)^H).
  virtual void mode_gram(int n, T* out) = 0;

  /// Called after every sweep with the model [[lambda; U_0, ..., U_{N-1}]] (backend
  /// memory). An operand whose entries follow the model (missing values filled by EM)
  /// updates itself here and returns ||W (X - model)||^2 over the entries that count;
  /// norm_squared() is then ||W X||^2. Other operands return a negative value and the
  /// loop uses its closed form.
  virtual double end_sweep(std::span<const T* const> /*factors*/, const T* /*lambda*/,
                           index_t /*rank*/) {
    return -1.0;
  }

  /// The squared error of the model [[lambda; U_0, ..., U_{N-1}]] (backend memory) for an
  /// operand that measures it otherwise than ||X - model||^2 (TensorLy's sparsity), without
  /// side effects; other operands return a negative value (the closed form applies).
  virtual double model_error2(std::span<const T* const> /*factors*/, const T* /*lambda*/,
                              index_t /*rank*/) {
    return -1.0;
  }

  /// Whether the operand computes each factor update itself (update_factor) instead of
  /// the loop's MTTKRP and normal equations.
  virtual bool updates_factors() const { return false; }

  /// With updates_factors(): out (I_n x R, backend memory) = the new U_n given the other
  /// factors (normalised; U_n takes the weights), with `ridge` on each normal matrix.
  virtual void update_factor(int /*n*/, std::span<const T* const> /*factors*/, index_t /*rank*/,
                             double /*ridge*/, T* /*out*/) {}

  /// The leading r eigenvectors of mode_gram(n)'s result `gram` (backend memory), largest
  /// first, into out (I_n x r, backend memory), when the operand finds them its own way
  /// (the sampled solver: a randomised eigensolver for its sampled Gram). false: nothing
  /// written, the caller solves the eigenproblem exactly.
  virtual bool gram_eigenvectors(int /*n*/, const T* /*gram*/, index_t /*r*/, T* /*out*/) {
    return false;
  }

  /// Returns to the state before the first sweep (for another start).
  virtual void reset() {}

  /// Upper bound on the elements of T the operand allocates on the backend for
  /// MTTKRPs at `rank` (and, with `mode_grams`, for mode_gram), beyond what it holds
  /// already; in double so that no product overflows. For the memory estimate.
  virtual double workspace_elements(index_t rank, bool mode_grams) const = 0;

 protected:
  Compute<T>& c_;
};

}  // namespace tenfold::detail
