// The thread count of tenfold::num_threads / set_num_threads, in an object of its own:
// libtenfold_mpi.so links libtenfold.so ahead of its copy of the internals, so this
// object is not copied into it, and its pool (core/thread_pool.cpp) follows the count
// set through libtenfold.so.
#include "tenfold/threads.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include "tenfold/error.hpp"

namespace tenfold {
namespace {

// First entry of a thread-count variable ("4" or "4,2"), or 0 when unset or not a count.
int threads_from_environment(const char* name) {
  const char* s = std::getenv(name);
  if (s == nullptr) return 0;
  const std::string_view v(s);
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || n < 1 || (end != v.data() + v.size() && *end != ',')) return 0;
  return n;
}

// ceil(quota / period) of the first CPU quota found: cgroup v2 cpu.max along this
// process's cgroup path and its parents, then cgroup v1 cpu.cfs_quota_us; 0 for none.
int cgroup_cpu_limit() {
  const auto limit = [](double quota, double period) {
    return quota > 0 && period > 0 ? static_cast<int>(std::ceil(quota / period)) : 0;
  };
  std::ifstream groups("/proc/self/cgroup");
  std::string line, v2_path;
  while (std::getline(groups, line)) {
    if (line.rfind("0::", 0) == 0) v2_path = line.substr(3);
  }
  for (std::string path = v2_path; !path.empty();) {
    std::ifstream f("/sys/fs/cgroup" + (path == "/" ? std::string() : path) + "/cpu.max");
    std::string quota;
    double period = 0;
    if (f >> quota >> period && quota != "max") return limit(std::atof(quota.c_str()), period);
    if (path == "/") break;
    const auto slash = path.find_last_of('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  double quota = 0, period = 0;
  if (q >> quota && p >> period) return limit(quota, period);
  return 0;
}

int default_threads() {
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    if (const int n = threads_from_environment(name); n > 0) return n;
  }
  int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = std::max(1, CPU_COUNT(&set));
  if (const int quota = cgroup_cpu_limit(); quota > 0) cpus = std::min(cpus, quota);
  return cpus;
}

std::atomic<int> requested_threads{0};  // 0: default_threads()

}  // namespace

int num_threads() {
  static const int fallback = default_threads();
  const int n = requested_threads.load();
  return n > 0 ? n : fallback;
}

void set_num_threads(int threads) {
  if (threads < 0) {
    throw InvalidArgument("thread count " + std::to_string(threads) + " is negative");
  }
  requested_threads.store(threads);
}

}  // namespace tenfold
