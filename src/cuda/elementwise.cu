// elementwise.cu: out += a on the GPU (see elementwise.hpp); f32 arithmetic for f16 and bf16.
#include "elementwise.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "check.hpp"

namespace collmm::cuda {
namespace {

template <typename T>
__device__ float to_f(T v) { return static_cast<float>(v); }
template <typename T>
__device__ T from_f(float v) { return static_cast<T>(v); }
template <> __device__ float to_f(__half v) { return __half2float(v); }
template <> __device__ __half from_f(float v) { return __float2half_rn(v); }
template <> __device__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void add_kernel(T* out, const T* a, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(to_f(out[i]) + to_f(a[i]));
}

__global__ void add_kernel_f64(double* out, const double* a, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    out[i] += a[i];
}

template <typename T>
void launch(void* out, const void* a, size_t count, cudaStream_t stream) {
  const int threads = 256;
  const size_t want = (count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 4096 ? want : 4096);
  add_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(a), count);
}

}  // namespace

void add_into(void* out, const void* a, size_t count, Dtype dtype, cudaStream_t stream) {
  if (count == 0) return;
  switch (dtype) {
    case Dtype::f64: {
      const size_t want = (count + 255) / 256;
      add_kernel_f64<<<static_cast<unsigned>(want < 4096 ? want : 4096), 256, 0, stream>>>(
          static_cast<double*>(out), static_cast<const double*>(a), count);
      break;
    }
    case Dtype::f32:
    case Dtype::tf32: launch<float>(out, a, count, stream); break;
    case Dtype::f16: launch<__half>(out, a, count, stream); break;
    case Dtype::bf16: launch<__nv_bfloat16>(out, a, count, stream); break;
    case Dtype::fp8_e4m3: throw UsageError("add: fp8 is an input type, never an output type");
  }
  COLLMM_CUDA(cudaGetLastError());
}

}  // namespace collmm::cuda
