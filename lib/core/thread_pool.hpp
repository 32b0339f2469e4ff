// The library's own worker threads: parallel loops that block instead of spinning.
//
// libgomp's threads spin for about 3 ms at every barrier unless the environment says
// otherwise (OMP_WAIT_POLICY, GOMP_SPINCOUNT, read once when the runtime loads), which
// on a machine busy with other work turns each small parallel step into a scheduler
// time slice. This pool's workers spin for a few microseconds and then sleep on a
// futex; BLAS and LAPACK calls run single-threaded inside its tasks.
#pragma once

#include <type_traits>
#include <utility>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

/// Non-owning reference to a callable void(index_t); the callable must outlive the call.
class TaskRef {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, TaskRef>)
      TaskRef(F&& f)  // NOLINT(google-explicit-constructor): lambdas convert implicitly
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, index_t i) { (*static_cast<std::remove_reference_t<F>*>(o))(i); }) {}
  void operator()(index_t i) const { call_(object_, i); }

 private:
  void* object_;
  void (*call_)(void*, index_t);
};

/// Threads a parallel_for started now may use (the caller included): the library's
/// setting (tenfold::num_threads), or 1 inside a task of another parallel_for.
int pool_threads();

/// Runs task(i) for every i in [0, count): the calling thread and the pool's workers take
/// indices one at a time, in increasing order, until none are left. Serial (in order, on
/// the caller) when count < 2, inside another parallel_for's task, while another thread
/// of the program is using the pool, or with one thread. The first exception thrown by a
/// task is rethrown after every task that started has finished; indices not yet taken
/// are then skipped.
void parallel_for(index_t count, TaskRef task);

/// Runs the BLAS/LAPACK calls of its lifetime on the calling thread only (OpenBLAS's
/// OpenMP build follows omp_get_max_threads() of the caller; other threads are not
/// affected).
class SerialBlas {
 public:
  SerialBlas();
  ~SerialBlas();
  SerialBlas(const SerialBlas&) = delete;
  SerialBlas& operator=(const SerialBlas&) = delete;

 private:
  int saved_;
};

}  // namespace tenfold::detail
