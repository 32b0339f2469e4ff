target_sources(tenfold_core PRIVATE
  core/dense_mttkrp.cpp
  core/format.cpp
  core/hals.cpp
  core/host_lapack.cpp
  core/ktensor.cpp
  core/memory.cpp
  core/layout.cpp
  core/multilinear.cpp
  core/scaling.cpp
  core/subspace.cpp
  core/tensor.cpp
  core/thread_pool.cpp
  core/threads.cpp)
