target_sources(tenfold_backends PRIVATE
  backends/backend.cpp)
