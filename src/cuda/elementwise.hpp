// elementwise.hpp: the GPU side of the plans' add steps: out[i] += a[i] over `count` elements of
// an output dtype (f64, f32, f16, bf16), enqueued on a stream. `a` may live on another GPU when
// peer access is on (ranks emulated over several GPUs).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "collmm/types.hpp"

namespace collmm::cuda {

void add_into(void* out, const void* a, size_t count, Dtype dtype, cudaStream_t stream);

}  // namespace collmm::cuda
