// lt_gemm.cpp: the cuBLASLt GEMM engine (see lt_gemm.hpp): descriptor and algorithm
// cache, the row-major mapping, SM count target, fp8 scales, optional timed algorithm choice.
#include "lt_gemm.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_check.hpp"

namespace collmm::cuda {
namespace {

constexpr int kTimedCandidates = 32;  // heuristic answers the timed choice asks for
constexpr int kSplitKBases = 4;       // of which the first few are also tried with split-K

// The first `bases` candidates again with split-K factors 2, 4, 8 and each reduction scheme the
// kernel supports, kept when cuBLASLt accepts them for this problem (cublasLtMatmulAlgoCheck).
// Chunk GEMMs of few output tiles (1024 x 1024 over K = 8192 fills 32 of 132 SMs) are the case.
std::vector<cublasLtMatmulAlgo_t> split_k_variants(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                                   cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                   cublasLtMatrixLayout_t c, const cublasLtMatmulHeuristicResult_t* r,
                                                   int bases, size_t workspace) {
  std::vector<cublasLtMatmulAlgo_t> out;
  for (int i = 0; i < bases; ++i) {
    if (r[i].state != CUBLAS_STATUS_SUCCESS) continue;
    int splitk_ok = 0;
    uint32_t schemes = 0;
    size_t got = 0;
    cublasLtMatmulAlgoCapGetAttribute(&r[i].algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_ok, sizeof splitk_ok, &got);
    cublasLtMatmulAlgoCapGetAttribute(&r[i].algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes,
                                      &got);
    if (!splitk_ok) continue;
    for (int32_t split : {2, 4, 8})
      for (uint32_t scheme : {CUBLASLT_REDUCTION_SCHEME_INPLACE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                              CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE}) {
        if (!(schemes & scheme)) continue;
        cublasLtMatmulAlgo_t algo = r[i].algo;
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split);
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme);
        cublasLtMatmulHeuristicResult_t check{};
        if (cublasLtMatmulAlgoCheck(h, op, a, b, c, c, &algo, &check) == CUBLAS_STATUS_SUCCESS &&
            check.workspaceSize <= workspace)
          out.push_back(algo);
      }
  }
  return out;
}

struct Types {
  cudaDataType_t in, out, scale;
  cublasComputeType_t compute;
};

Types types_of(Dtype d) {
  switch (d) {
    case Dtype::f64: return {CUDA_R_64F, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case Dtype::f32: return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Dtype::tf32: return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    case Dtype::f16: return {CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Dtype::bf16: return {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Dtype::fp8_e4m3: return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  }
  throw UsageError("gemm engine: unknown dtype");
}

// The largest power of two (up to 256) that divides the address: what cuBLASLt may assume.
int alignment_of(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 1;
  while (a < 256 && v % (2 * a) == 0) a *= 2;
  return a;
}

std::string describe(const GemmArgs& g, float beta) {
  return to_string(g.dtype) + " M=" + std::to_string(g.m) + " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k) +
         " lda=" + std::to_string(g.lda) + " ldb=" + std::to_string(g.ldb) + " ldc=" + std::to_string(g.ldc) + " B " +
         to_string(g.b_layout) + " beta=" + std::to_string(beta) + " align A/B/C=" + std::to_string(alignment_of(g.a)) +
         "/" + std::to_string(alignment_of(g.b)) + "/" + std::to_string(alignment_of(g.c));
}

}  // namespace

GemmEngine::GemmEngine(int device, size_t workspace_bytes) : device_(device), workspace_bytes_(workspace_bytes) {
  COLLMM_CUDA(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
  COLLMM_CUBLAS(cublasLtCreate(&handle_));
}

void GemmEngine::set_fp8_scales(float scale_a, float scale_b) {
  for (auto& [key, e] : cache_)
    if (key.dtype == static_cast<int>(Dtype::fp8_e4m3)) throw UsageError("set_fp8_scales after the first fp8 GEMM");
  if (!scales_) COLLMM_CUDA(cudaMalloc(&scales_, 128 * sizeof(float)));
  upload_now(scales_, &scale_a, sizeof(float));
  upload_now(scales_ + 64, &scale_b, sizeof(float));
}

GemmEngine::~GemmEngine() {
  for (auto& [key, e] : cache_) {
    cublasLtMatrixLayoutDestroy(e.a);
    cublasLtMatrixLayoutDestroy(e.b);
    cublasLtMatrixLayoutDestroy(e.c);
    cublasLtMatmulDescDestroy(e.op);
  }
  if (scales_) cudaFree(scales_);
  cublasLtDestroy(handle_);
}

bool GemmEngine::supports(Dtype d) const {
  if (d != Dtype::fp8_e4m3) return true;
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_);
  return major >= 9;
}

GemmEngine::Entry& GemmEngine::entry(const GemmArgs& g, cudaStream_t stream, void* workspace) {
  const int sm_target = sm_target_ > 0 && sm_target_ < sm_count_ ? sm_target_ : 0;
  const GemmKey key{g.m,
                    g.n,
                    g.k,
                    g.lda,
                    g.ldb,
                    g.ldc,
                    static_cast<int>(g.dtype),
                    static_cast<int>(g.b_layout),
                    sm_target,
                    alignment_of(g.a),
                    alignment_of(g.b),
                    alignment_of(g.c)};
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;

  if (g.dtype == Dtype::fp8_e4m3 && g.b_layout != BLayout::nk)
    throw UsageError("fp8 e4m3 GEMMs on cuBLASLt need B stored as [N, K] (b layout nk), got kn");
  if (!supports(g.dtype)) throw UsageError("fp8 e4m3 GEMMs need a GPU of compute capability 9.0 or later");
  const Types t = types_of(g.dtype);
  Entry e;
  COLLMM_CUBLAS(cublasLtMatmulDescCreate(&e.op, t.compute, t.scale));
  const cublasOperation_t ta = g.b_layout == BLayout::kn ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  COLLMM_CUBLAS(cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  COLLMM_CUBLAS(cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (sm_target > 0)
    COLLMM_CUBLAS(
        cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target, sizeof sm_target));
  if (g.dtype == Dtype::fp8_e4m3 && scales_) {
    const float* sa = scales_ + 64;  // cuBLASLt's A is our B
    const float* sb = scales_;
    COLLMM_CUBLAS(cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    COLLMM_CUBLAS(cublasLtMatmulDescSetAttribute(e.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  }
  // Column-major views: cuBLASLt's A is our B, its B is our A (k x m), C is n x m.
  if (g.b_layout == BLayout::kn)
    COLLMM_CUBLAS(cublasLtMatrixLayoutCreate(&e.a, t.in, g.n, g.k, g.ldb));
  else
    COLLMM_CUBLAS(cublasLtMatrixLayoutCreate(&e.a, t.in, g.k, g.n, g.ldb));
  COLLMM_CUBLAS(cublasLtMatrixLayoutCreate(&e.b, t.in, g.k, g.m, g.lda));
  COLLMM_CUBLAS(cublasLtMatrixLayoutCreate(&e.c, t.out, g.n, g.m, g.ldc));

  cublasLtMatmulPreference_t pref;
  COLLMM_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  const uint32_t al_a = key.align_b, al_b = key.align_a, al_c = key.align_c;  // cuBLASLt's A is our B
  COLLMM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  COLLMM_CUBLAS(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
  COLLMM_CUBLAS(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
  COLLMM_CUBLAS(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
  COLLMM_CUBLAS(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  COLLMM_CUDA(cudaStreamIsCapturing(stream, &capturing));
  const int wanted = choice_ == GemmAlgo::timed && capturing == cudaStreamCaptureStatusNone ? kTimedCandidates : 1;
  cublasLtMatmulHeuristicResult_t results[kTimedCandidates] = {};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, e.op, e.a, e.b, e.c, e.c, pref, wanted, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    cublasLtMatrixLayoutDestroy(e.a);
    cublasLtMatrixLayoutDestroy(e.b);
    cublasLtMatrixLayoutDestroy(e.c);
    cublasLtMatmulDescDestroy(e.op);
    throw std::runtime_error(
        std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": cuBLASLt has no algorithm for " +
        to_string(g.dtype) + " M=" + std::to_string(g.m) + " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k) +
        " lda=" + std::to_string(g.lda) + " ldb=" + std::to_string(g.ldb) + " ldc=" + std::to_string(g.ldc) + " B " +
        to_string(g.b_layout) + " (status " + cublasLtGetStatusName(st) + ")");
  }
  e.algo = results[0].algo;
  if (found > 1) tune(e, g, stream, workspace, found, results);
  return cache_.emplace(key, e).first->second;
}

cublasStatus_t GemmEngine::try_launch(const Entry& e, const cublasLtMatmulAlgo_t& algo, const GemmArgs& g, void* c,
                                      float beta, cudaStream_t stream, void* workspace) {
  const double alpha64 = 1.0, beta64 = beta;
  const float alpha32 = 1.0f, beta32 = beta;
  const bool f64 = g.dtype == Dtype::f64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* b = f64 ? static_cast<const void*>(&beta64) : &beta32;
  return cublasLtMatmul(handle_, e.op, alpha, g.b, e.a, g.a, e.b, b, c, e.c, c, e.c, &algo, workspace, workspace_bytes_,
                        stream);
}

void GemmEngine::launch(const Entry& e, const cublasLtMatmulAlgo_t& algo, const GemmArgs& g, void* c, float beta,
                        cudaStream_t stream, void* workspace) {
  const cublasStatus_t st = try_launch(e, algo, g, c, beta, stream, workspace);
  if (st != CUBLAS_STATUS_SUCCESS)
    check_cublas(st, ("cublasLtMatmul for " + describe(g, beta)).c_str(), __FILE__, __LINE__);
}

void GemmEngine::tune(Entry& e, const GemmArgs& g, cudaStream_t stream, void* workspace, int candidates,
                      const cublasLtMatmulHeuristicResult_t* results) {
  std::vector<cublasLtMatmulAlgo_t> algos;
  for (int i = 0; i < candidates; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) algos.push_back(results[i].algo);
  for (const auto& a :
       split_k_variants(handle_, e.op, e.a, e.b, e.c, results, std::min(candidates, kSplitKBases), workspace_bytes_))
    algos.push_back(a);
  // Candidates run into C (beta = 0) or, for an accumulating GEMM, into a scratch copy's space.
  void* out = g.c;
  if (g.accumulate) {
    const size_t bytes = static_cast<size_t>(g.m) * g.ldc * dtype_size(output_dtype(GemmLibrary::cublaslt, g.dtype));
    COLLMM_CUDA(cudaMalloc(&out, bytes));
  }
  cudaEvent_t t0, t1;
  COLLMM_CUDA(cudaEventCreate(&t0));
  COLLMM_CUDA(cudaEventCreate(&t1));
  // Each candidate: 7 samples of 3 back-to-back runs (the rate it sustains in a chain of chunk
  // GEMMs, not one cold launch), after one warm-up run; the median sample decides. Candidates
  // cuBLASLt refuses at launch are skipped.
  auto sample = [&](const cublasLtMatmulAlgo_t& algo) {
    COLLMM_CUDA(cudaEventRecord(t0, stream));
    for (int rep = 0; rep < 3; ++rep) launch(e, algo, g, out, 0.0f, stream, workspace);
    COLLMM_CUDA(cudaEventRecord(t1, stream));
    COLLMM_CUDA(cudaEventSynchronize(t1));
    float ms = 0;
    COLLMM_CUDA(cudaEventElapsedTime(&ms, t0, t1));
    return ms;
  };
  for (int rep = 0; rep < 10; ++rep) launch(e, e.algo, g, out, 0.0f, stream, workspace);  // clocks up
  float best = 1e30f;
  for (const auto& algo : algos) {
    if (try_launch(e, algo, g, out, 0.0f, stream, workspace) != CUBLAS_STATUS_SUCCESS)
      continue;  // warm-up doubles as the launch check
    std::vector<float> times;
    for (int rep = 0; rep < 7; ++rep) times.push_back(sample(algo));
    std::sort(times.begin(), times.end());
    if (times[3] < best) best = times[3], e.algo = algo;
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  if (g.accumulate) COLLMM_CUDA(cudaFree(out));
}

void GemmEngine::gemm(const GemmArgs& g, cudaStream_t stream, void* workspace) {
  if (g.m == 0) return;
  const Entry& e = entry(g, stream, workspace);
  launch(e, e.algo, g, g.c, g.accumulate ? 1.0f : 0.0f, stream, workspace);
}

}  // namespace collmm::cuda
