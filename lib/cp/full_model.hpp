// The dense tensor of a CP model [[lambda; U_0, ..., U_{N-1}]] in backend memory, as
//   M = (KR(U_{h-1}, ..., U_0) diag(lambda)) KR(U_{N-1}, ..., U_h)^T
// (column-major, mode 0 fastest): two Khatri-Rao products of blocks of modes, split at
// h as balanced in size as possible, and one GEMM.
#pragma once

#include <span>
#include <vector>

#include "core/compute.hpp"

namespace tenfold::detail {

template <class T>
class FullModel {
 public:
  FullModel(Compute<T>& c, const std::vector<index_t>& dims);

  /// out (prod_n I_n entries, backend memory) = the model.
  void form(std::span<const T* const> factors, const T* lambda, index_t rank, T* out);

  /// Elements of T form() allocates at `rank` (for the memory estimate).
  double workspace_elements(index_t rank) const;

 private:
  Compute<T>& c_;
  std::vector<index_t> dims_;
  int split_ = 1;
  Buffer<T> kr_, kr_tmp_, lead_;
};

}  // namespace tenfold::detail
