// fp8_probe.cpp: a diagnostic, not a test: which cuBLASLt fp8 e4m3 "TN" GEMM setups (bf16 C/D) this
// GPU and cuBLASLt accept, on one 64x64x64 problem: in place (C == D), C separate, C = nullptr,
// with and without per-tensor scale pointers, fast accumulation. Prints one status line per setup.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  const int m = 64, n = 64, k = 64;
  void *a, *b, *c, *d, *ws;
  float* scales;
  cudaMalloc(&a, m * k), cudaMalloc(&b, n * k), cudaMalloc(&c, m * n * 2), cudaMalloc(&d, m * n * 2);
  cudaMalloc(&ws, 32 << 20);
  cudaMalloc(&scales, 512);
  cudaMemset(a, 0x38, m * k), cudaMemset(b, 0x38, n * k), cudaMemset(c, 0, m * n * 2);  // 0x38 = 1.0 in e4m3
  const float ones[4] = {1, 1, 1, 1};
  cudaMemcpy(scales, ones, 16, cudaMemcpyHostToDevice);
  cudaMemcpy(scales + 64, ones, 4, cudaMemcpyHostToDevice);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  struct Setup {
    const char* name;
    int c_mode;
    int scales;
    bool fast;
  };  // scales: 0 none, 1 4 bytes apart, 2 256 apart  // c_mode 0: C == D, 1: separate, 2: nullptr
  for (Setup s : {Setup{"in place, scales", 0, true, false}, Setup{"C separate, scales", 1, true, false},
                  Setup{"C nullptr, scales", 2, true, false}, Setup{"in place, no scales", 0, false, false},
                  Setup{"in place, scales, fast accum", 0, true, true}, Setup{"C separate, no scales", 1, false, false},
                  Setup{"in place, scales 256 B apart", 0, 2, false}}) {
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s.scales) {
      const float* sa = scales;
      const float* sb = s.scales == 2 ? scales + 64 : scales + 1;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
    }
    const int8_t fast = s.fast;
    if (s.fast) cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, m, n, m);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t wsb = 32 << 20;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    cublasLtMatmulHeuristicResult_t res = {};
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &res, &found);
    float alpha = 1, beta = 0;
    void* cp = s.c_mode == 0 ? d : s.c_mode == 1 ? c : nullptr;
    cublasStatus_t ms = found ? cublasLtMatmul(h, op, &alpha, a, la, b, lb, &beta, cp, lc, d, lc, &res.algo, ws, wsb, 0)
                              : CUBLAS_STATUS_NOT_SUPPORTED;
    cudaDeviceSynchronize();
    uint16_t out = 0;
    cudaMemcpy(&out, d, 2, cudaMemcpyDeviceToHost);
    unsigned bits = unsigned(out) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    std::printf("fp8 probe: %-32s heuristic %s (%d found), matmul %s, D[0] = %g (want 64)\n", s.name,
                cublasLtGetStatusName(hs), found, cublasLtGetStatusName(ms), f);
    cudaMemset(d, 0, m * n * 2);
  }
  return 0;
}
