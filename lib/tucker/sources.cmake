target_sources(tenfold_tucker PRIVATE
  tucker/hooi.cpp
  tucker/hosvd.cpp
  tucker/nonnegative.cpp
  tucker/steps.cpp
  tucker/ttensor.cpp
  tucker/tucker.cpp)
