target_sources(tenfold_cpu PRIVATE
  cpu/blas_info.cpp
  cpu/cpu_compute.cpp
  cpu/tall_gemm.cpp)
