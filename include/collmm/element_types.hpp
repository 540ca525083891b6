// collmm/element_types.hpp: the element type of every buffer of a plan. A, B and the gathered A
// hold the input dtype; C and the work buffers (gemm_rs's partial and forwarded sums) hold what the
// GEMM library writes for that input. The executors size and move their buffers by these rules,
// and the cost model counts its bytes by them.
#pragma once

#include <string>

#include "collmm/plan.hpp"

namespace collmm {

// The library that runs a backend's GEMMs: it decides the output's element type.
enum class GemmLibrary { openblas, cublaslt, aten };
std::string to_string(GemmLibrary);
GemmLibrary parse_gemm_library(const std::string&);  // throws UsageError

// The element type the library writes for inputs of `in`: OpenBLAS f32 for bf16 (sbgemm stores
// f32); cuBLASLt bf16 for bf16 and fp8, f32 for tf32; ATen the input's own. Otherwise `in`.
Dtype output_dtype(GemmLibrary, Dtype in);

// The element type of a buffer of this role: `in` for A, B and gathered, `out` for C and work.
Dtype buffer_dtype(Role, Dtype in, Dtype out);

}  // namespace collmm
