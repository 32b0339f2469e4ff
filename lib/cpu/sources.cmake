target_sources(tenfold_objects PRIVATE
  cpu/cpu_compute.cpp)
