// cuda_check.hpp: checks for CUDA runtime, cuBLASLt and NCCL return codes. A failure throws
// std::runtime_error naming the call, file:line and the library's error string.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace collmm::cuda {

void check_cuda(cudaError_t code, const char* call, const char* file, int line);
void check_cublas(cublasStatus_t code, const char* call, const char* file, int line);
void check_nccl(ncclResult_t code, const char* call, const char* file, int line);

// Copies host bytes (pageable or not) to device memory and returns once they are there. A plain
// cudaMemcpy from pageable memory may return while the DMA is still under way on the legacy default
// stream, with which collmm's non-blocking lanes do not synchronise: a lane could read the old
// bytes. Set-up only (it waits for the whole device).
void upload_now(void* device_dst, const void* host_src, size_t bytes);

}  // namespace collmm::cuda

#define COLLMM_CUDA(call) ::collmm::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define COLLMM_CUBLAS(call) ::collmm::cuda::check_cublas((call), #call, __FILE__, __LINE__)
#define COLLMM_NCCL(call) ::collmm::cuda::check_nccl((call), #call, __FILE__, __LINE__)

namespace collmm::cuda {

// Sets the current device for a scope and restores the one before it (the caller's, for the API).
struct DeviceGuard {
  int old = 0;
  explicit DeviceGuard(int device) {
    COLLMM_CUDA(cudaGetDevice(&old));
    COLLMM_CUDA(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(old); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
};

}  // namespace collmm::cuda
