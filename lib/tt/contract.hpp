// Contractions of tensor-train cores, over a Compute backend: the dense tensor of a TT
// (tenfold::TensorTrain::full and TT-SVD's formed residual).
#pragma once

#include <vector>

#include "core/compute.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// The dense tensor (column-major, mode 0 fastest) of TT cores in host memory, formed on
/// the backend: P_1 = G_0 as I_0 x r_1, then P_{k+1} = P_k G_k with G_k as
/// r_k x (I_k r_{k+1}), whose (prod_{m<=k} I_m) x r_{k+1} view is the next P. Returns the
/// result, which lies in work0 or work1 (both grown as needed).
template <class T>
T* tt_full(Compute<T>& c, const std::vector<Tensor<T>>& cores, Buffer<T>& work0, Buffer<T>& work1);

}  // namespace tenfold::detail
