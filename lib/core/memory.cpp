#include "core/memory.hpp"

#include <unistd.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>
#include <new>
#include <sstream>

#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

// The first number in `path`, or nothing ("max" and missing files give nothing).
bool read_number(const char* path, std::uint64_t& value) {
  std::ifstream in(path);
  return static_cast<bool>(in >> value);
}

// Room left under the cgroup memory limit of this process, or the largest value.
std::uint64_t cgroup_room() {
  std::uint64_t limit = 0, used = 0;
  if (read_number("/sys/fs/cgroup/memory.max", limit) &&
      read_number("/sys/fs/cgroup/memory.current", used)) {
    return limit > used ? limit - used : 0;
  }
  if (read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", limit) &&
      read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", used)) {
    return limit > used ? limit - used : 0;
  }
  return std::numeric_limits<std::uint64_t>::max();
}

// MemAvailable (or the free physical pages) and the cgroup's room, read now.
std::uint64_t read_available_bytes() {
  std::uint64_t available = 0;
  bool found = false;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    std::uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") {
      available = kib * 1024;
      found = true;
      break;
    }
  }
  if (!found) {
    const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    available = pages > 0 && page > 0
                    ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                    : std::numeric_limits<std::uint64_t>::max();
  }
  return std::min(available, cgroup_room());
}

// Reading those files costs about 50 us, as much as a whole CP-ALS call on a small tensor
// (PARAFAC2 makes 15 per iteration): a reading serves the calls of the next 20 ms.
constexpr auto kAvailableBytesReuse = std::chrono::milliseconds(20);

}  // namespace

std::uint64_t host_available_bytes() {
  static std::mutex mutex;
  static std::chrono::steady_clock::time_point read_at;
  static std::uint64_t last = 0;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto now = std::chrono::steady_clock::now();
  if (last == 0 || now - read_at > kAvailableBytesReuse) {
    last = read_available_bytes();
    read_at = now;
  }
  return last;
}

namespace {
constexpr std::size_t kHugePage = std::size_t{1} << 21;
}  // namespace

void advise_huge_pages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (start + kHugePage - 1) / kHugePage * kHugePage;
  const std::uintptr_t end = (start + bytes) / kHugePage * kHugePage;
  // Its failure changes nothing but the page size.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

void* allocate_host(std::size_t bytes) {
  const std::size_t align = bytes >= kHugePage ? kHugePage : 64;
  if (bytes > SIZE_MAX - align) throw std::bad_alloc();
  // aligned_alloc wants a multiple of the alignment.
  const std::size_t size = std::max<std::size_t>(1, (bytes + align - 1) / align) * align;
  void* p = std::aligned_alloc(align, size);
  if (p == nullptr) throw std::bad_alloc();
  if (align == kHugePage) advise_huge_pages(p, size);
  return p;
}

std::string bytes_string(double bytes) {
  char text[96];
  std::snprintf(text, sizeof text, "%.2f GiB (%.0f bytes)", bytes / (1024.0 * 1024.0 * 1024.0),
                bytes);
  return text;
}

template <class T>
void require_memory(Compute<T>& c, double elements, const std::string& what) {
  const double need = elements * static_cast<double>(sizeof(T));
  const std::uint64_t available = c.available_bytes();
  if (need <= static_cast<double>(available)) return;
  throw MemoryError(what + " needs about " + bytes_string(need) + " of " +
                    (c.host_memory() ? "host" : "device") + " memory, but only " +
                    bytes_string(static_cast<double>(available)) + " are available");
}

template void require_memory<float>(Compute<float>&, double, const std::string&);
template void require_memory<double>(Compute<double>&, double, const std::string&);
template void require_memory<std::complex<float>>(Compute<std::complex<float>>&, double,
                                                  const std::string&);
template void require_memory<std::complex<double>>(Compute<std::complex<double>>&, double,
                                                   const std::string&);

}  // namespace tenfold::detail
