// device_matmul.cpp: collmm's C++ API on device memory, as an engine of one's own would call it: an
// MPI job, one rank per process, an NCCL communicator of the caller's, device buffers and a stream.
// Each rank runs ag_gemm (the column-parallel linear) with the ring, checks C against collmm's f64
// reference, then captures the call in a CUDA graph and times its replays with CUDA events.
//
//   mpirun -np P build/examples/collmm-device-example [M N K]     (default 4096 4096 4096, bf16)
//
// Ranks outnumbering the GPUs share them (NCCL is told they are separate hosts): right results,
// timings that mean nothing.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "collmm/device_matmul.hpp"
#include "data.hpp"

#define CUDA_OK(call) check((call) == cudaSuccess, #call)
#define NCCL_OK(call) check((call) == ncclSuccess, #call)

static void check(bool ok, const char* call) {
  if (!ok) throw std::runtime_error(std::string("failed: ") + call);
}

static void* device_copy(const std::vector<unsigned char>& host) {
  void* p = nullptr;
  CUDA_OK(cudaMalloc(&p, host.size()));
  CUDA_OK(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());  // from pageable memory cudaMemcpy may return before the copy lands
  return p;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1, gpus = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int code = 0;
  try {
    const int64_t m = argc > 3 ? std::atoll(argv[1]) : 4096, n = argc > 3 ? std::atoll(argv[2]) : 4096,
                  k = argc > 3 ? std::atoll(argv[3]) : 4096;
    CUDA_OK(cudaGetDeviceCount(&gpus));
    if (world > gpus) {  // several ranks on one GPU: NCCL takes them for separate hosts
      setenv("NCCL_HOSTID", ("h" + std::to_string(rank)).c_str(), 1);
      setenv("NCCL_SOCKET_IFNAME", "lo", 1);
      setenv("NCCL_IB_DISABLE", "1", 1);
    }
    CUDA_OK(cudaSetDevice(rank % gpus));
    ncclUniqueId id;
    if (rank == 0) NCCL_OK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NCCL_OK(ncclCommInitRank(&comm, world, id, rank));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    // The handle: made once per (problem, options, dtype), collectively.
    const collmm::Problem problem{.op = collmm::Op::ag_gemm, .m = m, .n = n, .k = k, .world = world};
    const collmm::Dtype dtype = collmm::Dtype::bf16;
    auto mm_made =
        std::make_unique<collmm::DeviceMatmul>(comm, problem, collmm::PlanOptions{.algo = collmm::Algo::ring}, dtype);
    collmm::DeviceMatmul& mm = *mm_made;

    // This rank's A_r [M_r, K] and B_r [K, N_r] (collmm's test data), C_r [M, N_r] of out_dtype().
    const uint64_t seed = 7;
    void* a = device_copy(collmm::encode(collmm::make_local_a(problem, rank, seed, dtype).v, dtype));
    void* b = device_copy(collmm::encode(collmm::make_local_b(problem, rank, seed, dtype).v, dtype));
    const collmm::BufferSpec& cs = mm.plan().buffers[collmm::kBufC];
    const size_t c_count = static_cast<size_t>(cs.rows * cs.cols);
    void* c = nullptr;
    CUDA_OK(cudaMalloc(&c, c_count * collmm::dtype_size(mm.out_dtype())));

    // One call: enqueued on the stream, no host synchronization; then checked.
    mm.run(a, b, c, stream);
    mm.synchronize();  // bounded: a peer that died ends in an exception, not a hang
    std::vector<unsigned char> got(c_count * collmm::dtype_size(mm.out_dtype()));
    CUDA_OK(cudaMemcpy(got.data(), c, got.size(), cudaMemcpyDeviceToHost));
    const collmm::Comparison cmp =
        collmm::compare(collmm::decode(got.data(), c_count, mm.out_dtype()),
                        collmm::reference_c(problem, rank, seed, dtype), dtype, mm.out_dtype(), k);

    // The call captured in a CUDA graph, its replays timed with CUDA events (median of 20).
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    mm.run(a, b, c, stream);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t t0, t1;
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    std::vector<float> ms;
    for (int i = 0; i < 25; ++i) {
      CUDA_OK(cudaEventRecord(t0, stream));
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaEventRecord(t1, stream));
      CUDA_OK(cudaEventSynchronize(t1));
      float t = 0;
      CUDA_OK(cudaEventElapsedTime(&t, t0, t1));
      if (i >= 5) ms.push_back(t);  // after 5 warm-up replays
    }
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    std::printf(
        "rank %d of %d: ag_gemm ring M=%lld N=%lld K=%lld bf16: C %s (%lld wrong, max rel err %.2e); "
        "graph replay median %.1f us\n",
        rank, world, static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
        cmp.wrong ? "WRONG" : "matches the f64 reference", static_cast<long long>(cmp.wrong), cmp.max_rel_err,
        1e3 * ms[ms.size() / 2]);
    code = cmp.wrong ? 1 : 0;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    mm_made.reset();  // the handle before the communicator it uses
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    ncclCommDestroy(comm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return code;
}
