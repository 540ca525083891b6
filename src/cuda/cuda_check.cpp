// cuda_check.cpp: turns CUDA, cuBLASLt and NCCL error codes into exceptions with file:line.
#include "cuda_check.hpp"

#include <stdexcept>
#include <string>

namespace collmm::cuda {
namespace {

[[noreturn]] void fail(const char* lib, const std::string& what, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + lib + " " +
                           what);
}

}  // namespace

void check_cuda(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess)
    fail("CUDA", std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code), call, file, line);
}

void check_cublas(cublasStatus_t code, const char* call, const char* file, int line) {
  if (code != CUBLAS_STATUS_SUCCESS)
    fail("cuBLASLt", std::string(cublasLtGetStatusName(code)) + ": " + cublasLtGetStatusString(code), call, file, line);
}

void check_nccl(ncclResult_t code, const char* call, const char* file, int line) {
  // Communicators are blocking (make_nccl_comms): ncclInProgress would be a call left unfinished.
  if (code != ncclSuccess)
    fail("NCCL", std::string(ncclGetErrorString(code)) + " (" + ncclGetLastError(nullptr) + ")", call, file, line);
}

void upload_now(void* device_dst, const void* host_src, size_t bytes) {
  COLLMM_CUDA(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
  COLLMM_CUDA(cudaDeviceSynchronize());
}

}  // namespace collmm::cuda
