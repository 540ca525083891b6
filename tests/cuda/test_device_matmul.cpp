// test_device_matmul.cpp: collmm::DeviceMatmul (the C++ API on device memory) on the caller's NCCL
// communicator, device buffers and stream, checked against the f64 reference:
//  DeviceMatmulSolo: one process, one rank (ncclCommInitAll on GPU 0);
//  DeviceMatmulMpi:  under `mpirun -np P`, one rank per process; where the ranks outnumber the GPUs,
//                    several ranks share one (NCCL told they are separate hosts: NCCL_HOSTID per
//                    rank, its socket transport over loopback; results are real, timings are not);
//  DeviceMatmulHostBed: collmm's own bootstrap on the host bed (rank r of P on GPU 0, its peers in
//                    pinned host memory), what the rank sent its peers checked too.
// Every op x algo in bf16 and f32; the caller's stream ordering; a call captured in a CUDA graph and
// replayed on new inputs; the gathered A's own-chunk copy left out where the caller does not take
// it; no host synchronization in run(); the caller's mistakes refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "backends.hpp"
#include "collmm/device_matmul.hpp"
#include "data.hpp"
#include "gpu_case.hpp"
#include "mpi_host.hpp"
#include "played_peers.hpp"

namespace collmm {
namespace {

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call
#define CHECK_NCCL(call) ASSERT_EQ((call), ncclSuccess) << #call

// The job's communicator: one rank per process. Made once per process (MPI is initialized once).
struct Job {
  std::unique_ptr<HostComm> host;  // MPI, or null for one process
  ncclComm_t comm = nullptr;
  int rank = 0, world = 1, device = 0;
};

Job& job() {
  static Job j = [] {
    Job out;
    std::string why;
    const int gpus = test::usable_gpus(&why);
    if (launched_by_mpi()) {
      out.host = make_mpi_host_comm(MPI_THREAD_MULTIPLE, 120);
      out.rank = out.host->proc();
      out.world = out.host->procs();
      if (out.world > gpus) {  // several ranks on one GPU: NCCL must take them for separate hosts
        setenv("NCCL_HOSTID", ("h" + std::to_string(out.rank)).c_str(), 1);
        setenv("NCCL_SOCKET_IFNAME", "lo", 1);
        setenv("NCCL_IB_DISABLE", "1", 1);
      }
    }
    out.device = gpus > 0 ? out.rank % gpus : 0;
    if (gpus == 0) return out;
    cudaSetDevice(out.device);
    ncclUniqueId id;
    if (out.rank == 0) ncclGetUniqueId(&id);
    if (out.host) {
      const auto all = out.host->allgather(std::string(id.internal, sizeof id.internal));
      std::memcpy(id.internal, all[0].data(), sizeof id.internal);
    }
    ncclCommInitRank(&out.comm, out.world, id, out.rank);
    return out;
  }();
  return j;
}

// Device memory holding `bytes`, freed at scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t bytes) : n(bytes) { cudaMalloc(&p, bytes ? bytes : 1); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // Pageable memory: cudaMemcpy may return before the copy lands; the calls run on non-blocking streams.
  void upload(const std::vector<unsigned char>& h) const {
    cudaMemcpy(p, h.data(), h.size(), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> h(n);
    cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost);
    return h;
  }
};

size_t bytes_of(const BufferSpec& b, Dtype d) { return static_cast<size_t>(b.rows * b.cols) * dtype_size(d); }

// One call's device buffers, sized from the handle's plan: A, B, C and (`gathered`, ag_gemm only)
// the gathered A.
struct Operands {
  Dtype d;
  DeviceBuffer a, b, c;
  std::unique_ptr<DeviceBuffer> gathered;
  Operands(const DeviceMatmul& mm, Dtype dtype, bool with_gathered = false)
      : d(dtype),
        a(bytes_of(mm.plan().buffers[kBufA], dtype)),
        b(bytes_of(mm.plan().buffers[kBufB], dtype)),
        c(bytes_of(mm.plan().buffers[kBufC], mm.out_dtype())) {
    const Problem& p = mm.plan().problem;
    if (with_gathered && p.op == Op::ag_gemm)
      gathered = std::make_unique<DeviceBuffer>(static_cast<size_t>(p.m * p.k) * dtype_size(dtype));
  }
  void* gathered_ptr() const { return gathered ? gathered->p : nullptr; }
};

// This rank's inputs for `seed`, uploaded into A and B.
void upload_inputs(const DeviceMatmul& mm, uint64_t seed, const Operands& x) {
  x.a.upload(encode(make_local_a(mm.plan().problem, mm.rank(), seed, x.d).v, x.d));
  x.b.upload(encode(make_local_b(mm.plan().problem, mm.rank(), seed, x.d).v, x.d));
}

// C (and the gathered A) against the reference of `seed`: the count of wrong elements.
int64_t wrong_outputs(const DeviceMatmul& mm, uint64_t seed, const Operands& x, std::string* detail) {
  const Dtype d = x.d;
  const Problem& p = mm.plan().problem;
  const BufferSpec& cs = mm.plan().buffers[kBufC];
  const auto cb = x.c.download();
  const Comparison cmp = compare(decode(cb.data(), static_cast<size_t>(cs.rows * cs.cols), mm.out_dtype()),
                                 reference_c(p, mm.rank(), seed, d), d, mm.out_dtype(), p.k);
  int64_t wrong = cmp.wrong;
  if (cmp.wrong)
    *detail += std::to_string(cmp.wrong) + " wrong in C (max rel err " + std::to_string(cmp.max_rel_err) + "); ";
  if (x.gathered) {
    const auto gb = x.gathered->download();
    const std::vector<double> got = decode(gb.data(), static_cast<size_t>(p.m * p.k), d);
    const HostMatrix want = make_global_a(p, seed, d);
    int64_t g = 0;
    for (size_t e = 0; e < got.size(); ++e) g += !(got[e] == want.v[e]);
    if (g) *detail += std::to_string(g) + " wrong in the gathered A; ";
    wrong += g;
  }
  return wrong;
}

Problem uneven(Op op, int P) {
  Problem p;
  p.op = op, p.world = P;
  p.m = 37 * P + 5, p.n = 24 * P + 3, p.k = 40 * P + 7;
  return p;
}

// Every op x algo x {bf16, f32}: inputs uploaded, C poisoned, one call on a stream of the caller's
// that holds other work before it (a memset of C that the call must come after), checked.
void every_op_and_algo() {
  Job& j = job();
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (Op op : all_ops())
    for (Algo algo : all_algos())
      for (Dtype d : {Dtype::bf16, Dtype::f32}) {
        const Problem p = uneven(op, j.world);
        PlanOptions o;
        o.algo = algo;
        o.gemm_lanes = 2;
        DeviceMatmul mm(j.comm, p, o, d);
        const Operands x(mm, d, true);
        upload_inputs(mm, 11, x);
        CHECK_CUDA(cudaMemsetAsync(x.c.p, 0xff, x.c.n, stream));  // NaN: C is the call's to write
        mm.run(x.a.p, x.b.p, x.c.p, stream, x.gathered_ptr());
        mm.synchronize();
        CHECK_CUDA(cudaStreamSynchronize(stream));
        std::string detail;
        EXPECT_EQ(wrong_outputs(mm, 11, x, &detail), 0)
            << to_string(op) << " " << to_string(algo) << " " << to_string(d) << " P=" << j.world << ": " << detail;
      }
  cudaStreamDestroy(stream);
}

// A call captured in a CUDA graph on the caller's stream, replayed twice on new inputs written into
// the same buffers (the graph holds the pointers).
void captured_in_a_graph() {
  Job& j = job();
  for (Op op : all_ops()) {
    const Problem p = uneven(op, j.world);
    const Dtype d = Dtype::bf16;
    DeviceMatmul mm(j.comm, p, PlanOptions{}, d);
    const Operands x(mm, d);
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    upload_inputs(mm, 21, x);
    mm.run(x.a.p, x.b.p, x.c.p, stream);  // outside the capture first
    CHECK_CUDA(cudaStreamSynchronize(stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    mm.run(x.a.p, x.b.p, x.c.p, stream);
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (uint64_t seed : {22u, 23u}) {
      upload_inputs(mm, seed, x);
      CHECK_CUDA(cudaMemsetAsync(x.c.p, 0xff, x.c.n, stream));
      CHECK_CUDA(cudaGraphLaunch(exec, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      std::string detail;
      EXPECT_EQ(wrong_outputs(mm, seed, x, &detail), 0)
          << to_string(op) << " graph replay, seed " << seed << ", P=" << j.world << ": " << detail;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// The memcpy nodes of one call captured on `stream` (after one call outside the capture).
int copies_in_a_call(DeviceMatmul& mm, const Operands& x, cudaStream_t stream, bool with_gathered) {
  void* g = with_gathered ? x.gathered_ptr() : nullptr;
  mm.run(x.a.p, x.b.p, x.c.p, stream, g);
  if (cudaStreamSynchronize(stream) != cudaSuccess) return -1;
  cudaGraph_t graph;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return -1;
  mm.run(x.a.p, x.b.p, x.c.p, stream, g);
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess) return -1;
  size_t n = 0;
  cudaGraphGetNodes(graph, nullptr, &n);
  std::vector<cudaGraphNode_t> nodes(n);
  cudaGraphGetNodes(graph, nodes.data(), &n);
  int copies = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    cudaGraphNodeGetType(node, &type);
    copies += type == cudaGraphNodeTypeMemcpy;
  }
  cudaGraphDestroy(graph);
  return copies;
}

// The ag_gemm rings copy this rank's own chunk into the gathered A only when the caller takes the
// gathered A: without it, one copy fewer, and at one rank none (there it would copy all of A
// beside the one GEMM, which made a world-1 call slower than torch.matmul).
void copies_only_what_the_caller_takes() {
  Job& j = job();
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (Algo algo : {Algo::ring, Algo::bidir}) {
    const Problem p = uneven(Op::ag_gemm, j.world);
    PlanOptions o;
    o.algo = algo;
    DeviceMatmul mm(j.comm, p, o, Dtype::bf16);
    const Operands x(mm, Dtype::bf16, true);
    upload_inputs(mm, 61, x);
    const int without = copies_in_a_call(mm, x, stream, false), with = copies_in_a_call(mm, x, stream, true);
    EXPECT_GE(without, 0) << to_string(algo);
    EXPECT_EQ(without + 1, with) << to_string(algo) << " P=" << j.world << ": memcpy nodes without / with gathered";
    if (j.world == 1) {
      EXPECT_EQ(without, 0) << to_string(algo) << " at one rank";
    }
    for (uint64_t seed : {62u, 63u}) {  // and the results are right both ways, in either order
      upload_inputs(mm, seed, x);
      CHECK_CUDA(cudaMemsetAsync(x.c.p, 0xff, x.c.n, stream));
      CHECK_CUDA(cudaMemsetAsync(x.gathered->p, 0xff, x.gathered->n, stream));
      mm.run(x.a.p, x.b.p, x.c.p, stream, seed == 62 ? nullptr : x.gathered_ptr());
      if (seed == 62) {  // the gathered A was not asked for: only C is checked
        mm.synchronize();
        CHECK_CUDA(cudaStreamSynchronize(stream));
        const BufferSpec& cs = mm.plan().buffers[kBufC];
        const auto cb = x.c.download();
        const Comparison cmp = compare(decode(cb.data(), static_cast<size_t>(cs.rows * cs.cols), mm.out_dtype()),
                                       reference_c(p, mm.rank(), seed, Dtype::bf16), Dtype::bf16, mm.out_dtype(), p.k);
        EXPECT_EQ(cmp.wrong, 0) << to_string(algo) << " without the gathered A";
        continue;
      }
      mm.synchronize();
      CHECK_CUDA(cudaStreamSynchronize(stream));
      std::string detail;
      EXPECT_EQ(wrong_outputs(mm, seed, x, &detail), 0) << to_string(algo) << " with the gathered A: " << detail;
    }
  }
  cudaStreamDestroy(stream);
}

// run() enqueues and returns: with the caller's stream held by a host function that waits for the
// caller, run() must return while that stream has not moved (a run() that waited for the device
// would wait out the host function's 10 s).
void returns_without_waiting() {
  Job& j = job();
  const Problem p = uneven(Op::ag_gemm, j.world);
  DeviceMatmul mm(j.comm, p, PlanOptions{}, Dtype::f32);
  const Operands x(mm, Dtype::f32);
  upload_inputs(mm, 31, x);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  static std::atomic<bool> release{false};
  release = false;
  CHECK_CUDA(cudaLaunchHostFunc(
      stream,
      [](void*) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!release && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      nullptr));
  const auto t0 = std::chrono::steady_clock::now();
  mm.run(x.a.p, x.b.p, x.c.p, stream);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady) << "the stream should still be held";
  release = true;
  EXPECT_LT(s, 5.0) << "run() waited for the device";
  mm.synchronize();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::string detail;
  EXPECT_EQ(wrong_outputs(mm, 31, x, &detail), 0) << detail;
  cudaStreamDestroy(stream);
}

// The caller's mistakes: UsageError before anything is enqueued (null, host memory, another
// problem than the other ranks', a world that is not the communicator's).
void refuses_mistakes() {
  Job& j = job();
  const Problem p = uneven(Op::gemm_rs, j.world);
  DeviceMatmul mm(j.comm, p, PlanOptions{}, Dtype::f32);
  const Operands x(mm, Dtype::f32);
  std::vector<float> host(x.c.n / sizeof(float));
  EXPECT_THROW(mm.run(nullptr, x.b.p, x.c.p, nullptr), UsageError);
  EXPECT_THROW(mm.run(x.a.p, x.b.p, host.data(), nullptr), UsageError);
  EXPECT_THROW(mm.run(x.a.p, x.b.p, x.c.p, nullptr, x.c.p), UsageError);  // gathered: ag_gemm's only
  Problem other = p;
  other.world = j.world + 1;
  EXPECT_THROW(DeviceMatmul(j.comm, other, PlanOptions{}, Dtype::f32), UsageError);
  if (j.world > 1) {  // rank 1 asks for another M: every rank hears of it
    Problem mine = p;
    if (j.rank == 1) mine.m += 1;
    try {
      DeviceMatmul bad(j.comm, mine, PlanOptions{}, Dtype::f32);
      ADD_FAILURE() << "ranks with different M made a DeviceMatmul";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("disagree on M"), std::string::npos) << e.what();
    }
  }
  // And the handle still works after the refusals.
  upload_inputs(mm, 41, x);
  mm.run(x.a.p, x.b.p, x.c.p, nullptr);
  mm.synchronize();
  std::string detail;
  EXPECT_EQ(wrong_outputs(mm, 41, x, &detail), 0) << detail;
}

// The host bed: every op x algo at P = 4 for rank 1 and P = 3 for rank 2, bf16, the gathered A too;
// the peers' data staged from the same seed as this rank's inputs.
TEST(DeviceMatmulHostBed, EveryOpAndAlgo) {
  if (launched_by_mpi()) GTEST_SKIP() << "started by mpirun: DeviceMatmulMpi";
  COLLMM_NEED_GPUS(1);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (auto [P, r] : {std::pair{4, 1}, std::pair{3, 2}})
    for (Op op : all_ops())
      for (Algo algo : all_algos()) {
        BackendOptions bed;
        bed.backend = Backend::cuda;
        bed.transport = CudaTransport::host;
        bed.world = P;
        bed.rank = r;
        const Dtype d = Dtype::bf16;
        const Problem p = uneven(op, P);
        PlanOptions o;
        o.algo = algo;
        DeviceMatmul mm(bed, p, o, d);
        ASSERT_NE(mm.played_peers(), nullptr);
        const Operands x(mm, d, true);
        upload_inputs(mm, 51, x);
        mm.played_peers()->stage(51);
        CHECK_CUDA(cudaMemsetAsync(x.c.p, 0xff, x.c.n, stream));
        mm.run(x.a.p, x.b.p, x.c.p, stream, x.gathered_ptr());
        mm.synchronize();
        CHECK_CUDA(cudaStreamSynchronize(stream));
        std::string detail;
        EXPECT_EQ(wrong_outputs(mm, 51, x, &detail), 0)
            << to_string(op) << " " << to_string(algo) << " P=" << P << " rank " << r << ": " << detail;
        const Comparison sent = mm.played_peers()->check_sent();
        EXPECT_EQ(sent.wrong, 0) << to_string(op) << " " << to_string(algo) << ": what the rank sent its peers";
      }
  cudaStreamDestroy(stream);
}

TEST(DeviceMatmulSolo, OneRank) {
  if (launched_by_mpi()) GTEST_SKIP() << "started by mpirun: DeviceMatmulMpi";
  COLLMM_NEED_GPUS(1);
  ASSERT_NO_FATAL_FAILURE(every_op_and_algo());
  ASSERT_NO_FATAL_FAILURE(captured_in_a_graph());
  ASSERT_NO_FATAL_FAILURE(copies_only_what_the_caller_takes());
  ASSERT_NO_FATAL_FAILURE(returns_without_waiting());
  ASSERT_NO_FATAL_FAILURE(refuses_mistakes());
}

TEST(DeviceMatmulMpi, OneRankPerProcess) {
  if (!launched_by_mpi()) GTEST_SKIP() << "not started by mpirun";
  COLLMM_NEED_GPUS(1);
  ASSERT_NE(job().comm, nullptr);
  ASSERT_NO_FATAL_FAILURE(every_op_and_algo());
  ASSERT_NO_FATAL_FAILURE(captured_in_a_graph());
  ASSERT_NO_FATAL_FAILURE(copies_only_what_the_caller_takes());
  ASSERT_NO_FATAL_FAILURE(returns_without_waiting());
  ASSERT_NO_FATAL_FAILURE(refuses_mistakes());
}

}  // namespace
}  // namespace collmm
