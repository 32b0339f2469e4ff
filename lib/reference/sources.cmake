target_sources(tenfold_objects PRIVATE
  reference/reference_compute.cpp)
