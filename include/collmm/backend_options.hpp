// collmm/backend_options.hpp: the settings a backend is started with (make_executor,
// src/common/backends.hpp), as enums with their names: to_string prints the name a user types,
// parse_* reads it back and throws UsageError naming the expected ones.
#pragma once

#include <string>

namespace collmm {

enum class Backend { cpu, cuda };
// How the cuda backend's ranks reach each other: NCCL (one rank per GPU), local (ranks emulated
// in one process, reading each other's memory), host (one GPU rank whose peers are played by
// pinned host memory: the link is PCIe).
enum class CudaTransport { nccl, local, host };
// What moves the data of the cuda host transport: the copy engines (cudaMemcpyAsync) or an SM
// copy kernel (as NCCL's kernels move data).
enum class LinkCopy { engine, sm };
// How cuBLASLt's algorithm is picked: its heuristic's first answer, or the fastest of its top
// candidates, timed once per shape.
enum class GemmAlgo { heuristic, timed };

std::string to_string(Backend);
Backend parse_backend(const std::string&);
std::string to_string(CudaTransport);
CudaTransport parse_cuda_transport(const std::string&);
std::string to_string(LinkCopy);
LinkCopy parse_link_copy(const std::string&);
std::string to_string(GemmAlgo);
GemmAlgo parse_gemm_algo(const std::string&);

// Settings the backends read; each ignores what is not its own.
struct BackendOptions {
  Backend backend = Backend::cpu;
  int threads = 0;  // cpu: BLAS threads per rank; 0: the node's cores split over its ranks
  CudaTransport transport = CudaTransport::nccl;  // cuda
  int world = 0;                                  // cuda local and host transports: how many ranks the job has
  int rank = 0;                                   // cuda host transport: the rank this process runs
  LinkCopy link_copy = LinkCopy::engine;          // cuda host transport
  bool comm_priority = false;  // cuda: the comm lane (and the host link's streams) at the highest stream priority
  int gpus = 0;                // cuda: -g G, GPUs driven by this process, one thread each (0: one per MPI rank)
  int gemm_sms = 0;            // cuda: SM count target for GEMMs (0: all)
  int sm_margin = 0;           // cuda: leave this many SMs to comm kernels
  int nccl_min_ctas = 0, nccl_max_ctas = 0;  // cuda: NCCL CTA bounds (0: NCCL's default)
  bool graph = false;                        // cuda: capture one iteration in a CUDA graph and replay it
  GemmAlgo gemm_algo = GemmAlgo::heuristic;  // cuda
  int timeout_s = 300;                       // a run that takes longer aborts the job (a rank died or hangs)
  // Tests of the job's teardown: this rank fails (throws) or stops (SIGSTOP) while the backend
  // starts (cuda: right before its NCCL communicators are made). -1: none.
  int debug_fail_rank = -1, debug_hang_rank = -1;
};

}  // namespace collmm
