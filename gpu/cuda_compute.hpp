// Entry points of the CUDA backend for the rest of the library. Included from
// host C++ code: no CUDA header may appear here.
#pragma once

#include <memory>

#include "core/compute.hpp"

namespace tenfold::detail {

/// Number of CUDA devices that can be used; 0 when there is no driver or no
/// device. Never throws.
int cuda_device_count();

/// A CUDA compute backend on device 0, or on the device named by the
/// environment variable TENFOLD_CUDA_DEVICE. It owns one stream, one cuBLAS and
/// one cuSOLVER handle. Throws DeviceError when no device can be used or the
/// variable does not name one.
template <class T>
std::unique_ptr<Compute<T>> make_cuda_compute();

extern template std::unique_ptr<Compute<float>> make_cuda_compute<float>();
extern template std::unique_ptr<Compute<double>> make_cuda_compute<double>();

}  // namespace tenfold::detail
