target_sources(tenfold_cpu PRIVATE
  cpu/cpu_compute.cpp
  cpu/tall_gemm.cpp)
