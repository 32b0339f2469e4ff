// Return-code checks for the CUDA runtime, cuBLAS and cuSOLVER: a failure becomes
// a DeviceError naming the call and the library's name for the error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

namespace tenfold::detail {

void check(cudaError_t status, const char* call);
void check(cublasStatus_t status, const char* call);
void check(cusolverStatus_t status, const char* call);

}  // namespace tenfold::detail
