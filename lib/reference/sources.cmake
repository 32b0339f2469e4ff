target_sources(tenfold_reference PRIVATE
  reference/reference_compute.cpp)
