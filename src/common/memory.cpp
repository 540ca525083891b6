// memory.cpp: the memory this process and this node may still use, and the host side of the
// memory check (memory.hpp). Three bounds, the tightest wins. The node's MemAvailable. The
// memory cgroup's limit less its usage (v2 memory.max, v1 memory.limit_in_bytes: a container's or
// a Slurm job's limit), for all the processes of the node together. This process's own
// RLIMIT_AS / RLIMIT_DATA (ulimit -v, ulimit -d) less what it already maps.
#include "memory.hpp"

#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

#include "collmm/types.hpp"

namespace collmm {
namespace {

constexpr int64_t kNoLimit = int64_t(1) << 60;  // cgroup v1 writes "no limit" as about 2^63

// The first number in a file; -1 if it cannot be read (or says "max").
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// A field of /proc/self/status in bytes ("VmSize:  1234 kB"); 0 if absent.
int64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    int64_t kib = 0;
    if (key == field + ":" && in >> kib) return kib * 1024;
    std::getline(in, key);
  }
  return 0;
}

// The memory cgroup of this process: its limit less its usage, or -1 where there is no limit.
int64_t cgroup_headroom() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // v2: "0::/path"; v1: "4:memory:/path" (controllers may be listed together: "4:memory,foo:/path")
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    const bool v2 = controllers.empty();
    if (!v2 && ("," + controllers + ",").find(",memory,") == std::string::npos) continue;
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const char* limit_file = v2 ? "/memory.max" : "/memory.limit_in_bytes";
    const char* usage_file = v2 ? "/memory.current" : "/memory.usage_in_bytes";
    // Inside a container the process's own cgroup is often mounted as the root.
    for (const std::string& dir : {root + path, root}) {
      const int64_t limit = read_number(dir + limit_file);
      if (limit < 0) continue;
      if (limit >= kNoLimit) return -1;
      const int64_t usage = read_number(dir + usage_file);
      return limit - (usage > 0 ? usage : 0);
    }
  }
  return -1;
}

// RLIMIT_AS and RLIMIT_DATA less what this process already uses of each; -1 where none is set.
int64_t rlimit_headroom(std::string& which) {
  int64_t best = -1;
  for (auto [resource, name, field] : {std::tuple{RLIMIT_AS, "RLIMIT_AS (ulimit -v)", "VmSize"},
                                       std::tuple{RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)", "VmData"}}) {
    rlimit r{};
    if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) continue;
    const int64_t left = static_cast<int64_t>(r.rlim_cur) - status_bytes(field);
    if (best < 0 || left < best) best = left > 0 ? left : 0, which = name;
  }
  return best;
}

}  // namespace

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
  std::ostringstream msg;
  msg << "this run needs about " << gib(static_cast<double>(bytes_per_process)) << " of host memory per process";
  std::string rlimit;
  const int64_t own = rlimit_headroom(rlimit);
  if (own >= 0 && bytes_per_process > own) {
    msg << ", but this process's " << rlimit << " leaves it " << gib(static_cast<double>(own))
        << ": raise the limit or use smaller sizes or more ranks (nothing was allocated)";
    throw UsageError(msg.str());
  }
  const double need = static_cast<double>(bytes_per_process) * processes;
  const int64_t available = available_host_bytes();
  const int64_t cgroup = cgroup_headroom();
  if (available >= 0 && need > static_cast<double>(available)) {
    msg << " (" << gib(need) << " for the " << processes << " process(es) on this node), but only "
        << gib(static_cast<double>(available))
        << " is available: use smaller sizes, more nodes or fewer ranks per node (nothing was allocated)";
    throw UsageError(msg.str());
  }
  if (cgroup >= 0 && need > static_cast<double>(cgroup)) {
    msg << " (" << gib(need) << " for the " << processes << " process(es) on this node), but the memory cgroup's "
        << "limit (a container's or the batch job's) leaves " << gib(static_cast<double>(cgroup))
        << ": use smaller sizes, more nodes or fewer ranks per node, or ask for more memory (nothing was allocated)";
    throw UsageError(msg.str());
  }
}

}  // namespace collmm
