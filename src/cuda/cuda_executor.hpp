// cuda_executor.hpp: the CUDA backend's Executor. It drives the ranks of this process (one per
// MPI or torchrun process, G with -g G, all P with --transport local): a RankDevice per rank, plans
// issued in list order onto the lanes (CUDA streams). Comm steps run on NCCL; for emulated ranks,
// as device copies (local_transport.hpp); for one rank whose peers live in host memory, as copies
// over PCIe (host_link.hpp; that rank runs its plan with collectives lowered to rings). Optionally
// one iteration is captured into a CUDA graph per rank (per process for local) and replayed.
// Timestamps come from CUDA events.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "calibration_hooks.hpp"
#include "collmm/backend_options.hpp"
#include "executor.hpp"
#include "host_link.hpp"
#include "played_peers.hpp"
#include "rank_device.hpp"
#include "worker_pool.hpp"

namespace collmm::cuda {

// What the bootstrap found: who this process is and which GPUs and communicators it holds.
struct CudaSetup {
  CudaTransport transport = CudaTransport::nccl;
  int world = 1;
  std::vector<int> ranks;         // ranks driven here, ascending
  std::vector<int> devices;       // GPU of each
  std::vector<ncclComm_t> comms;  // nccl: one per rank driven here
  bool owns_comms = true;         // the executor destroys them (false: the caller's, collmm/device_matmul.hpp)
  std::unique_ptr<HostComm> host;
  EngineSettings engine;
  bool graph = false;
  int timeout_s = 300;
  LinkCopy link_copy = LinkCopy::engine;  // host: copy engines or an SM copy kernel
  int processes_per_node = 1;             // processes of the job on this node (they share its host memory)
  int processes_per_device = 1;           // processes sharing one GPU (several NCCL ranks on one GPU)
};

class CudaExecutor final : public Executor, public PlayedPeers, public CalibrationHooks {
 public:
  explicit CudaExecutor(CudaSetup setup);
  ~CudaExecutor() override;

  std::string backend() const override { return "cuda"; }
  int world_size() const override { return s_.world; }
  std::vector<int> local_ranks() const override { return s_.ranks; }
  HostComm& host() override { return *s_.host; }
  bool supports(Dtype) const override;
  GemmLibrary gemm_library() const override;
  std::string timing_note() const override;
  // CalibrationHooks
  bool single_issuer() const override { return s_.transport == CudaTransport::local; }
  double last_issue_us() const override { return issue_us_; }
  bool replay_graphs(bool on) override {
    s_.graph = on;
    return true;
  }

  CalibrationHooks* calibration_hooks() override { return this; }
  PlayedPeers* played_peers() override { return s_.transport == CudaTransport::host ? this : nullptr; }
  void stage(uint64_t seed) override;
  Comparison check_sent() override;

  void check_memory(const MemoryNeed& need) const override;
  void prepare(const std::vector<Plan>& plans, Dtype dtype) override;
  void write(int i, int buffer, const void* bytes, size_t nbytes) override;
  void read(int i, int buffer, void* bytes, size_t nbytes) override;
  void poison() override;
  std::vector<RankRun> run(StepFilter filter, bool timestamps) override;

  int device_of(int i) const { return s_.devices.at(static_cast<size_t>(i)); }  // local rank i's GPU

  // The API on device memory (collmm/device_matmul.hpp), for one local rank:
  // Buffers (kBufA, ...) that prepare() leaves to the caller's memory, bound with bind_device.
  void set_caller_buffers(std::vector<int> buffers) { caller_buffers_ = std::move(buffers); }
  // Buffer `buffer` of the local rank is the device memory at `data` from now on (nullptr: its own again).
  void bind_device(int buffer, void* data);
  // One iteration of the local rank forked from `stream` and joined back to it: no barrier, no wait.
  void enqueue(cudaStream_t stream);
  // Waits (bounded by the timeout) for the last iteration; a peer's failure or the timeout aborts
  // the communicators and throws std::runtime_error.
  void wait_all();
  void abort_comms();  // ncclCommAbort on every communicator (once; any thread)

 private:
  void issue_rank(size_t i, cudaEvent_t origin = nullptr);  // one rank's whole iteration, NCCL or host transport
  void issue_local_all();                                   // every rank's iteration, local transport
  void launch_rank(size_t i, StepFilter filter);
  void prepare_host(const Plan& plan, Dtype dtype);
  RankRun unlowered(const RankRun& run, StepFilter filter) const;
  void launch_local(StepFilter filter);
  RankDevice& rank_at(int i, int buffer, size_t nbytes);

  CudaSetup s_;
  std::vector<std::unique_ptr<RankDevice>> ranks_;
  std::map<int, std::vector<cudaGraphExec_t>> graphs_;  // per filter: one per rank (nccl) or one (local)
  double issue_us_ = 0;                                 // host wall time of the last run()'s issue (longest thread)
  // host transport: the link, the job's inputs it makes the peers' data from, and for each step of
  // the lowered plan the step of the given plan it comes from.
  PinnedArena arena_;
  std::unique_ptr<HostLink> link_;
  std::unique_ptr<PeerInputs> inputs_;
  std::vector<int> origin_;
  std::vector<Step> given_;  // the given plan's steps (what run() reports on)
  Dtype dtype_ = Dtype::f32;
  // -g G: the host threads that issue the ranks' steps, one per local rank, made at the first run.
  std::unique_ptr<WorkerPool> issue_threads_;
  std::vector<int> caller_buffers_;
  cudaEvent_t call_start_ = nullptr;  // enqueue(): the caller's stream at the call
  std::mutex abort_mutex_;
  bool comms_aborted_ = false;
};

}  // namespace collmm::cuda
