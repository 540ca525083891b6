// mpi_host.hpp (internal: it pulls in mpi.h): MPI as the HostComm of a job of several processes
// (mpirun), and the MPI thread level check. Used by the cpu backend (its transport) and by cuda's
// multi-process bootstrap.
#pragma once

#include <chrono>
#include <memory>

#include <mpi.h>

#include "deadline.hpp"
#include "host_comm.hpp"
#include "poll.hpp"

namespace collmm {

// Initializes MPI once (asking for MPI_THREAD_MULTIPLE) and returns MPI_COMM_WORLD as a HostComm;
// MPI_Finalize runs when the last one is destroyed, after a barrier bounded like every collective.
// Throws UsageError if the MPI library provides a thread level below `needed` (e.g.
// MPI_THREAD_SERIALIZED), naming both levels. Every collective (barrier, allgather) is non-blocking
// MPI tested until done, napping between tests: a process that waits more than `timeout_s` seconds
// prints "collmm: rank r of P: ... <phase> ..." and aborts the job (MPI_Abort, exit code 3).
std::unique_ptr<HostComm> make_mpi_host_comm(int needed_thread_level, int timeout_s = 300);

// Tests `request` until it completes (true) or `deadline` passes (false), at `pace` (poll.hpp), so
// a process left waiting does not hold a core.
bool mpi_wait_until(MPI_Request& request, std::chrono::steady_clock::time_point deadline, PollPace pace = kHostPace);

// Ranks of MPI_COMM_WORLD on this node (MPI_COMM_TYPE_SHARED): how many, and which one is this.
int mpi_node_size();
int mpi_node_rank();

// True when this process was started by mpirun/mpiexec (Open MPI, MPICH or Slurm PMI variables).
bool launched_by_mpi();

// Checks an MPI call's return code; throws std::runtime_error with file:line, the call and the
// MPI error string. Needs MPI_ERRORS_RETURN on the communicator (make_mpi_host_comm sets it on
// MPI_COMM_WORLD).
void mpi_check(int code, const char* call, const char* file, int line);
#define COLLMM_MPI(call) ::collmm::mpi_check((call), #call, __FILE__, __LINE__)

}  // namespace collmm
