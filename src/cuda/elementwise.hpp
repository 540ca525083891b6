// elementwise.hpp: the GPU kernels beside the GEMMs. The plans' add steps (out[i] += a[i] over
// `count` elements of an output dtype: f64, f32, f16, bf16). A copy by SMs, for the host
// transport's kernel-copy mode (it moves chunks between device and mapped pinned host memory with a
// kernel instead of a copy engine). Both enqueued on a stream. `a` may live on another GPU
// when peer access is on (ranks emulated over several GPUs).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "collmm/types.hpp"

namespace collmm::cuda {

void add_into(void* out, const void* a, size_t count, Dtype dtype, cudaStream_t stream);

// dst = src, `bytes` bytes, by a kernel of `ctas` thread blocks (16-byte accesses where both
// pointers allow). Either side may be mapped pinned host memory.
void sm_copy(void* dst, const void* src, size_t bytes, int ctas, cudaStream_t stream);

}  // namespace collmm::cuda
