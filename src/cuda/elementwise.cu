// elementwise.cu: out += a and an SM copy on the GPU (see elementwise.hpp). The add reads and
// writes 16 bytes per thread and step where the pointers are 16-byte aligned (8 bf16 / f16, 4 f32,
// 2 f64 elements), with f32 arithmetic for f16 and bf16; the ragged tail goes element by element.
#include "elementwise.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "cuda_check.hpp"

namespace collmm::cuda {
namespace {

template <typename T>
__device__ float to_f(T v) {
  return static_cast<float>(v);
}
template <typename T>
__device__ T from_f(float v) {
  return static_cast<T>(v);
}
template <>
__device__ float to_f(__half v) {
  return __half2float(v);
}
template <>
__device__ __half from_f(float v) {
  return __float2half_rn(v);
}
template <>
__device__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __nv_bfloat16 from_f(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T>
__device__ T sum(T x, T y) {
  return from_f<T>(to_f(x) + to_f(y));
}
template <>
__device__ double sum(double x, double y) {
  return x + y;
}

// `vectors` 16-byte groups of W = 16 / sizeof(T) elements, then the tail element by element.
template <typename T>
__global__ void add_kernel(T* out, const T* a, size_t vectors, size_t count) {
  constexpr int W = 16 / sizeof(T);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (size_t v = first; v < vectors; v += stride) {
    uint4 x = reinterpret_cast<uint4*>(out)[v];
    const uint4 y = reinterpret_cast<const uint4*>(a)[v];
    T* xs = reinterpret_cast<T*>(&x);
    const T* ys = reinterpret_cast<const T*>(&y);
#pragma unroll
    for (int e = 0; e < W; ++e) xs[e] = sum(xs[e], ys[e]);
    reinterpret_cast<uint4*>(out)[v] = x;
  }
  for (size_t i = vectors * W + first; i < count; i += stride) out[i] = sum(out[i], a[i]);
}

template <typename T>
void launch_add(void* out, const void* a, size_t count, cudaStream_t stream) {
  constexpr size_t W = 16 / sizeof(T);
  const bool aligned = reinterpret_cast<uintptr_t>(out) % 16 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0;
  const size_t vectors = aligned ? count / W : 0;
  const int threads = 256;
  const size_t work = vectors + (count - vectors * W);
  const size_t want = (work + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 2048 ? (want > 0 ? want : 1) : 2048);
  add_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(a), vectors, count);
}

__global__ void copy_kernel(uint4* dst, const uint4* src, size_t vectors) {
  for (size_t v = blockIdx.x * size_t(blockDim.x) + threadIdx.x; v < vectors; v += size_t(gridDim.x) * blockDim.x)
    dst[v] = src[v];
}

__global__ void copy_bytes_kernel(char* dst, const char* src, size_t bytes) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

void add_into(void* out, const void* a, size_t count, Dtype dtype, cudaStream_t stream) {
  if (count == 0) return;
  switch (dtype) {
    case Dtype::f64: launch_add<double>(out, a, count, stream); break;
    case Dtype::f32:
    case Dtype::tf32: launch_add<float>(out, a, count, stream); break;
    case Dtype::f16: launch_add<__half>(out, a, count, stream); break;
    case Dtype::bf16: launch_add<__nv_bfloat16>(out, a, count, stream); break;
    case Dtype::fp8_e4m3: throw UsageError("add: fp8 is an input type, never an output type");
  }
  COLLMM_CUDA(cudaGetLastError());
}

// A head of bytes up to dst's next 16-byte boundary, 16-byte vectors, then the tail. Vectors need
// src and dst equally misaligned (row slices of one row width are); otherwise byte by byte.
void sm_copy(void* dst, const void* src, size_t bytes, int ctas, cudaStream_t stream) {
  if (bytes == 0) return;
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const uintptr_t da = reinterpret_cast<uintptr_t>(d), sa = reinterpret_cast<uintptr_t>(s);
  if (da % 16 != sa % 16) {
    copy_bytes_kernel<<<ctas, 512, 0, stream>>>(d, s, bytes);
  } else {
    const size_t head = std::min(bytes, (16 - da % 16) % 16), vectors = (bytes - head) / 16;
    const size_t tail = bytes - head - vectors * 16;
    if (head > 0) copy_bytes_kernel<<<1, 32, 0, stream>>>(d, s, head);
    if (vectors > 0)
      copy_kernel<<<ctas, 512, 0, stream>>>(reinterpret_cast<uint4*>(d + head),
                                            reinterpret_cast<const uint4*>(s + head), vectors);
    if (tail > 0) copy_bytes_kernel<<<1, 32, 0, stream>>>(d + bytes - tail, s + bytes - tail, tail);
  }
  COLLMM_CUDA(cudaGetLastError());
}

}  // namespace collmm::cuda
