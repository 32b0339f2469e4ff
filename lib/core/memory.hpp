// Memory estimates checked before large allocations: a request that cannot fit is
// refused with the estimate and what is available, instead of failing halfway.
#pragma once

#include <cstdint>
#include <string>

#include "core/compute.hpp"

namespace tenfold::detail {

/// Host memory this process can still allocate: MemAvailable of /proc/meminfo,
/// lowered to the room left under a cgroup (v2 or v1) memory limit; the available
/// physical pages (sysconf) where /proc/meminfo cannot be read.
std::uint64_t host_available_bytes();

/// "3.20 GiB (3435973837 bytes)"
std::string bytes_string(double bytes);

/// Throws MemoryError when `elements` values of T (a count in double, which cannot
/// overflow) exceed what `c` can allocate; `what` names the request in the message.
template <class T>
void require_memory(Compute<T>& c, double elements, const std::string& what);

}  // namespace tenfold::detail
