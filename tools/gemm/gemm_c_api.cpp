// gemm_c_api.cpp: a C entry to the GEMM engine (libcollmm_gemm_c.so) so that gemm_vs_torch.py can
// time it beside torch.matmul in one process, on the same tensors and stream, interleaved.
// Row-major bf16, B as [K, N]. Functions return 0, or -1 with the message in collmm_gemm_error().
#include <memory>
#include <string>

#include "cuda_check.hpp"
#include "lt_gemm.hpp"

namespace {

struct Engine {
  std::unique_ptr<collmm::cuda::GemmEngine> engine;
  void* workspace = nullptr;
};

thread_local std::string g_error;

}  // namespace

extern "C" {

const char* collmm_gemm_error() { return g_error.c_str(); }

void* collmm_gemm_new(int device, int timed) {
  try {
    COLLMM_CUDA(cudaSetDevice(device));
    auto e = std::make_unique<Engine>();
    e->engine = std::make_unique<collmm::cuda::GemmEngine>(device, size_t(32) << 20);
    e->engine->set_algo_choice(timed ? collmm::GemmAlgo::timed : collmm::GemmAlgo::heuristic);
    COLLMM_CUDA(cudaMalloc(&e->workspace, e->engine->workspace_bytes()));
    return e.release();
  } catch (const std::exception& ex) {
    g_error = ex.what();
    return nullptr;
  }
}

void collmm_gemm_free(void* h) {
  auto* e = static_cast<Engine*>(h);
  cudaFree(e->workspace);
  delete e;
}

int collmm_gemm_bf16(void* h, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, void* stream) {
  try {
    auto* e = static_cast<Engine*>(h);
    collmm::cuda::GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a = a, g.b = b, g.c = c, g.lda = k, g.ldb = n, g.ldc = n;
    g.dtype = collmm::Dtype::bf16;
    e->engine->gemm(g, static_cast<cudaStream_t>(stream), e->workspace);
    return 0;
  } catch (const std::exception& ex) {
    g_error = ex.what();
    return -1;
  }
}

}  // extern "C"
