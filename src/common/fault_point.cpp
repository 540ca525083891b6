// fault_point.cpp: the hidden fault hooks (src/common/fault_point.hpp).
#include "fault_point.hpp"

#include <csignal>
#include <cstdlib>
#include <mutex>

namespace collmm {
namespace {

struct Armed {
  std::mutex mutex;
  std::string point;
  int die_rank = -1, hang_rank = -1;
  bool fired = false;
};

Armed& armed() {
  static Armed a;
  return a;
}

}  // namespace

void arm_fault_point(const std::string& point, int die_rank, int hang_rank) {
  Armed& a = armed();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.point = point;
  a.die_rank = die_rank;
  a.hang_rank = hang_rank;
  a.fired = false;
}

void fault_point(const char* point, int rank) {
  Armed& a = armed();
  int signal = 0;
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    if (a.fired || a.point.empty() || a.point != point) return;
    if (rank < 0) rank = launcher_rank();
    if (rank == a.die_rank) signal = SIGKILL;
    if (rank == a.hang_rank) signal = SIGSTOP;
    if (signal) a.fired = true;
  }
  if (signal) std::raise(signal);
}

int launcher_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return -1;
}

}  // namespace collmm
