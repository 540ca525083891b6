// lt_gemm.hpp: row-major GEMMs on cuBLASLt, C[m, n] (+)= A[m, k] @ B, for one device.
//
// Row-major matrices are column-major transposes, so C^T = B^T A^T is handed to cuBLASLt with
// cuBLASLt's "A" = our B and its "B" = our A. No copies: each chunk GEMM writes straight into its
// rows of C (any row offset: the alignment preferences are read off the real pointers).
// Matmul descriptors, layouts and the chosen algorithm are cached per GemmKey (shape, leading
// dimensions, dtype, B layout, SM target, pointer alignments). The caller owns the workspace
// (one per lane). Element types: f64; f32; tf32 (f32 storage, TF32 tensor cores); f16 and bf16
// (f32 accumulation, output of the input type); fp8 e4m3 (per-tensor scales, bf16 output; Hopper
// wants it "TN": B as [N, K], BLayout::nk).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "collmm/backend_options.hpp"
#include "collmm/element_types.hpp"

namespace collmm::cuda {

struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;  // [m, k], row stride lda (elements)
  const void* b = nullptr;  // kn: [k, n], stride ldb; nk: [n, k], stride ldb
  void* c = nullptr;        // [m, n], stride ldc, of output_dtype(GemmLibrary::cublaslt, dtype)
  int64_t lda = 0, ldb = 0, ldc = 0;
  Dtype dtype = Dtype::bf16;
  BLayout b_layout = BLayout::kn;
  bool accumulate = false;  // C += A @ B
};

struct GemmKey {
  int64_t m, n, k, lda, ldb, ldc;
  int dtype, b_layout, sm_target, align_a, align_b, align_c;
  bool operator<(const GemmKey& o) const {
    return std::tie(m, n, k, lda, ldb, ldc, dtype, b_layout, sm_target, align_a, align_b, align_c) <
           std::tie(o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.dtype, o.b_layout, o.sm_target, o.align_a, o.align_b,
                    o.align_c);
  }
};

class GemmEngine {
 public:
  // `device` must be current when the engine is used. workspace_bytes: each lane's workspace size.
  GemmEngine(int device, size_t workspace_bytes);
  ~GemmEngine();
  GemmEngine(const GemmEngine&) = delete;
  GemmEngine& operator=(const GemmEngine&) = delete;

  int device() const { return device_; }
  int sm_count() const { return sm_count_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  // SMs the GEMM kernels should plan for (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET); 0: all.
  void set_sm_target(int sms) { sm_target_ = sms; }
  // How the algorithm for a new shape is chosen: cuBLASLt's first heuristic answer, or the fastest
  // of its first 32 answers plus split-K variants of the first 4, timed on the real operands (run
  // once per key, at the first call; takes tens of milliseconds per key).
  void set_algo_choice(GemmAlgo c) { choice_ = c; }
  // fp8 per-tensor scales of A and B (D = scale_a * scale_b * A @ B). Without a call no scale
  // pointers are set (cuBLASLt's default scale 1). Must come before the first fp8 GEMM. cuBLASLt
  // 13.1 on the H200 refused (NOT_SUPPORTED) scale pointers 4 bytes apart: they lie 256 bytes apart.
  void set_fp8_scales(float scale_a, float scale_b);
  bool supports(Dtype) const;

  // Enqueues one GEMM on `stream`. Throws UsageError for unsupported dtype/layout pairs.
  // With GemmAlgo::timed a new key is tuned first: that runs candidate GEMMs into C, so the
  // first call of an accumulating GEMM is tuned with beta = 0 into a scratch output instead.
  void gemm(const GemmArgs&, cudaStream_t stream, void* workspace);

 private:
  struct Entry {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A (our B), B (our A), C
    cublasLtMatmulAlgo_t algo{};
  };
  Entry& entry(const GemmArgs&, cudaStream_t, void* workspace);
  void tune(Entry&, const GemmArgs&, cudaStream_t, void* workspace, int candidates,
            const cublasLtMatmulHeuristicResult_t* results);
  // One cublasLtMatmul; try_launch returns its status, launch throws on failure.
  cublasStatus_t try_launch(const Entry&, const cublasLtMatmulAlgo_t&, const GemmArgs&, void* c, float beta,
                            cudaStream_t, void* workspace);
  void launch(const Entry&, const cublasLtMatmulAlgo_t&, const GemmArgs&, void* c, float beta, cudaStream_t,
              void* workspace);

  int device_ = 0, sm_count_ = 0, sm_target_ = 0;
  size_t workspace_bytes_ = 0;
  GemmAlgo choice_ = GemmAlgo::heuristic;
  cublasLtHandle_t handle_ = nullptr;
  float* scales_ = nullptr;  // device: our A's scale at [0], our B's at [64] (256 bytes apart); null: none
  std::map<GemmKey, Entry> cache_;
};

}  // namespace collmm::cuda
