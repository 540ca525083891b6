// fault_point.hpp: hidden hooks for the tests of faults (collmm-bench's --debug-die-rank,
// --debug-hang-rank and --debug-phase): a process told to kill itself (SIGKILL) or to stop
// (SIGSTOP) at a named point does so when it gets there. The points outside the bench's own
// phases:
//   - "mpi_init" (before MPI_Init), "mpi_finalize" (after the bounded barrier, before MPI_Finalize);
//   - "sendrecv" (the cpu transport's first point-to-point group, before it is posted);
//   - "probe" (the check of an output before any work: its probe temporary created, not removed);
//   - "write" (an output file opened under its temporary name, before its bytes are written);
//   - "rename" (the temporary written and flushed, before it is renamed into place).
#pragma once

#include <string>

namespace collmm {

// Arms one point for the process that runs rank `die_rank` (killed there) or `hang_rank`
// (stopped there); -1: none. Nothing is armed unless a test asks.
void arm_fault_point(const std::string& point, int die_rank, int hang_rank);

// Called at a point: kills or stops this process if the point is armed for `rank` (-1: this
// process's rank as its launcher set it, for the points before MPI is up). Fires once.
void fault_point(const char* point, int rank = -1);

// This process's rank as mpirun, Slurm or torchrun set it in the environment; -1 if none.
int launcher_rank();

}  // namespace collmm
