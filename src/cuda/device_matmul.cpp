// device_matmul.cpp: collmm::DeviceMatmul (collmm/device_matmul.hpp). It is the CUDA executor with
// one local rank whose A, B and C are the caller's device memory, on the caller's NCCL communicator
// or on collmm's own bootstrap. Its iterations fork from and join back to the caller's stream
// (CudaExecutor::enqueue).
#include "collmm/device_matmul.hpp"

#include <stdexcept>
#include <string>

#include "agreement.hpp"
#include "backends.hpp"
#include "collmm/algorithms.hpp"
#include "cuda_check.hpp"
#include "cuda_executor.hpp"
#include "nccl_host_comm.hpp"

namespace collmm {

using cuda::DeviceGuard;

DeviceMatmul::DeviceMatmul(ncclComm_t comm, const Problem& problem, const PlanOptions& options, Dtype dtype,
                           const DeviceMatmulSettings& settings) {
  if (!comm) throw UsageError("collmm::DeviceMatmul: comm is null");
  cuda::CudaSetup s;
  int device = 0, rank = 0, world = 1;
  COLLMM_NCCL(ncclCommCuDevice(comm, &device));
  COLLMM_NCCL(ncclCommUserRank(comm, &rank));
  COLLMM_NCCL(ncclCommCount(comm, &world));
  const DeviceGuard guard(device);
  s.transport = CudaTransport::nccl;
  s.world = world;
  s.ranks = {rank};
  s.devices = {device};
  s.comms = {comm};
  s.owns_comms = false;
  s.host = cuda::borrow_nccl_host_comm(comm, device, settings.timeout_s);
  s.engine.gemm_sms = settings.gemm_sms;
  s.engine.workspace_bytes = settings.workspace_bytes;
  s.timeout_s = settings.timeout_s;
  executor_ = std::make_unique<cuda::CudaExecutor>(std::move(s));
  prepare(problem, options, dtype);
}

DeviceMatmul::DeviceMatmul(const BackendOptions& backend, const Problem& problem, const PlanOptions& options,
                           Dtype dtype) {
  if (backend.backend != Backend::cuda || backend.transport == CudaTransport::local || backend.gpus > 1)
    throw UsageError("collmm::DeviceMatmul: the cuda backend with one rank per process (nccl or host transport)");
  BackendOptions o = backend;
  o.gemm_algo = GemmAlgo::heuristic;  // a timed choice would synchronize inside run()
  int caller = 0;
  COLLMM_CUDA(cudaGetDevice(&caller));
  const DeviceGuard keep(caller);  // the bootstrap picks this rank's GPU; the caller's stays current
  executor_ = make_cuda_executor(o, 0, nullptr);
  prepare(problem, options, dtype);
}

// The last call waited for, bounded (a peer that died aborts the communicator instead of hanging
// here), before the device memory goes.
DeviceMatmul::~DeviceMatmul() {
  if (!cuda_ || failed_) return;
  try {
    const DeviceGuard guard(device_);
    cuda_->wait_all();
  } catch (...) {
  }
}

void DeviceMatmul::prepare(const Problem& problem, const PlanOptions& options, Dtype dtype) {
  cuda_ = dynamic_cast<cuda::CudaExecutor*>(executor_.get());
  if (!cuda_ || executor_->local_ranks().size() != 1)
    throw UsageError("collmm::DeviceMatmul: needs the cuda executor with one local rank");
  rank_ = executor_->local_ranks()[0];
  world_ = executor_->world_size();
  device_ = cuda_->device_of(0);
  const DeviceGuard guard(device_);
  dtype_ = dtype;
  // This rank's misfit, then the keys every rank must share: one exchange, the same UsageError on
  // every rank, before anything is allocated.
  std::string misfit;
  if (problem.world != world_)
    misfit = "problem.world is " + std::to_string(problem.world) + ", the job has " + std::to_string(world_) + " ranks";
  else if (!executor_->supports(dtype))
    misfit = to_string(dtype) + " needs a GPU of compute capability 9.0+";
  else if (dtype == Dtype::fp8_e4m3 && problem.b_layout != BLayout::nk)
    misfit = "fp8 e4m3 GEMMs (cuBLASLt on Hopper) need B as [N, K]: b_layout nk";
  if (misfit.empty()) try {
      validate(problem, options);
    } catch (const UsageError& e) {
      misfit = e.what();
    }
  executor_->host().set_phase("collmm::DeviceMatmul's agreement");
  agree_and_gather(executor_->host(), misfit, agreement_keys(problem, options, dtype), {});
  plan_ = make_plan(problem, options, rank_);
  cuda_->set_caller_buffers({kBufA, kBufB, kBufC});
  // A rank that cannot allocate tells the others, which would otherwise wait for it in their first call.
  std::string failure;
  try {
    executor_->prepare({plan_}, dtype);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  executor_->host().set_phase("collmm::DeviceMatmul's allocation");
  raise_if_any_process_failed(executor_->host(), failure);
}

int DeviceMatmul::rank() const { return rank_; }
int DeviceMatmul::world_size() const { return world_; }
int DeviceMatmul::device() const { return device_; }
const Plan& DeviceMatmul::plan() const { return plan_; }
Dtype DeviceMatmul::out_dtype() const { return executor_->out_dtype(dtype_); }
PlayedPeers* DeviceMatmul::played_peers() { return executor_->played_peers(); }

void DeviceMatmul::check_device_memory(const void* p, const char* name) const {
  if (!p) throw UsageError(std::string("collmm::DeviceMatmul::run: ") + name + " is a null pointer");
  cudaPointerAttributes at{};
  const cudaError_t e = cudaPointerGetAttributes(&at, p);
  if (e != cudaSuccess) cudaGetLastError();
  const bool on_device = e == cudaSuccess && (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged);
  if (!on_device || at.device != device_)
    throw UsageError(std::string("collmm::DeviceMatmul::run: ") + name + " is not device memory of GPU " +
                     std::to_string(device_) + " (host memory goes to collmm::Context)");
}

void DeviceMatmul::run(const void* a, const void* b, void* c, cudaStream_t stream, void* gathered) {
  if (failed_) throw UsageError("collmm::DeviceMatmul::run: an earlier call failed and its communicator was aborted");
  check_device_memory(a, "a");
  check_device_memory(b, "b");
  check_device_memory(c, "c");
  const int g = find_buffer(plan_, Role::gathered);
  if (gathered && g < 0)
    throw UsageError("collmm::DeviceMatmul::run: gathered is ag_gemm's output; this is " + to_string(plan_.problem.op));
  if (gathered) check_device_memory(gathered, "gathered");
  cuda_->bind_device(kBufA, const_cast<void*>(a));  // only read
  cuda_->bind_device(kBufB, const_cast<void*>(b));
  cuda_->bind_device(kBufC, c);
  if (g >= 0) cuda_->bind_device(g, gathered);
  const DeviceGuard guard(device_);
  // A call that fails part-way leaves its peers inside NCCL calls this rank never made: the
  // communicator is aborted, so that none waits forever, and the handle is done.
  try {
    cuda_->enqueue(stream);
  } catch (...) {
    failed_ = true;
    cuda_->abort_comms();
    throw;
  }
}

void DeviceMatmul::synchronize() {
  if (failed_) throw UsageError("collmm::DeviceMatmul::synchronize: an earlier call failed");
  const DeviceGuard guard(device_);
  try {
    cuda_->wait_all();
  } catch (...) {
    failed_ = true;
    throw;
  }
}

}  // namespace collmm
