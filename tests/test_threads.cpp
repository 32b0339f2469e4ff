// The cpu backend's worker threads: every task runs once, errors come back, nested and
// concurrent callers are safe, idle workers sleep, and no OpenMP team is ever started.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/compute.hpp"
#include "core/thread_pool.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/threads.hpp"

using namespace tenfold;
using tenfold::detail::parallel_for;

namespace {

// Restores the default thread count when a test ends.
struct ThreadCount {
  explicit ThreadCount(int n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(0); }
};

int process_threads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// CPU seconds (user + system) of each thread of this process, by thread id, from
// /proc/self/task/<tid>/stat (fields 14 and 15, in clock ticks).
std::map<int, double> thread_cpu_seconds() {
  std::map<int, double> cpu;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  DIR* d = opendir("/proc/self/task");
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string line;
    std::getline(f, line);
    // Fields after the command name, which is in parentheses and may hold spaces.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
    }
    cpu[std::atoi(e->d_name)] = (utime + stime) / tick;
  }
  closedir(d);
  return cpu;
}

}  // namespace

TEST(Threads, SettingAndDefault) {
  EXPECT_GE(num_threads(), 1);
  {
    const ThreadCount three(3);
    EXPECT_EQ(num_threads(), 3);
  }
  EXPECT_GE(num_threads(), 1);
  EXPECT_THROW(set_num_threads(-1), InvalidArgument);
}

TEST(Threads, EveryIndexRunsOnce) {
  for (int threads : {1, 2, 3, 5}) {
    const ThreadCount count(threads);
    for (index_t n : {0, 1, 2, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      parallel_for(n, [&](index_t i) { hits[static_cast<std::size_t>(i)].fetch_add(1); });
      for (index_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1)
            << "index " << i << " of " << n << " on " << threads << " threads";
    }
  }
}

TEST(Threads, WorkersTakePart) {
  const ThreadCount two(2);
  // Tasks that wait for each other finish only if two threads run them at once.
  std::atomic<int> arrived{0};
  parallel_for(2, [&](index_t) {
    arrived.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (arrived.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  });
  EXPECT_EQ(arrived.load(), 2);
}

TEST(Threads, NestedLoopsRunSerially) {
  const ThreadCount two(2);
  std::atomic<int> total{0};
  parallel_for(4, [&](index_t) {
    EXPECT_EQ(detail::pool_threads(), 1);
    parallel_for(10, [&](index_t) { total.fetch_add(1); });
  });
  EXPECT_EQ(total.load(), 40);
}

TEST(Threads, OnThisThreadRunsEveryTaskOnTheCaller) {
  const ThreadCount two(2);
  const std::thread::id caller = std::this_thread::get_id();
  {
    const OnThisThread serial;
    EXPECT_EQ(detail::pool_threads(), 1);
    std::vector<index_t> order;
    parallel_for(8, [&](index_t i) {
      EXPECT_EQ(std::this_thread::get_id(), caller);
      order.push_back(i);
    });
    EXPECT_EQ(order, (std::vector<index_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    { const OnThisThread nested; }
    EXPECT_EQ(detail::pool_threads(), 1);  // the inner scope restored the outer one's
  }
  EXPECT_EQ(detail::pool_threads(), 2);
  // other threads are not affected by a scope on this one
  const OnThisThread serial;
  std::thread other([] { EXPECT_EQ(detail::pool_threads(), 2); });
  other.join();
}

TEST(Threads, FirstErrorIsRethrownAndThePoolStaysUsable) {
  const ThreadCount two(2);
  EXPECT_THROW(parallel_for(100,
                            [](index_t i) {
                              if (i == 17) throw std::runtime_error("task 17");
                            }),
               std::runtime_error);
  std::atomic<int> done{0};
  parallel_for(50, [&](index_t) { done.fetch_add(1); });
  EXPECT_EQ(done.load(), 50);
}

TEST(Threads, ConcurrentCallersEachGetEveryIndex) {
  const ThreadCount two(2);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<std::atomic<int>> hits(33);
        parallel_for(33, [&](index_t i) { hits[static_cast<std::size_t>(i)].fetch_add(1); });
        for (auto& h : hits) wrong += h.load() != 1;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Threads, IdleWorkersSleep) {
  // Threads that exist before the pool is made (a pthreads build of OpenBLAS starts
  // its own at load, and they spin for a while) are not the pool's: only threads
  // created from here on are counted.
  const std::map<int, double> before_pool = thread_cpu_seconds();
  const ThreadCount four(4);  // a count no earlier test used: a new pool
  std::atomic<int> done{0};
  parallel_for(8, [&](index_t) { done.fetch_add(1); });
  // The workers spin for microseconds, then block: 200 ms of idleness cost next to no
  // CPU time (three spinning workers would burn about 600 ms).
  const auto pool_cpu = [&] {
    double sum = 0.0;
    for (const auto& [tid, seconds] : thread_cpu_seconds())
      if (!before_pool.contains(tid)) sum += seconds;
    return sum;
  };
  const double before = pool_cpu();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(pool_cpu() - before, 0.05);
  EXPECT_EQ(done.load(), 8);
}

TEST(Threads, ChildAfterForkComputes) {
  const ThreadCount two(2);
  parallel_for(4, [](index_t) {});  // the parent's pool exists
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<int> done{0};
    parallel_for(16, [&](index_t) { done.fetch_add(1); });
    _exit(done.load() == 16 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Threads, ProcessMayExitWhileWorkersStart) {
  // Processes that exit right after their first loop, their workers perhaps still
  // starting: none may enter the OpenMP runtime then (LLVM's aborts when a thread
  // registers while it shuts down), so every one exits cleanly.
  int failed = 0;
  for (int child = 0; child < 40; ++child) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl(TENFOLD_EXIT_HELPER, TENFOLD_EXIT_HELPER, static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  EXPECT_EQ(failed, 0) << "processes that did not exit cleanly, of 40";
}

TEST(Threads, CpAlsStartsNoOpenMpTeamAndIsDeterministic) {
  const ThreadCount two(2);
  RandomCpOptions planted;
  planted.dims = {120, 100, 90};
  planted.rank = 12;
  planted.noise = 0.05;
  const auto p = random_cp_tensor<double>(planted);
  CpOptions o;
  o.rank = 12;
  o.max_iters = 5;
  o.tol = 0.0;
  const int before = process_threads();
  const CpResult<double> a = cp_als(p.tensor, o);
  // A product large enough for OpenBLAS to thread it, were it allowed to.
  const auto c = detail::make_compute<double>(Backend::cpu);
  const index_t n = 600;
  std::vector<double> x(static_cast<std::size_t>(n * n), 0.5), y(x.size());
  c->gemm(detail::Op::none, detail::Op::none, n, n, n, 1.0, x.data(), n, x.data(), n, 0.0, y.data(),
          n);
  EXPECT_EQ(y[0], 0.25 * static_cast<double>(n));
  // The pool's one worker at most: BLAS ran single-threaded inside its tasks, so no
  // OpenMP thread (which would spin at barriers) was created.
  EXPECT_LE(process_threads(), before + 1);
  const CpResult<double> b = cp_als(p.tensor, o);
  EXPECT_EQ(a.fit_history, b.fit_history);
  EXPECT_EQ(a.model.factors[0].values(), b.model.factors[0].values());
}
