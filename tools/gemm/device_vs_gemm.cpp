// device_vs_gemm.cpp: collmm-device-vs-gemm, a diagnostic for the GPU machine (not a test). It sets
// collmm::DeviceMatmul at one rank (ag_gemm ring, bf16, M N K) against the GEMM alone, side by side
// in one process on the same buffers. Each round replays, in turn: the call captured in a CUDA
// graph without and with the gathered A; the engine's one GEMM (cuBLASLt, heuristic, 32 MiB
// workspace); cublasGemmEx (what torch.matmul runs by default, with torch's 32 MiB workspace). Each
// is timed with CUDA events; medians over the rounds after warm-up.
//   collmm-device-vs-gemm [M N K [ROUNDS]]
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "collmm/device_matmul.hpp"
#include "cuda_check.hpp"
#include "lt_gemm.hpp"

namespace {

void ok(bool good, const char* what) {
  if (!good) throw std::runtime_error(std::string("failed: ") + what);
}

// Random bf16 in +-[0.1, 1] (never zeros: GEMMs on zeros run faster).
void* random_bf16(size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mag(0.1f, 1.0f);
  std::vector<uint16_t> h(count);
  for (auto& v : h) {
    float f = mag(gen) * (gen() % 2 ? 1.0f : -1.0f);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = static_cast<uint16_t>(bits >> 16);
  }
  void* d = nullptr;
  COLLMM_CUDA(cudaMalloc(&d, count * 2));
  COLLMM_CUDA(cudaMemcpy(d, h.data(), count * 2, cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int64_t m = argc > 3 ? std::atoll(argv[1]) : 8192, n = argc > 3 ? std::atoll(argv[2]) : 8192,
                  k = argc > 3 ? std::atoll(argv[3]) : 8192;
    const int rounds = argc > 4 ? std::atoi(argv[4]) : 40;
    COLLMM_CUDA(cudaSetDevice(0));
    ncclComm_t comm;
    int dev = 0;
    ok(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess, "ncclCommInitAll");
    cudaStream_t stream;
    COLLMM_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    void* a = random_bf16(static_cast<size_t>(m * k), 1);
    void* b = random_bf16(static_cast<size_t>(k * n), 2);
    void *c = nullptr, *gathered = nullptr, *ws = nullptr;
    COLLMM_CUDA(cudaMalloc(&c, static_cast<size_t>(m * n) * 2));
    COLLMM_CUDA(cudaMalloc(&gathered, static_cast<size_t>(m * k) * 2));
    COLLMM_CUDA(cudaMalloc(&ws, size_t(32) << 20));

    const collmm::Problem problem{.op = collmm::Op::ag_gemm, .m = m, .n = n, .k = k, .world = 1};
    collmm::DeviceMatmul mm(comm, problem, collmm::PlanOptions{.algo = collmm::Algo::ring}, collmm::Dtype::bf16);
    auto graph_of = [&](void* g) {
      mm.run(a, b, c, stream, g);  // outside the capture first
      COLLMM_CUDA(cudaStreamSynchronize(stream));
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      COLLMM_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      mm.run(a, b, c, stream, g);
      COLLMM_CUDA(cudaStreamEndCapture(stream, &graph));
      COLLMM_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      return exec;
    };
    cudaGraphExec_t plain = graph_of(nullptr), with_gathered = graph_of(gathered);

    collmm::cuda::GemmEngine engine(0, size_t(32) << 20);
    collmm::cuda::GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a = a, g.b = b, g.c = c, g.lda = k, g.ldb = n, g.ldc = n;
    g.dtype = collmm::Dtype::bf16;

    cublasHandle_t blas;
    ok(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    ok(cublasSetStream(blas, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
    ok(cublasSetWorkspace(blas, ws, size_t(32) << 20) == CUBLAS_STATUS_SUCCESS, "cublasSetWorkspace");
    const float one = 1.0f, zero = 0.0f;
    auto gemm_ex = [&] {  // torch's at::cuda::blas::gemm<BFloat16> for a row-major mm: C^T = B^T A^T
      ok(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                      &one, b, CUDA_R_16BF, static_cast<int>(n), a, CUDA_R_16BF, static_cast<int>(k), &zero, c,
                      CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT_TENSOR_OP) == CUBLAS_STATUS_SUCCESS,
         "cublasGemmEx");
    };
    const std::vector<std::pair<std::string, std::function<void()>>> rows = {
        {"DeviceMatmul replay, no gathered A", [&] { COLLMM_CUDA(cudaGraphLaunch(plain, stream)); }},
        {"DeviceMatmul replay, gathered A", [&] { COLLMM_CUDA(cudaGraphLaunch(with_gathered, stream)); }},
        {"engine GEMM (cuBLASLt heuristic)", [&] { engine.gemm(g, stream, ws); }},
        {"cublasGemmEx (torch's default)", gemm_ex}};
    cudaEvent_t t0, t1;
    COLLMM_CUDA(cudaEventCreate(&t0));
    COLLMM_CUDA(cudaEventCreate(&t1));
    std::map<std::string, std::vector<float>> ms;
    for (int r = 0; r < rounds + 5; ++r)
      for (const auto& [name, fn] : rows) {
        COLLMM_CUDA(cudaEventRecord(t0, stream));
        fn();
        COLLMM_CUDA(cudaEventRecord(t1, stream));
        COLLMM_CUDA(cudaEventSynchronize(t1));
        float t = 0;
        COLLMM_CUDA(cudaEventElapsedTime(&t, t0, t1));
        if (r >= 5) ms[name].push_back(t);
      }
    std::printf("M N K = %lld %lld %lld bf16, %d rounds after 5 (median, min, max us):\n", static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k), rounds);
    for (const auto& [name, fn] : rows) {
      auto v = ms[name];
      std::sort(v.begin(), v.end());
      std::printf("  %-40s %8.1f %8.1f %8.1f\n", name.c_str(), 1e3 * v[v.size() / 2], 1e3 * v.front(), 1e3 * v.back());
    }
    cublasDestroy(blas);
    cudaGraphExecDestroy(plain);
    cudaGraphExecDestroy(with_gathered);
    ncclCommDestroy(comm);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collmm-device-vs-gemm: %s\n", e.what());
    return 1;
  }
}
