// aten_executor.hpp: an Executor that walks a Plan with ATen ops on the caller's device and the
// plan's comm through a c10d ProcessGroup: the ops' executor for CUDA tensors (NCCL groups), and
// for CPU tensors when asked (collmm.set_cpu_executor("aten")). One issuing thread: steps are
// issued in list order. GEMMs (at::mm_out / addmm_), copies and adds run on the current stream (on
// CPU: the calling thread). Comm steps return c10d Works that run beside them (NCCL's own stream,
// gloo's threads). A Work is waited for (Work::wait: on CUDA a stream dependency, no host sync)
// only when a later step needs it: a step waits for the steps in its `waits` and for the step
// before it on its lane. So lanes collapse into one compute stream plus the group's comm.
//
// On an NCCL group, once c10d has made the group's communicator (a shape's first run goes through
// c10d), the transfers skip c10d. Each comm step is one ncclGroup of sends and receives (or one
// ncclAllGather / ncclReduceScatter) on a comm stream of the executor's. It runs between an event
// of the current stream and one the current stream waits for (nccl_comm.hpp). The run's end is
// watched (comm_watch.hpp), as c10d's watchdog watches its Works. collmm.set_comm("c10d") keeps
// c10d.
//
//   issue:   send/recv 0 | gemm 0 | wait(comm 0) send/recv 1 | gemm 1 | ...
//   stream:  gemm 0 ......... gemm 1 ......... (gemm j+1 after comm j)
//   comm:    comm 0 ......... comm 1 .........
#pragma once

#include <memory>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "executor.hpp"
#include "nccl_comm.hpp"

namespace collmm::torch_ext {

std::unique_ptr<Executor> make_aten_executor(c10d::ProcessGroup* group, c10::Device device,
                                             std::unique_ptr<HostComm> host, std::shared_ptr<GroupComm> comm);

}  // namespace collmm::torch_ext
