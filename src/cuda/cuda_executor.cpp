// cuda_executor.cpp: the CUDA Executor (see cuda_executor.hpp): buffers in and out, the
// iteration on streams (one host thread per rank for NCCL, one for all emulated ranks), CUDA
// graph capture and replay, and a watchdog on the finish events.
#include "cuda_executor.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "collmm/step_filter.hpp"
#include "cuda_check.hpp"
#include "local_transport.hpp"
#include "nccl_transport.hpp"
#include "poll.hpp"

namespace collmm::cuda {

CudaExecutor::CudaExecutor(CudaSetup setup) : s_(std::move(setup)) {}

CudaExecutor::~CudaExecutor() {
  link_.reset();
  inputs_.reset();
  issue_threads_.reset();
  for (auto& [filter, list] : graphs_)
    for (auto g : list)
      if (g) cudaGraphExecDestroy(g);
  ranks_.clear();
  if (call_start_) cudaEventDestroy(call_start_);
  if (!comms_aborted_ && s_.owns_comms)
    for (auto c : s_.comms) ncclCommDestroy(c);
}

bool CudaExecutor::supports(Dtype d) const {
  if (d != Dtype::fp8_e4m3) return true;
  for (int dev : s_.devices) {
    int major = 0;
    COLLMM_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 9) return false;
  }
  return true;
}

GemmLibrary CudaExecutor::gemm_library() const { return GemmLibrary::cublaslt; }

std::string CudaExecutor::timing_note() const {
  if (s_.transport == CudaTransport::host)
    return "--transport host: one GPU rank (rank " + std::to_string(s_.ranks[0]) + " of " + std::to_string(s_.world) +
           "), its peers played by pinned host memory; the link is PCIe, " +
           (s_.link_copy == LinkCopy::engine ? "copy engines" : "an SM copy kernel") +
           " (sends device->host and receives host->device at once); a receive starts no earlier than this rank's "
           "own send of the same step; collectives run as rings";
  if (s_.transport != CudaTransport::local) return {};
  const std::set<int> gpus(s_.devices.begin(), s_.devices.end());
  std::string note = "--transport local: " + std::to_string(s_.world) + " ranks emulated in one process on " +
                     std::to_string(gpus.size()) + " GPU(s), issued by one host thread";
  if (gpus.size() < s_.devices.size())
    note += "; ranks sharing a GPU copy with SMs and share its SMs for GEMMs: these timings are not overlap figures";
  return note;
}

// Device: the buffers of the ranks on each GPU (plus cuBLASLt workspaces and NCCL's own buffers,
// 512 MiB per rank), times the processes sharing that GPU, against its free memory now.
void CudaExecutor::check_memory(const MemoryNeed& need) const {
  check_host_memory(need.host_bytes, s_.processes_per_node);
  std::map<int, int64_t> per_device;
  for (size_t i = 0; i < s_.devices.size() && i < need.device_bytes.size(); ++i)
    per_device[s_.devices[i]] += need.device_bytes[i] + (int64_t(512) << 20);
  for (const auto& [device, bytes] : per_device) {
    size_t free = 0, total = 0;
    COLLMM_CUDA(cudaSetDevice(device));
    COLLMM_CUDA(cudaMemGetInfo(&free, &total));
    const double want = static_cast<double>(bytes) * s_.processes_per_device;
    if (want > static_cast<double>(free))
      throw UsageError("this run needs about " + gib(want) + " on GPU " + std::to_string(device) + " (" +
                       std::to_string(s_.processes_per_device) + " process(es) on it), but only " +
                       gib(static_cast<double>(free)) + " of its " + gib(static_cast<double>(total)) +
                       " is free: use smaller sizes or more GPUs (nothing was allocated)");
  }
}

void CudaExecutor::prepare(const std::vector<Plan>& plans, Dtype dtype) {
  if (plans.size() != s_.ranks.size())
    throw UsageError("cuda executor: " + std::to_string(plans.size()) + " plans for " +
                     std::to_string(s_.ranks.size()) + " local ranks");
  if (!supports(dtype))
    throw UsageError("cuda backend: " + to_string(dtype) + " needs a GPU of compute capability 9.0+");
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].rank != s_.ranks[i] || plans[i].problem.world != s_.world)
      throw UsageError("cuda executor: plan " + std::to_string(i) + " is for rank " + std::to_string(plans[i].rank) +
                       " of " + std::to_string(plans[i].problem.world) + ", this process drives rank " +
                       std::to_string(s_.ranks[i]) + " of " + std::to_string(s_.world));
    if (dtype == Dtype::fp8_e4m3 && plans[i].problem.b_layout != BLayout::nk)
      throw UsageError("cuda backend: fp8 e4m3 GEMMs (cuBLASLt on Hopper) need B as [N, K]: use b layout nk");
  }
  for (auto& [filter, list] : graphs_)
    for (auto g : list)
      if (g) COLLMM_CUDA(cudaGraphExecDestroy(g));
  graphs_.clear();
  link_.reset();
  ranks_.clear();
  dtype_ = dtype;
  if (s_.transport == CudaTransport::host) return prepare_host(plans[0], dtype);
  if (s_.transport == CudaTransport::local) {  // emulated ranks on several GPUs read each other's memory
    const std::set<int> gpus(s_.devices.begin(), s_.devices.end());
    for (int a : gpus)
      for (int b : gpus) {
        if (a == b) continue;
        int can = 0;
        COLLMM_CUDA(cudaDeviceCanAccessPeer(&can, a, b));
        if (!can)
          throw UsageError("--transport local: GPU " + std::to_string(a) + " cannot access GPU " + std::to_string(b));
        COLLMM_CUDA(cudaSetDevice(a));
        const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled)
          cudaGetLastError();
        else
          COLLMM_CUDA(e);
      }
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    ranks_.push_back(std::make_unique<RankDevice>(s_.devices[i], plans[i], dtype, s_.engine, caller_buffers_));
    if (s_.transport == CudaTransport::nccl) ranks_.back()->reserve_scratch(nccl_scratch_bytes(*ranks_.back()));
  }
}

// The rank runs its plan with collectives lowered to rings (the link moves chunks between
// neighbours only); what it receives and sends is read off every rank's lowered plan.
void CudaExecutor::prepare_host(const Plan& plan, Dtype dtype) {
  const int P = s_.world;
  std::vector<Plan> job;
  for (int q = 0; q < P; ++q)
    job.push_back(lower_collectives(q == plan.rank ? plan : make_plan(plan.problem, plan.options, q)).plan);
  Lowered mine = lower_collectives(plan);
  check::PeerTraffic traffic = check::peer_traffic(job, plan.rank);
  auto rank = std::make_unique<RankDevice>(s_.devices[0], mine.plan, dtype, s_.engine, caller_buffers_);
  link_ = std::make_unique<HostLink>(*rank, std::move(traffic), arena_, s_.link_copy, s_.engine.comm_high_priority);
  ranks_.push_back(std::move(rank));  // only once every part is made: a throw above leaves nothing prepared
  origin_ = mine.origin;
  given_ = plan.steps;
}

void CudaExecutor::stage(uint64_t seed) {
  if (!link_) throw UsageError("cuda executor: stage() before prepare()");
  const Problem& p = ranks_[0]->plan().problem;
  if (!inputs_ || !inputs_->same(p, seed, dtype_)) {
    inputs_.reset();
    inputs_ = std::make_unique<PeerInputs>(s_.devices[0], p, seed, dtype_);
  }
  link_->stage(*inputs_);
}

Comparison CudaExecutor::check_sent() {
  if (!link_ || !inputs_) throw UsageError("cuda executor: check_sent() before stage()");
  return link_->check_sent(*inputs_);
}

// The lowered plan's step times as the given plan's: a collective spans its ring's steps. One
// with nothing to move (P = 1, or no rows anywhere) lowers to no step. It gets an empty span where
// it would have run, at the end of what it waits for and of the step before it on its lane.
RankRun CudaExecutor::unlowered(const RankRun& run, StepFilter filter) const {
  if (run.steps.empty()) return run;
  RankRun out = run;
  out.steps.assign(given_.size(), StepTime{});
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const StepTime& t = run.steps[i];
    if (t.start_us < 0) continue;
    StepTime& o = out.steps[static_cast<size_t>(origin_[i])];
    o.start_us = o.start_us < 0 ? t.start_us : std::min(o.start_us, t.start_us);
    o.end_us = std::max(o.end_us, t.end_us);
  }
  std::map<int, double> lane_end;  // the end of the last step so far on each lane of the given plan
  for (size_t i = 0; i < given_.size(); ++i) {
    const Step& s = given_[i];
    StepTime& o = out.steps[i];
    if (o.start_us < 0 && !skips(filter, s.kind)) {
      double at = lane_end.count(s.lane) ? lane_end[s.lane] : 0.0;
      for (int w : s.waits) at = std::max(at, out.steps[static_cast<size_t>(w)].end_us);
      o = {at, at};
    }
    if (o.start_us >= 0) lane_end[s.lane] = std::max(lane_end[s.lane], o.end_us);
  }
  return out;
}

RankDevice& CudaExecutor::rank_at(int i, int buffer, size_t nbytes) {
  if (i < 0 || i >= static_cast<int>(ranks_.size()))
    throw UsageError("cuda executor: no local rank " + std::to_string(i));
  RankDevice& r = *ranks_[i];
  if (buffer < 0 || buffer >= static_cast<int>(r.plan().buffers.size()))
    throw UsageError("cuda executor: no buffer " + std::to_string(buffer));
  if (nbytes > r.buffer_bytes(buffer))
    throw UsageError("cuda executor: " + std::to_string(nbytes) + " bytes for buffer " + std::to_string(buffer) +
                     " of " + std::to_string(r.buffer_bytes(buffer)));
  COLLMM_CUDA(cudaSetDevice(r.device()));
  return r;
}

void CudaExecutor::write(int i, int buffer, const void* bytes, size_t nbytes) {
  RankDevice& r = rank_at(i, buffer, nbytes);
  upload_now(r.buffer(buffer), bytes, nbytes);
}

void CudaExecutor::read(int i, int buffer, void* bytes, size_t nbytes) {
  RankDevice& r = rank_at(i, buffer, nbytes);
  COLLMM_CUDA(cudaMemcpy(bytes, r.buffer(buffer), nbytes, cudaMemcpyDeviceToHost));
}

void CudaExecutor::poison() {
  for (auto& r : ranks_) r->poison();
  if (link_) link_->poison_sent();
}

void CudaExecutor::issue_rank(size_t i, cudaEvent_t origin) {
  RankDevice& r = *ranks_[i];
  r.issue_iteration(origin, [&](int step) {
    if (s_.transport == CudaTransport::host)
      link_->issue(step);
    else
      issue_nccl_step(r, s_.comms[i], step);
  });
}

void CudaExecutor::issue_local_all() {
  std::vector<RankDevice*> all;
  for (auto& r : ranks_) all.push_back(r.get());
  for (auto* r : all) r->begin_iteration(r == all[0] ? nullptr : all[0]->begin_event());
  issue_local_iteration(all);
  for (auto* r : all) r->end_iteration();
  COLLMM_CUDA(cudaSetDevice(all[0]->device()));
  for (auto* r : all)  // join every rank into rank 0's lane 0 (a graph capture must end there)
    if (r != all[0]) COLLMM_CUDA(cudaStreamWaitEvent(all[0]->lane(0), r->finish_event(), 0));
}

// Captures once per filter (the same plan, the same pointers), then replays.
void CudaExecutor::launch_rank(size_t i, StepFilter filter) {
  RankDevice& r = *ranks_[i];
  COLLMM_CUDA(cudaSetDevice(r.device()));
  if (!s_.graph) return issue_rank(i);
  auto& list = graphs_[static_cast<int>(filter)];  // sized by run() before the threads start
  if (!list[i]) {
    // A plain iteration first: GEMM algorithms chosen (and timed) and NCCL connections made outside the capture.
    issue_rank(i);
    COLLMM_CUDA(cudaEventSynchronize(r.done_event()));
    cudaGraph_t g;
    COLLMM_CUDA(cudaStreamBeginCapture(r.lane(0), cudaStreamCaptureModeThreadLocal));
    issue_rank(i);
    COLLMM_CUDA(cudaStreamEndCapture(r.lane(0), &g));
    COLLMM_CUDA(cudaGraphInstantiate(&list[i], g, 0));
    COLLMM_CUDA(cudaGraphDestroy(g));
  }
  COLLMM_CUDA(cudaGraphLaunch(list[i], r.lane(0)));
}

void CudaExecutor::launch_local(StepFilter filter) {
  if (!s_.graph) return issue_local_all();
  RankDevice& r0 = *ranks_[0];
  auto& list = graphs_[static_cast<int>(filter)];
  if (!list[0]) {
    issue_local_all();  // a plain iteration first (GEMM algorithms chosen outside the capture)
    for (auto& r : ranks_) COLLMM_CUDA(cudaEventSynchronize(r->done_event()));
    cudaGraph_t g;
    COLLMM_CUDA(cudaSetDevice(r0.device()));
    COLLMM_CUDA(cudaStreamBeginCapture(r0.lane(0), cudaStreamCaptureModeThreadLocal));
    issue_local_all();
    COLLMM_CUDA(cudaSetDevice(r0.device()));
    COLLMM_CUDA(cudaStreamEndCapture(r0.lane(0), &g));
    COLLMM_CUDA(cudaGraphInstantiate(&list[0], g, 0));
    COLLMM_CUDA(cudaGraphDestroy(g));
  }
  COLLMM_CUDA(cudaSetDevice(r0.device()));
  COLLMM_CUDA(cudaGraphLaunch(list[0], r0.lane(0)));
}

void CudaExecutor::bind_device(int buffer, void* data) {
  if (ranks_.size() != 1) throw UsageError("cuda executor: bind_device() needs one prepared local rank");
  ranks_[0]->bind(buffer, data);
}

void CudaExecutor::enqueue(cudaStream_t stream) {
  if (ranks_.size() != 1 || s_.transport == CudaTransport::local)
    throw UsageError("cuda executor: enqueue() needs one prepared local rank (nccl or host transport)");
  RankDevice& r = *ranks_[0];
  COLLMM_CUDA(cudaSetDevice(r.device()));
  if (!call_start_) COLLMM_CUDA(cudaEventCreateWithFlags(&call_start_, cudaEventDisableTiming));
  COLLMM_CUDA(cudaEventRecord(call_start_, stream));
  issue_rank(0, call_start_);
  COLLMM_CUDA(cudaStreamWaitEvent(stream, r.finish_event(), 0));
}

// The vector stays as it is (other issue threads may still read it); the destructor skips
// communicators that were aborted.
void CudaExecutor::abort_comms() {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  if (comms_aborted_) return;
  comms_aborted_ = true;
  for (auto c : s_.comms) ncclCommAbort(c);
}

// Polls every rank's finish event and its communicator's asynchronous error (a peer's abort or a
// broken connection surfaces there at once, instead of as a timeout), napping between polls.
void CudaExecutor::wait_all() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(s_.timeout_s);
  for (size_t i = 0; i < ranks_.size(); ++i) {
    RankDevice& r = *ranks_[i];
    COLLMM_CUDA(cudaSetDevice(r.device()));
    const bool done = poll_until(
        [&] {
          const cudaError_t e = cudaEventQuery(r.done_event());
          if (e == cudaSuccess) return true;
          if (e != cudaErrorNotReady) COLLMM_CUDA(e);
          ncclResult_t async = ncclSuccess;
          if (i < s_.comms.size() && !comms_aborted_) COLLMM_NCCL(ncclCommGetAsyncError(s_.comms[i], &async));
          if (async != ncclSuccess && async != ncclInProgress) {
            abort_comms();
            throw std::runtime_error("cuda executor: rank " + std::to_string(r.rank()) + ": NCCL reports " +
                                     ncclGetErrorString(async) +
                                     " (a peer failed or aborted); NCCL communicators aborted");
          }
          return false;
        },
        deadline, kDevicePace);
    if (!done) {
      abort_comms();
      throw std::runtime_error("cuda executor: rank " + std::to_string(r.rank()) + " did not finish within " +
                               std::to_string(s_.timeout_s) + " s (a peer died or hangs); NCCL communicators aborted");
    }
  }
}

std::vector<RankRun> CudaExecutor::run(StepFilter filter, bool timestamps) {
  if (ranks_.empty()) throw UsageError("cuda executor: run() before prepare()");
  for (auto& r : ranks_) r->set_filter(filter);
  auto& list = graphs_[static_cast<int>(filter)];
  list.resize(ranks_.size(), nullptr);
  s_.host->barrier();
  // The host wall time of the issue alone (enqueueing is asynchronous: the device may still be busy).
  auto since_us = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (s_.transport == CudaTransport::local) {
    launch_local(filter);
    issue_us_ = since_us(t0);
  } else if (ranks_.size() == 1) {
    launch_rank(0, filter);
    issue_us_ = since_us(t0);
  } else {  // -g G: one host thread per GPU, as nccl-tests does, made once
    if (!issue_threads_) issue_threads_ = std::make_unique<WorkerPool>(static_cast<int>(ranks_.size()));
    // A rank that fails leaves its peers waiting in NCCL for it: abort every communicator at once.
    issue_threads_->start([&](int i) { launch_rank(static_cast<size_t>(i), filter); }, [&] { abort_comms(); });
    issue_threads_->wait();
    const std::vector<double>& walls = issue_threads_->wall_us();
    issue_us_ = *std::max_element(walls.begin(), walls.end());
  }
  wait_all();
  std::vector<RankRun> runs;
  for (auto& r : ranks_) runs.push_back(link_ ? unlowered(r->times(timestamps), filter) : r->times(timestamps));
  return runs;
}

}  // namespace collmm::cuda
