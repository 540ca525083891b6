// device.cpp: a user's call of the API on device memory (collmm/device_matmul.hpp), compiled
// against the installed headers alone. tests/consumer/CMakeLists.txt builds it where the installed
// collmm has its CUDA backend; it is never run.
#include "collmm/device_matmul.hpp"

void consumer_device_call(ncclComm_t comm, const void* a, const void* b, void* c, cudaStream_t stream) {
  const collmm::Problem problem{.op = collmm::Op::ag_gemm, .m = 64, .n = 32, .k = 16, .world = 2};
  collmm::DeviceMatmul mm(comm, problem, {.algo = collmm::Algo::ring}, collmm::Dtype::bf16);
  mm.run(a, b, c, stream);
  mm.synchronize();
}
