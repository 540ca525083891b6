// memory.cpp: the node's available memory and the host side of the memory check (collmm/memory.hpp).
#include "collmm/memory.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "collmm/types.hpp"

namespace collmm {

int64_t available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

std::string gib(double bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return s;
}

void check_host_memory(int64_t bytes_per_process, int processes) {
  const int64_t available = available_host_bytes();
  if (available < 0) return;  // not Linux: nothing to compare with
  const double need = static_cast<double>(bytes_per_process) * processes;
  if (need <= static_cast<double>(available)) return;
  std::ostringstream msg;
  msg << "this run needs about " << gib(static_cast<double>(bytes_per_process)) << " of host memory per process ("
      << gib(need) << " for the " << processes << " process(es) on this node), but only "
      << gib(static_cast<double>(available))
      << " is available: use smaller sizes, more nodes or fewer ranks per node (nothing was allocated)";
  throw UsageError(msg.str());
}

}  // namespace collmm
