// device_matmul.cpp: collmm::DeviceMatmul (collmm/device_matmul.hpp): one rank's plan on its GPU
// (a RankDevice whose A, B and C are the caller's memory), its transfers on the caller's NCCL
// communicator, forked from and joined back to the caller's stream.
#include "collmm/device_matmul.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

#include "collmm/agreement.hpp"
#include "collmm/algorithms.hpp"
#include "cuda_check.hpp"
#include "nccl_host_comm.hpp"
#include "nccl_transport.hpp"
#include "poll.hpp"
#include "rank_device.hpp"

namespace collmm {
namespace {

int gathered_of(const Plan& plan) {
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].role == Role::gathered) return static_cast<int>(i);
  return -1;
}

// Whether the GPU has the dtype's GEMM (fp8 needs compute capability 9.0).
std::string dtype_misfit(int device, Dtype dtype, const Problem& p) {
  if (dtype != Dtype::fp8_e4m3) return {};
  int major = 0;
  COLLMM_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) return "fp8 e4m3 needs a GPU of compute capability 9.0+";
  if (p.b_layout != BLayout::nk) return "fp8 e4m3 GEMMs (cuBLASLt on Hopper) need B as [N, K]: b_layout nk";
  return {};
}

}  // namespace

DeviceMatmul::DeviceMatmul(ncclComm_t comm, const Problem& problem, const PlanOptions& options, Dtype dtype,
                           const DeviceMatmulSettings& settings)
    : comm_(comm), settings_(settings) {
  if (!comm) throw UsageError("collmm::DeviceMatmul: comm is null");
  COLLMM_NCCL(ncclCommCuDevice(comm_, &device_));
  COLLMM_NCCL(ncclCommUserRank(comm_, &rank_));
  COLLMM_NCCL(ncclCommCount(comm_, &world_));
  // Every rank's own misfit, then the keys every rank must share: one exchange, the same
  // UsageError on every rank.
  std::string misfit;
  if (problem.world != world_)
    misfit = "problem.world is " + std::to_string(problem.world) + ", the communicator has " + std::to_string(world_) +
             " ranks";
  if (misfit.empty()) misfit = dtype_misfit(device_, dtype, problem);
  if (misfit.empty()) try {
      validate(problem, options);
    } catch (const UsageError& e) {
      misfit = e.what();
    }
  {
    const std::unique_ptr<HostComm> host = cuda::borrow_nccl_host_comm(comm_, device_, settings_.timeout_s);
    host->set_phase("collmm::DeviceMatmul's agreement");
    agree_and_gather(*host, misfit, agreement_keys(problem, options, dtype), {});
  }
  plan_ = make_plan(problem, options, rank_);
  cuda::EngineSettings engine;
  engine.gemm_sms = settings_.gemm_sms;
  engine.workspace_bytes = settings_.workspace_bytes;
  rank_device_ =
      std::make_unique<cuda::RankDevice>(device_, plan_, dtype, engine, std::vector<int>{kBufA, kBufB, kBufC});
  rank_device_->reserve_scratch(cuda::nccl_scratch_bytes(*rank_device_));
  COLLMM_CUDA(cudaSetDevice(device_));
  COLLMM_CUDA(cudaEventCreateWithFlags(&origin_, cudaEventDisableTiming));
}

DeviceMatmul::~DeviceMatmul() {
  rank_device_.reset();  // waits for the device
  if (origin_) cudaEventDestroy(origin_);
}

int DeviceMatmul::rank() const { return rank_; }
int DeviceMatmul::world_size() const { return world_; }
int DeviceMatmul::device() const { return device_; }
const Plan& DeviceMatmul::plan() const { return plan_; }
Dtype DeviceMatmul::out_dtype() const { return output_dtype(GemmLibrary::cublaslt, rank_device_->in_dtype()); }

void DeviceMatmul::check_device_memory(const void* p, const char* name) const {
  if (!p) throw UsageError(std::string("collmm::DeviceMatmul::run: ") + name + " is a null pointer");
  cudaPointerAttributes at{};
  const cudaError_t e = cudaPointerGetAttributes(&at, p);
  if (e != cudaSuccess) cudaGetLastError();
  const bool on_device = e == cudaSuccess && (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged);
  if (!on_device || at.device != device_)
    throw UsageError(std::string("collmm::DeviceMatmul::run: ") + name + " is not device memory of GPU " +
                     std::to_string(device_) + " (the communicator's; host memory goes to collmm::Context)");
}

void DeviceMatmul::run(const void* a, const void* b, void* c, cudaStream_t stream, void* gathered) {
  if (aborted_) throw UsageError("collmm::DeviceMatmul::run: its communicator was aborted");
  check_device_memory(a, "a");
  check_device_memory(b, "b");
  check_device_memory(c, "c");
  const int g = gathered_of(plan_);
  if (gathered) {
    if (g < 0)
      throw UsageError("collmm::DeviceMatmul::run: gathered is ag_gemm's output; this is " +
                       to_string(plan_.problem.op));
    check_device_memory(gathered, "gathered");
  }
  cuda::RankDevice& r = *rank_device_;
  r.bind(kBufA, const_cast<void*>(a));  // only read
  r.bind(kBufB, const_cast<void*>(b));
  r.bind(kBufC, c);
  if (g >= 0) r.bind(g, gathered);
  COLLMM_CUDA(cudaSetDevice(device_));
  COLLMM_CUDA(cudaEventRecord(origin_, stream));
  r.issue_iteration(origin_, [&](int step) { cuda::issue_nccl_step(r, comm_, step); });
  COLLMM_CUDA(cudaStreamWaitEvent(stream, r.finish_event(), 0));
}

void DeviceMatmul::synchronize() {
  if (aborted_) throw UsageError("collmm::DeviceMatmul::synchronize: its communicator was aborted");
  COLLMM_CUDA(cudaSetDevice(device_));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(settings_.timeout_s);
  std::string failure;
  const bool done = poll_until(
      [&] {
        const cudaError_t e = cudaEventQuery(rank_device_->finish_event());
        if (e == cudaSuccess) return true;
        if (e != cudaErrorNotReady) COLLMM_CUDA(e);
        ncclResult_t async = ncclSuccess;
        COLLMM_NCCL(ncclCommGetAsyncError(comm_, &async));
        if (async == ncclSuccess || async == ncclInProgress) return false;
        failure = std::string("NCCL reports ") + ncclGetErrorString(async) + " (a peer failed or aborted)";
        return true;
      },
      deadline, kDevicePace);
  if (done && failure.empty()) return;
  if (!done)
    failure = "the call did not end within " + std::to_string(settings_.timeout_s) + " s (a peer died or hangs)";
  aborted_ = true;
  ncclCommAbort(comm_);
  throw std::runtime_error("collmm::DeviceMatmul: rank " + std::to_string(rank_) + " of " + std::to_string(world_) +
                           ": " + failure + "; the NCCL communicator was aborted");
}

}  // namespace collmm
