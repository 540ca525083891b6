// gemm_bench.cpp: collmm-gemm-bench, the GEMM engine's own benchmark (issue 3 §9), bf16, random
// data, CUDA events, median of many runs after warm-up.
//  whole:  one M x N x K GEMM per shape, the engine's heuristic choice and its timed choice; the
//          lines "engine,M,N,K,ms" are what scripts/gpu-check sets beside torch.matmul.
//  chunks: the compute side of a ring: P chunk GEMMs of M/P rows (each into its rows of C) against
//          one whole GEMM, on 1 or 2 lanes (streams), heuristic or timed algorithm choice.
// Usage: collmm-gemm-bench [--reps N] [--csv FILE]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.hpp"
#include "gemm_engine.hpp"

using namespace collmm;
using namespace collmm::cuda;

namespace {

constexpr size_t kWorkspace = size_t(32) << 20;

struct Operands {
  void *a = nullptr, *b = nullptr, *c = nullptr;
};

// Random bf16 in +-[0.1, 1] (never zeros: zeros run faster than real data).
void* random_bf16(size_t count, uint32_t seed) {
  std::vector<uint16_t> h(count);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  for (auto& x : h) {
    float f = u(gen) * ((gen() & 1) ? -1.f : 1.f);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    x = static_cast<uint16_t>(bits >> 16);
  }
  void* d = nullptr;
  COLLMM_CUDA(cudaMalloc(&d, count * 2));
  COLLMM_CUDA(cudaMemcpy(d, h.data(), count * 2, cudaMemcpyHostToDevice));
  return d;
}

struct Lanes {
  std::vector<cudaStream_t> streams;
  std::vector<void*> workspaces;
  std::vector<cudaEvent_t> joins;
  explicit Lanes(int n) {
    for (int i = 0; i < n; ++i) {
      cudaStream_t s;
      void* w;
      cudaEvent_t e;
      COLLMM_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      COLLMM_CUDA(cudaMalloc(&w, kWorkspace));
      COLLMM_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      streams.push_back(s), workspaces.push_back(w), joins.push_back(e);
    }
  }
};

// P chunk GEMMs (P = 1: the whole GEMM) over the lanes; returns the median time in ms.
double time_chunks(GemmEngine& eng, const Operands& op, int64_t m, int64_t n, int64_t k, int P, Lanes& lanes, int reps) {
  cudaEvent_t t0, t1;
  COLLMM_CUDA(cudaEventCreate(&t0));
  COLLMM_CUDA(cudaEventCreate(&t1));
  const int L = static_cast<int>(lanes.streams.size());
  auto once = [&] {
    COLLMM_CUDA(cudaEventRecord(t0, lanes.streams[0]));
    for (int l = 1; l < L; ++l) COLLMM_CUDA(cudaStreamWaitEvent(lanes.streams[l], t0, 0));
    for (int q = 0; q < P; ++q) {
      const int64_t row = m * q / P, rows = m * (q + 1) / P - row;
      GemmArgs g;
      g.m = rows, g.n = n, g.k = k;
      g.a = static_cast<const char*>(op.a) + row * k * 2;
      g.b = op.b;
      g.c = static_cast<char*>(op.c) + row * n * 2;
      g.lda = k, g.ldb = n, g.ldc = n;
      g.dtype = Dtype::bf16;
      eng.gemm(g, lanes.streams[q % L], lanes.workspaces[q % L]);
    }
    for (int l = 1; l < L; ++l) {
      COLLMM_CUDA(cudaEventRecord(lanes.joins[l], lanes.streams[l]));
      COLLMM_CUDA(cudaStreamWaitEvent(lanes.streams[0], lanes.joins[l], 0));
    }
    COLLMM_CUDA(cudaEventRecord(t1, lanes.streams[0]));
    COLLMM_CUDA(cudaEventSynchronize(t1));
    float ms = 0;
    COLLMM_CUDA(cudaEventElapsedTime(&ms, t0, t1));
    return static_cast<double>(ms);
  };
  for (int i = 0; i < 5; ++i) once();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(once());
  std::sort(t.begin(), t.end());
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return t[t.size() / 2];
}

double tflops(int64_t m, int64_t n, int64_t k, double ms) { return 2.0 * m * n * k / (ms * 1e-3) / 1e12; }

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  std::string csv_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--csv" && i + 1 < argc) csv_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: collmm-gemm-bench [--reps N] [--csv FILE]\n");
      return 2;
    }
  }
  try {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
      std::fprintf(stderr, "collmm-gemm-bench: no CUDA GPU visible\n");
      return 1;
    }
    cudaDeviceProp prop;
    COLLMM_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("# collmm-gemm-bench on %s (%d SMs), bf16, median of %d runs after 5 warm-ups\n", prop.name,
                prop.multiProcessorCount, reps);
    FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
    if (csv) std::fprintf(csv, "kind,M,N,K,P,lanes,choice,ms,tflops\n");

    const int64_t N = 8192, K = 8192, M = 8192;
    Operands op;
    op.a = random_bf16(M * K, 1);
    op.b = random_bf16(K * N, 2);
    COLLMM_CUDA(cudaMalloc(&op.c, M * N * 2));
    GemmEngine heur(0, kWorkspace), timed(0, kWorkspace);
    timed.set_algo_choice(AlgoChoice::timed);
    Lanes one(1), two(2), three(3);

    std::printf("\n## whole GEMMs (N = K = 8192)\n%6s %6s %6s %12s %10s %12s %10s\n", "M", "N", "K", "heur ms",
                "TFLOP/s", "timed ms", "TFLOP/s");
    for (int P : {1, 2, 4, 8}) {
      const int64_t m = M / P;
      const double h = time_chunks(heur, op, m, N, K, 1, one, reps);
      const double t = time_chunks(timed, op, m, N, K, 1, one, reps);
      std::printf("%6ld %6ld %6ld %12.4f %10.1f %12.4f %10.1f\n", m, N, K, h, tflops(m, N, K, h), t, tflops(m, N, K, t));
      if (csv) {
        std::fprintf(csv, "whole,%ld,%ld,%ld,1,1,heuristic,%.5f,%.1f\n", m, N, K, h, tflops(m, N, K, h));
        std::fprintf(csv, "whole,%ld,%ld,%ld,1,1,timed,%.5f,%.1f\n", m, N, K, t, tflops(m, N, K, t));
      }
    }

    std::printf("\n## P chunk GEMMs of M/P rows vs one whole GEMM (M = N = K = 8192)\n");
    std::printf("%3s %6s %10s %12s %10s %14s\n", "P", "lanes", "choice", "chunks ms", "TFLOP/s", "x best whole");
    const double whole = std::min(time_chunks(heur, op, M, N, K, 1, one, reps), time_chunks(timed, op, M, N, K, 1, one, reps));
    for (int P : {2, 4, 8})
      for (int lanes : {1, 2, 3})
        for (GemmEngine* eng : {&heur, &timed}) {
          Lanes& l = lanes == 1 ? one : lanes == 2 ? two : three;
          const double t = time_chunks(*eng, op, M, N, K, P, l, reps);
          const char* choice = eng == &heur ? "heuristic" : "timed";
          std::printf("%3d %6d %10s %12.4f %10.1f %14.3f\n", P, lanes, choice, t, tflops(M, N, K, t), t / whole);
          if (csv) std::fprintf(csv, "chunks,%ld,%ld,%ld,%d,%d,%s,%.5f,%.1f\n", M, N, K, P, lanes, choice, t, tflops(M, N, K, t));
        }
    if (csv) std::fclose(csv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collmm-gemm-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
