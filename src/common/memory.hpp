// memory.hpp: what a run will need in memory, estimated before anything is allocated. And
// the host side of the check that refuses a run the machine cannot hold: a UsageError naming the
// figures, instead of the OOM killer ending one rank with no message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace collmm {

// Bytes one process needs at its peak: in host memory, and in device memory per local rank (the
// plan's buffers; on cpu these are host memory too and device_bytes stays empty).
struct MemoryNeed {
  int64_t host_bytes = 0;
  std::vector<int64_t> device_bytes;  // per local rank, in local_ranks() order
};

// MemAvailable of /proc/meminfo, in bytes; -1 where it cannot be read.
int64_t available_host_bytes();

// "12.5 GiB"
std::string gib(double bytes);

// Throws UsageError when `processes` processes of `bytes_per_process` each do not fit: this
// process's RLIMIT_AS / RLIMIT_DATA, the node's available memory, or its memory cgroup's limit
// (v1 or v2), whichever is tightest; the message names the bound.
void check_host_memory(int64_t bytes_per_process, int processes);

}  // namespace collmm
