// nccl_comm.hpp: the NCCL communicator of a c10d NCCL group, called directly. c10d wraps each of
// its calls in a Work, events, stashed tensors, a watchdog entry and a flight-recorder entry: 40-110
// us of host time per call on the GPU machine (docs/perf/log-2026-12.md, 2026-12-04), while a plan
// makes one call per step.
// Here a step's sends and receives are one ncclGroup of ncclSend/ncclRecv and a collective one
// ncclAllGather / ncclReduceScatter, on the stream the caller gives.
//
// Nothing is created or linked by collmm: the communicator is the group's own
// (ProcessGroupNCCL::getCommPtr, looked up in the libtorch_cuda.so this process loaded) and the
// functions the NCCL that library runs (looked up through its handle: libnccl.so.2 in the wheels).
// Where any is missing (a CPU build of torch, a torch without getCommPtr, NCCL linked in and
// hidden), of() gives null and the caller goes through c10d. Errors come back as c10::DistBackendError naming the call,
// the rank and NCCL's own words.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "collmm/types.hpp"
#include "comm_watch.hpp"

namespace collmm::torch_ext {

class NcclComm {
 public:
  struct Message {
    int peer;
    void* data;
    size_t bytes;
  };

  // The group's communicator on `device`, where it can be reached. That needs three things. The
  // group's CUDA backend is a ProcessGroupNCCL (not a wrapper) that has made its communicators
  // (ProcessGroupNCCL::isInitialized; the caller has run a c10d transfer on `device` first, so the
  // one of `device` is among them). It has not aborted them (getCommPtr throws then). This process
  // has the NCCL torch runs and those two members (above). Else null. Cheap (two lookups under
  // c10d's locks): asked again at every run, so a communicator c10d aborted or replaced since is
  // never used.
  static std::unique_ptr<NcclComm> of(c10d::ProcessGroup& group, c10::Device device);

  // On `stream` (a cudaStream_t): every receive and send of a step, in one ncclGroup.
  void sendrecv(const std::vector<Message>& recvs, const std::vector<Message>& sends, void* stream) const;
  // `mine` (bytes_each) into rank q's place of `all` (q * bytes_each on), for every q.
  void all_gather(const void* mine, void* all, size_t bytes_each, void* stream) const;
  // The sum over the ranks of `all`'s part q (count_each elements) into rank q's `mine`.
  void reduce_scatter(const void* all, void* mine, size_t count_each, Dtype dtype, void* stream) const;
  // The group's backend, to abort it (c10d's own abort: its communicators end, their kernels too).
  const c10::weak_intrusive_ptr<c10d::Backend>& backend() const { return backend_; }

 private:
  NcclComm(void* comm, int rank, std::chrono::milliseconds bound, c10::weak_intrusive_ptr<c10d::Backend> backend)
      : comm_(comm), rank_(rank), bound_(bound), backend_(std::move(backend)) {}
  // Throws DistBackendError for an NCCL error; waits out ncclInProgress (a non-blocking communicator).
  void check(int result, const char* what) const;

  void* comm_;  // ncclComm_t, the group's, as of this run (of() is asked again at every run)
  int rank_;
  std::chrono::milliseconds bound_;  // of a wait for a non-blocking communicator
  c10::weak_intrusive_ptr<c10d::Backend> backend_;
};

// What the executors of one session (group, device) share about the group's transfers: whether one
// went through c10d on the device (`c10d_ran`: c10d made the communicator then, so NcclComm::of may
// reach it), what a watched run ended with (comm_watch.hpp), and the group's own failure.
struct GroupComm {
  bool c10d_ran = false;
  std::shared_ptr<Failure> failure = std::make_shared<Failure>();
  // The group's failure of its collectives (bounded_wait), shared by every session on the group: a
  // CPU run's transfer given up sets it (gloo then has closed the group's connections).
  std::shared_ptr<Failure> exchanges = std::make_shared<Failure>();
};

// Which way the ATen executor's NCCL transfers go, for runs from now on: "auto" (the default:
// through NcclComm where of() reaches the communicator, else c10d) or "c10d" (always c10d's calls).
void set_comm(const std::string& path);
bool direct_comm_allowed();

}  // namespace collmm::torch_ext
