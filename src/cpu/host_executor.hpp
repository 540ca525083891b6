// host_executor.hpp: the cpu backend's Executor, made from the pieces a process brings: a HostComm
// for the agreement checks (and to end the job when a run hangs) and a Transport for the plan's
// comm steps. GEMMs run on OpenBLAS (blas_gemm.hpp) with the thread count already set; buffers
// are host memory, the executor's own or the caller's (Executor::bind).
#pragma once

#include <memory>

#include "collmm/backend_options.hpp"
#include "executor.hpp"
#include "transport.hpp"

namespace collmm::cpu {

// One rank per process: the transport's rank of its size. blas_threads and ranks_on_node (this
// node's ranks) say whether the timings can show overlap (timing_note) and share the node's memory.
std::unique_ptr<Executor> make_host_executor(const BackendOptions& options, std::unique_ptr<HostComm> host,
                                             std::unique_ptr<Transport> transport, int blas_threads = 1,
                                             int ranks_on_node = 1);

// The cores this process may run on (sched_getaffinity).
int affinity_cores();

}  // namespace collmm::cpu
