// nccl_host_comm.hpp: a HostComm over an NCCL communicator, for jobs started by torchrun (no MPI).
// The front end's bookkeeping (barrier, allgather of strings and doubles) goes through small NCCL
// all-gathers on a stream of its own, each bounded by `timeout_s` like the MPI HostComm's.
#pragma once

#include <nccl.h>

#include <memory>

#include "host_comm.hpp"

namespace collmm::cuda {

// Takes ownership of `comm` (one rank per process, on GPU `device`); a wait that fails aborts it
// and ends the process (the job's front ends).
std::unique_ptr<HostComm> make_nccl_host_comm(ncclComm_t comm, int device, int timeout_s);
// Over the caller's `comm`, never destroyed here; a wait that fails aborts it (so that no peer
// waits on) and throws std::runtime_error naming the rank and the phase (a library's caller).
std::unique_ptr<HostComm> borrow_nccl_host_comm(ncclComm_t comm, int device, int timeout_s);

}  // namespace collmm::cuda
