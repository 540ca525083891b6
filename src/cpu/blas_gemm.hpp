// blas_gemm.hpp: the cpu backend's GEMM engine: OpenBLAS, row-major. f32 and f64 run sgemm and
// dgemm; bf16 inputs give an f32 output (sbgemm where the OpenBLAS build has it). Also the add of
// the gemm_rs ring (axpy) and the BLAS thread count.
#pragma once

#include <cstdint>

#include "collmm/types.hpp"

namespace collmm::cpu {

bool gemm_supports(Dtype in);
// True when bf16 GEMMs run cblas_sbgemm; false when they widen bf16 to f32 and run cblas_sgemm.
bool have_native_bf16();

// C[m, n] = A[m, k] @ B (+ C when accumulate). A and B hold `in` elements, C output_dtype(GemmLibrary::openblas, in).
// B is [k, n] (kn) or [n, k] (nk); ld* are row strides in elements.
struct GemmCall {
  Dtype in = Dtype::f32;
  BLayout b_layout = BLayout::kn;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
};
void run_gemm(const GemmCall&);

// y[0..count) += x[0..count), elements of `dtype` (f32 or f64).
void run_add(Dtype dtype, void* y, const void* x, int64_t count);

// Threads every later BLAS call of this process uses.
void set_blas_threads(int threads);

}  // namespace collmm::cpu
