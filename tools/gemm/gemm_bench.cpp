// gemm_bench.cpp: collmm-gemm-bench, the compute side of a ring. It sets the P chunk GEMMs of M/P
// rows of one rank (each written into its rows of C) against one whole GEMM of the same total size.
// bf16, random data, on 1 or 2 lanes (streams), with cuBLASLt's heuristic or the timed algorithm
// choice.
// With --merge, the fewer, larger GEMMs of an ag_gemm ring rank too. All variants of one shape are
// timed interleaved (one run of each in turn, CUDA events, median over the rounds after warm-up),
// so clock and power drift hits them alike. (The engine against torch.matmul is gemm_vs_torch.py,
// through gemm_c_api.cpp.) Usage:
// collmm-gemm-bench [--reps N] [--csv FILE]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "atomic_file.hpp"
#include "collmm/plan.hpp"
#include "cuda_check.hpp"
#include "lt_gemm.hpp"

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
  upload_now(d, h.data(), count * 2);
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

// Row blocks [row, row + rows) of the M rows, one GEMM each.
using Blocks = std::vector<std::pair<int64_t, int64_t>>;

Blocks even_blocks(int64_t m, int P) {
  Blocks b;
  for (int q = 0; q < P; ++q) b.push_back({m * q / P, m * (q + 1) / P - m * q / P});
  return b;
}

// The GEMMs one rank of an ag_gemm ring runs, in its plan's order (with --merge G: fewer, larger).
Blocks ring_blocks(int64_t m, int64_t n, int64_t k, int P, int merge, int rank) {
  Problem p;
  p.op = Op::ag_gemm, p.m = m, p.n = n, p.k = k, p.world = P;
  PlanOptions o;
  o.algo = Algo::ring, o.merge = merge;
  Blocks b;
  for (const Step& s : make_plan(p, o, rank).steps)
    if (s.kind == StepKind::gemm) b.push_back({s.out.row, s.out.rows});
  return b;
}

// The GEMMs of `blocks` (one block: the whole GEMM) over the lanes; returns the median time in ms.
double time_chunks(GemmEngine& eng, const Operands& op, int64_t n, int64_t k, const Blocks& blocks, Lanes& lanes,
                   int reps) {
  cudaEvent_t t0, t1;
  COLLMM_CUDA(cudaEventCreate(&t0));
  COLLMM_CUDA(cudaEventCreate(&t1));
  const int L = static_cast<int>(lanes.streams.size());
  auto once = [&] {
    COLLMM_CUDA(cudaEventRecord(t0, lanes.streams[0]));
    for (int l = 1; l < L; ++l) COLLMM_CUDA(cudaStreamWaitEvent(lanes.streams[l], t0, 0));
    for (size_t q = 0; q < blocks.size(); ++q) {
      const auto [row, rows] = blocks[q];
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
  if (reps > 1)
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
    if (a == "--reps" && i + 1 < argc)
      reps = std::stoi(argv[++i]);
    else if (a == "--csv" && i + 1 < argc)
      csv_path = argv[++i];
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
    std::printf("# collmm-gemm-bench on %s (%d SMs), bf16, interleaved rounds, median of %d after 5 warm-up rounds\n",
                prop.name, prop.multiProcessorCount, reps);
    if (!csv_path.empty())
      if (const std::string why = why_not_writable(csv_path); !why.empty()) {
        std::fprintf(stderr, "collmm-gemm-bench: --csv %s: cannot be written (%s)\n", csv_path.c_str(), why.c_str());
        return 2;
      }
    std::string csv = "family,M,N,K,P,rows,gemms,lanes,choice,ms,tflops,x_whole\n";  // written at the end

    const int64_t M = 8192, K = 8192, Nmax = 8192;
    Operands op;
    op.a = random_bf16(M * K, 1);
    op.b = random_bf16(K * Nmax, 2);
    COLLMM_CUDA(cudaMalloc(&op.c, M * Nmax * 2));
    GemmEngine heur(0, kWorkspace), timed(0, kWorkspace), split2(0, kWorkspace);
    timed.set_algo_choice(GemmAlgo::timed);
    split2.set_sm_target(prop.multiProcessorCount / 2);  // two lanes share the SMs
    Lanes lane_sets[2] = {Lanes(1), Lanes(2)};

    struct Variant {
      std::string what;  // how the M rows are cut
      Blocks blocks;
      int lanes;
      GemmEngine* eng;
      std::vector<double> t;
    };
    // full: every chunk is [M/P, K] x [K, 8192] (device-notes' shapes); ag_gemm: one rank of an
    // ag_gemm ring with global N = 8192, so its GEMMs have N/P columns; there also the GEMMs of
    // ring ranks with --merge 2 and 4 (rank 0, and rank P/2 - 1 whose ring wraps mid-way).
    for (const char* family : {"full", "ag_gemm"})
      for (int P : {2, 4, 8}) {
        const bool ring = std::string(family) == "ag_gemm";
        const int64_t N = ring ? Nmax / P : Nmax;
        std::vector<Variant> vs;
        for (GemmEngine* e : {&heur, &timed}) vs.push_back({"whole", even_blocks(M, 1), 1, e, {}});
        for (GemmEngine* e : {&heur, &timed}) vs.push_back({"P chunks", even_blocks(M, P), 1, e, {}});
        vs.push_back({"P chunks", even_blocks(M, P), 2, &heur, {}});
        vs.push_back({"P chunks", even_blocks(M, P), 2, &split2, {}});
        if (ring)
          for (int merge : {2, 4})
            for (int rank : {0, P / 2 - 1})
              if (merge < P && (rank == 0 || P > 2))
                for (GemmEngine* e : {&heur, &timed})
                  vs.push_back({"merge" + std::to_string(merge) + " r" + std::to_string(rank),
                                ring_blocks(M, N, K, P, merge, rank),
                                1,
                                e,
                                {}});
        for (int round = 0; round < reps + 5; ++round)
          for (auto& v : vs) {
            const double ms = time_chunks(*v.eng, op, N, K, v.blocks, lane_sets[v.lanes - 1], 1);
            if (round >= 5) v.t.push_back(ms);
          }
        for (auto& v : vs) std::sort(v.t.begin(), v.t.end());
        const double whole = vs[0].t[vs[0].t.size() / 2];
        std::printf("\n## %s: M=%ld N=%ld K=%ld, P=%d: GEMMs over row blocks vs one whole GEMM\n", family, M, N, K, P);
        std::printf("%-12s %6s %6s %10s %10s %9s %12s\n", "rows", "GEMMs", "lanes", "choice", "ms", "TFLOP/s",
                    "x whole(heur)");
        for (auto& v : vs) {
          const double ms = v.t[v.t.size() / 2];
          const char* choice = v.eng == &heur ? "heuristic" : v.eng == &timed ? "timed" : "sms/2";
          std::printf("%-12s %6zu %6d %10s %10.4f %9.1f %12.3f\n", v.what.c_str(), v.blocks.size(), v.lanes, choice, ms,
                      tflops(M, N, K, ms), ms / whole);
          char row[256];
          std::snprintf(row, sizeof row, "%s,%ld,%ld,%ld,%d,%s,%zu,%d,%s,%.5f,%.1f,%.4f\n", family, M, N, K, P,
                        v.what.c_str(), v.blocks.size(), v.lanes, choice, ms, tflops(M, N, K, ms), ms / whole);
          csv += row;
        }
      }
    if (!csv_path.empty()) write_file_atomically(csv_path, csv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collmm-gemm-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
