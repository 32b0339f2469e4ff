// How many CPU threads the library computes with.
//
// The cpu backend runs its parallel work on a pool of its own threads that sleep in the
// kernel when they have nothing to do (after a spin of a few microseconds), so a busy
// machine loses no time to threads spinning at barriers, whatever the OpenMP settings
// of the program that links the library. BLAS and LAPACK calls run single-threaded
// inside the pool's tasks (with the pthreads build of OpenBLAS, the library sets
// OpenBLAS to one thread for the process). See docs/api.md, "Threads".
#pragma once

#include "tenfold/export.hpp"

namespace tenfold {

/// The number of threads the cpu backend uses (the calling thread included), >= 1.
/// Unless set_num_threads chose it: OMP_NUM_THREADS, else OPENBLAS_NUM_THREADS, when the
/// environment sets it (its first entry); otherwise the CPUs this process may run on
/// (its affinity mask), capped by the cgroup CPU quota when one is set (rounded up).
TENFOLD_API int num_threads();

/// Sets the number of threads for the rest of the process (all calling threads);
/// 0 restores the default above. Throws InvalidArgument for a negative count. Calls
/// running at that moment keep the count they started with.
TENFOLD_API void set_num_threads(int threads);

/// For its lifetime, the library's calls made on the constructing thread compute on that
/// thread alone (other threads keep num_threads()). For calls made between the operations
/// of another runtime whose threads hold the other cores, such as a PyTorch decode step
/// (its OpenMP threads spin for milliseconds after each operation): waking the library's
/// workers there only takes time from those threads.
class TENFOLD_API OnThisThread {
 public:
  OnThisThread();
  ~OnThisThread();
  OnThisThread(const OnThisThread&) = delete;
  OnThisThread& operator=(const OnThisThread&) = delete;

 private:
  bool saved_;
};

}  // namespace tenfold
