target_sources(tenfold PRIVATE
  cpu/cpu_compute.cpp)
