#include "core/thread_pool.hpp"

#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "tenfold/error.hpp"
#include "tenfold/threads.hpp"

namespace tenfold {
namespace detail {
namespace {

thread_local bool inside_task = false;

// Spins about `micros` microseconds for `ready` to hold, then blocks on `word` until it
// changes from the value `ready` last rejected.
template <class Word, class Ready>
void wait_until(const std::atomic<Word>& word, Ready ready, double micros) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; !ready(word.load()); ++i) {
    if ((i & 63) == 63 &&
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count() > micros) {
      for (Word w = word.load(); !ready(w); w = word.load()) word.wait(w);
      return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// How long a thread spins before it sleeps. By default long enough to catch the next
// step of a running algorithm on an idle core, short against a scheduler time slice
// (milliseconds) when other programs want the core. OMP_WAIT_POLICY, when set, is
// followed as OpenMP runtimes do: passive sleeps at once, active spins for 200 ms.
double spin_micros() {
  static const double micros = [] {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    const std::string_view p = policy == nullptr ? "" : policy;
    if (p == "passive" || p == "PASSIVE") return 0.0;
    if (p == "active" || p == "ACTIVE") return 200000.0;
    return 30.0;
  }();
  return micros;
}

class Pool {
 public:
  // Throws Error when the system refuses a thread (process limits, address space), after
  // stopping the ones already started.
  explicit Pool(int threads) {
    workers_.reserve(static_cast<std::size_t>(threads - 1));
    for (int t = 1; t < threads; ++t) {
      try {
        workers_.emplace_back([this] { worker_main(); });
      } catch (const std::system_error& e) {
        stop_workers();
        throw Error("cannot start thread " + std::to_string(t + 1) + " of " +
                    std::to_string(threads) + " (" + e.what() +
                    "); ask for fewer threads (OMP_NUM_THREADS, or tenfold's set_num_threads)");
      }
    }
  }
  ~Pool() { stop_workers(); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // One job at a time (the caller holds the pool's run lock).
  void run(index_t count, TaskRef task) {
    task_ = &task;
    count_ = count;
    next_.store(0);
    error_ = nullptr;
    closed_.store(false);
    generation_.fetch_add(1);
    generation_.notify_all();
    take_tasks();
    // Every index is taken: wait for the workers still inside a task. A worker that
    // arrives after `closed_` is set sees it and leaves the job alone (both sides use
    // sequentially consistent operations on `active_` and `closed_`).
    closed_.store(true);
    wait_until(
        active_, [](int a) { return a == 0; }, spin_micros());
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void stop_workers() {
    stop_.store(true);
    generation_.fetch_add(1);
    generation_.notify_all();
    for (std::thread& w : workers_) w.join();
  }

  void worker_main() {
    bool serial_blas = false;
    std::uint64_t seen = 0;
    for (;;) {
      wait_until(
          generation_, [seen](std::uint64_t g) { return g != seen; }, spin_micros());
      seen = generation_.load();
      if (stop_.load()) return;
      active_.fetch_add(1);
      if (!closed_.load()) {
        // BLAS calls inside tasks run on this thread alone. Said inside the first job,
        // while its caller waits, never at start-up: a worker that starts late would
        // otherwise enter the OpenMP runtime while the process exits, and LLVM's
        // runtime aborts then.
        if (!serial_blas) omp_set_num_threads(1);
        serial_blas = true;
        take_tasks();
      }
      if (active_.fetch_sub(1) == 1) active_.notify_all();
    }
  }

  void take_tasks() {
    inside_task = true;
    for (index_t i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) {
      try {
        (*task_)(i);
      } catch (...) {
        const std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
        next_.store(count_);
      }
    }
    inside_task = false;
  }

  std::vector<std::thread> workers_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> active_{0};
  std::atomic<bool> closed_{true};
  std::atomic<bool> stop_{false};
  std::atomic<index_t> next_{0};
  index_t count_ = 0;
  const TaskRef* task_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// The process's pool, created on first use and re-created when the thread count
// changes. Never destroyed: its workers sleep until the process exits, so no static
// destructor can race with a late call. A forked child starts without workers, so it
// forgets the parent's pool (leaked) and makes its own.
std::mutex pool_mutex;
Pool* pool = nullptr;

void forget_pool_in_child() {
  new (&pool_mutex) std::mutex();
  pool = nullptr;
}

}  // namespace

int pool_threads() { return inside_task ? 1 : num_threads(); }

void parallel_for(index_t count, TaskRef task) {
  const int threads = pool_threads();
  std::unique_lock lock(pool_mutex, std::defer_lock);
  if (count < 2 || threads < 2 || !lock.try_lock()) {
    for (index_t i = 0; i < count; ++i) task(i);
    return;
  }
  static const int registered = pthread_atfork(nullptr, nullptr, forget_pool_in_child);
  (void)registered;
  if (pool == nullptr || pool->threads() != threads) {
    delete pool;
    pool = nullptr;
    pool = new Pool(threads);
  }
  pool->run(count, task);
}

#if defined(TENFOLD_BLAS_OPENBLAS)
// OpenBLAS's own entry points (cblas.h of every OpenBLAS build): its threading model
// (0 sequential, 1 its own pthreads, 2 OpenMP) and its process-wide thread count.
extern "C" int openblas_get_parallel(void);
extern "C" void openblas_set_num_threads(int num_threads);
#elif defined(TENFOLD_BLAS_BLIS)
// BLIS's process-wide thread count (blis.h; dim_t is a 64-bit integer).
extern "C" void bli_thread_set_num_threads(std::int64_t num_threads);
#endif

SerialBlas::SerialBlas() : saved_(omp_get_max_threads()) {
  // OpenBLAS's OpenMP build follows the calling thread's OpenMP thread count, set here
  // for the guard's lifetime. OpenBLAS's pthreads build (another distribution's default,
  // and scipy-openblas, the wheel's) ignores it and would start its own spinning threads
  // inside the pool's tasks; BLIS reads its count from the environment (OMP_NUM_THREADS,
  // which also sets the library's). Those are made single-threaded for the process,
  // once, since the library does its own threading.
  static const bool own_threads = [] {
#if defined(TENFOLD_BLAS_OPENBLAS)
    if (openblas_get_parallel() != 1) return false;
    openblas_set_num_threads(1);
    return true;
#elif defined(TENFOLD_BLAS_BLIS)
    bli_thread_set_num_threads(1);
    return true;
#endif
  }();
  (void)own_threads;
  omp_set_num_threads(1);
}
SerialBlas::~SerialBlas() { omp_set_num_threads(saved_); }

}  // namespace detail

// (parallel_for on this thread then runs serially, as inside a task)
OnThisThread::OnThisThread() : saved_(detail::inside_task) { detail::inside_task = true; }
OnThisThread::~OnThisThread() { detail::inside_task = saved_; }

}  // namespace tenfold
