// collmm/device_matmul.hpp: the C++ API on device memory (the cuda backend). A DeviceMatmul is made
// once per (problem, plan options, dtype) on the caller's NCCL communicator and GPU. Each call takes
// device pointers and a cudaStream_t, as cuBLASMp's and NCCL's own calls do. No copy of A, B or C,
// no host synchronization, and it can be captured in a CUDA graph.
//
//   #include "collmm/device_matmul.hpp"
//   collmm::Problem p{.op = collmm::Op::ag_gemm, .m = M, .n = N, .k = K, .world = P};
//   collmm::DeviceMatmul mm(comm, p, {.algo = collmm::Algo::ring}, collmm::Dtype::bf16);
//   mm.run(a, b, c, stream);  // a, b, c: this rank's device buffers (shapes below)
//
// Buffers are row-major, of the dtype given (C of out_dtype()), on the communicator's GPU; the
// shapes are the host-memory Context's (collmm.hpp), with r = the communicator's rank:
//   ag_gemm  a [M_r, K], b [K, N_r] (kn) or [N_r, K] (nk), c [M, N_r], gathered [M, K] (optional)
//   gemm_rs  a [M, K_r], b [K_r, N] or [N, K_r], c [M_r, N]
//   gemm_ar  a [M, K_r], b [K_r, N] or [N, K_r], c [M, N]
// where D_r = block_size(D, P, r) (types.hpp).
//
// The plan runs on lanes (CUDA streams) of its own. Each call's lanes wait for what the caller's
// stream holds when the call is made, and the caller's stream waits for the plan's end. Its
// transfers are NCCL calls on the caller's communicator. Calls on one DeviceMatmul run in the order
// made; every rank makes the same calls in the same order (they are collective, as NCCL's). A
// graph that captured a call holds the handle's own scratch: launch its replays on one stream, in
// order with every other call of the handle. The caller's current GPU is left as it was.
//
// The communicator must outlive the handle and be a blocking one (ncclConfig_t blocking = 1, the
// default). collmm aborts it (ncclCommAbort: the caller must not use or destroy it afterwards) only
// where a peer failed or a wait ran past timeout_s, so that no rank waits forever.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>

#include "collmm/backend_options.hpp"
#include "collmm/plan.hpp"

namespace collmm {

// Internal types the handle holds by pointer (src/cuda/cuda_executor.hpp, src/common/executor.hpp,
// src/common/played_peers.hpp).
namespace cuda {
class CudaExecutor;
}
class Executor;
class PlayedPeers;

struct DeviceMatmulSettings {
  // The bound of the construction's agreement and of synchronize(), in seconds.
  int timeout_s = 300;
  // cuBLASLt: an SM count for the GEMMs (0: all), and the workspace per lane.
  int gemm_sms = 0;
  size_t workspace_bytes = size_t(32) << 20;
};

class DeviceMatmul {
 public:
  // Collective over `comm` (every rank makes it at the same point). Checks that every rank gives
  // the same problem, options and dtype, that problem.world is the communicator's size, and that
  // the GPU takes the dtype. UsageError on every rank otherwise, before anything is allocated (and
  // after, where a rank could not allocate its buffers). A rank that does not come within
  // timeout_s: std::runtime_error, the communicator aborted (not to be used or destroyed
  // afterwards). The communicator stays the caller's: used, never destroyed here. The GPU is the
  // communicator's (ncclCommCuDevice).
  DeviceMatmul(ncclComm_t comm, const Problem& problem, const PlanOptions& options, Dtype dtype,
               const DeviceMatmulSettings& settings = {});
  // The same on collmm's own bootstrap (make_cuda_executor: mpirun or torchrun, one rank per
  // process; or the host bed, --transport host, whose peers live in pinned host memory: stage
  // their data through played_peers() before a call). `backend.timeout_s` bounds the waits.
  DeviceMatmul(const BackendOptions& backend, const Problem& problem, const PlanOptions& options, Dtype dtype);
  ~DeviceMatmul();
  DeviceMatmul(const DeviceMatmul&) = delete;
  DeviceMatmul& operator=(const DeviceMatmul&) = delete;

  int rank() const;
  int world_size() const;
  int device() const;
  const Plan& plan() const;
  Dtype out_dtype() const;  // C's element type: the input's (bf16 for fp8 inputs, f32 for tf32)

  // Enqueues one call on `stream` and returns: nothing waits for the device. `gathered`: where
  // ag_gemm also writes the gathered A (nullptr: scratch of this object's). Inputs are only read.
  // UsageError (before anything is enqueued) for a null a, b or c, or memory that is not device
  // memory of this GPU. Under a CUDA graph capture of `stream` the call is captured (its pointers
  // with it); make one call outside a capture first, where cuBLASLt picks its algorithms and NCCL
  // connects its peers. The handle must outlive every graph that captured it (its lanes' events
  // are in the graph).
  void run(const void* a, const void* b, void* c, cudaStream_t stream, void* gathered = nullptr);

  // Waits, bounded by timeout_s, for the last run() to end on the device, watching the
  // communicator's asynchronous error (the destructor waits so too). A peer's failure or the timeout:
  // std::runtime_error, the communicator aborted (so that no rank waits forever).
  void synchronize();

  // The played peers of the host bed (null on NCCL). A test hook: PlayedPeers is internal to
  // collmm's tree (src/common/played_peers.hpp), so only its own tests and tools call it.
  PlayedPeers* played_peers();

 private:
  // Checks and agrees (every rank the same UsageError), then prepares the plan.
  void prepare(const Problem& problem, const PlanOptions& options, Dtype dtype);
  void check_device_memory(const void* p, const char* name) const;

  std::unique_ptr<Executor> executor_;
  cuda::CudaExecutor* cuda_ = nullptr;  // executor_, as the CUDA executor it is
  int device_ = 0, rank_ = 0, world_ = 1;
  Dtype dtype_ = Dtype::f32;
  Plan plan_;
  bool failed_ = false;  // synchronize() threw: the communicator was aborted
};

}  // namespace collmm
