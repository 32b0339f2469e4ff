// Host allocations, and the memory estimates checked before large ones: a request that
// cannot fit is refused with the estimate and what is available, instead of failing
// halfway.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/compute.hpp"

namespace tenfold::detail {

/// Host memory this process can still allocate: MemAvailable of /proc/meminfo,
/// lowered to the room left under a cgroup (v2 or v1) memory limit; the available
/// physical pages (sysconf) where /proc/meminfo cannot be read. A reading serves the calls
/// of the next 20 ms.
std::uint64_t host_available_bytes();

/// Asks Linux (madvise) to back the 2 MiB pages that lie wholly inside [p, p + bytes)
/// with transparent huge pages when they are first touched; advice only (a no-op
/// elsewhere, or where transparent huge pages are off).
void advise_huge_pages(void* p, std::size_t bytes);

/// Uninitialised host memory of `bytes` (release it with std::free), 64-byte aligned.
/// From 2 MiB up it starts on a 2 MiB boundary and Linux is asked (madvise) to back it
/// with transparent huge pages, as NumPy does for its arrays: a tensor-sized buffer then
/// faults in 512 times fewer pages, and strided reads of it miss the TLB far less.
/// Throws std::bad_alloc.
void* allocate_host(std::size_t bytes);

/// The room to ask of allocate_host for n values of T that a kernel reads or adds to at
/// random rows (factor rows, per-thread output copies): from 256 KiB up, whole 2 MiB, so
/// that they sit on huge pages; with 4 KiB pages the first-level TLB covers only a few
/// hundred KiB, and a row at random misses it.
template <class T>
std::size_t random_rows_room(std::size_t n) {
  constexpr std::size_t kFrom = std::size_t{1} << 18, kHuge = std::size_t{1} << 21;
  if (n > (SIZE_MAX - kHuge) / sizeof(T) || n * sizeof(T) < kFrom) return n;
  return (n * sizeof(T) + kHuge - 1) / kHuge * kHuge / sizeof(T);
}

/// n values of T in allocate_host's memory (contents undefined): the host buffers that
/// need no backend, such as a row-major input's copy in axis order.
template <class T>
class HostArray {
 public:
  HostArray() = default;
  explicit HostArray(std::size_t n) { resize(n); }
  /// Room for n values; keeps the storage (and its contents) when it is large enough.
  void resize(std::size_t n) {
    if (n <= capacity_) return;
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    p_.reset(allocate_host(n * sizeof(T)));
    capacity_ = n;
  }
  T* data() const { return static_cast<T*>(p_.get()); }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> p_;
  std::size_t capacity_ = 0;
};

/// "3.20 GiB (3435973837 bytes)"
std::string bytes_string(double bytes);

/// Throws MemoryError when `elements` values of T (a count in double, which cannot
/// overflow) exceed what `c` can allocate; `what` names the request in the message.
template <class T>
void require_memory(Compute<T>& c, double elements, const std::string& what);

}  // namespace tenfold::detail
