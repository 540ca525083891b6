// bootstrap.cpp: make_cuda_executor: who this process is and which GPUs it drives.
//  --transport local        P = options.world ranks in this process, rank r on GPU r % GPUs.
//  --transport host         rank options.rank of P = options.world on GPU 0; its peers are
//                           played by pinned host memory (host_link.hpp).
//  --transport nccl, -g G   this process drives G GPUs, one host thread each (as nccl-tests);
//                           under mpirun the job has procs x G ranks.
//  --transport nccl, mpirun one rank per process on GPU (node-local rank % GPUs); rank 0's
//                           ncclUniqueId travels over MPI (the HostComm).
//  --transport nccl, torchrun  RANK, WORLD_SIZE, LOCAL_RANK and NCCL_COMM_ID from the environment
//                           (every rank derives the same id from NCCL_COMM_ID); the HostComm is NCCL.
//  otherwise                one process, one rank, GPU 0.
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "backends.hpp"
#include "cuda_check.hpp"
#include "cuda_executor.hpp"
#include "deadline.hpp"
#include "mpi_host.hpp"
#include "nccl_host_comm.hpp"
#include "nccl_transport.hpp"

namespace collmm {
namespace {

using cuda::CudaSetup;

int visible_gpus() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw UsageError(std::string("--backend cuda: no usable CUDA GPU (cudaGetDeviceCount: ") + cudaGetErrorString(e) +
                     ")");
  }
  if (n == 0) throw UsageError("--backend cuda: no CUDA GPU is visible");
  return n;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name) {
  const char* v = env(name);
  char* end = nullptr;
  const long x = v ? std::strtol(v, &end, 10) : 0;
  if (!v || *end)
    throw UsageError(std::string("environment variable ") + name + "='" + (v ? v : "") + "' is not an integer");
  return static_cast<int>(x);
}

ncclUniqueId id_from(const std::string& bytes) {
  ncclUniqueId id;
  if (bytes.size() != sizeof id.internal) throw std::runtime_error("bootstrap: ncclUniqueId of the wrong size");
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  return id;
}

std::string id_bytes(const ncclUniqueId& id) { return std::string(id.internal, sizeof id.internal); }

cuda::NcclSettings nccl_settings(const BackendOptions& o) { return {o.nccl_min_ctas, o.nccl_max_ctas}; }

// NCCL's communicator setup waits for every rank with no timeout, and a rank that fails in it
// must not unwind into MPI_Finalize (which waits for every rank too). So: bounded by a
// DeadlineGuard, and any failure ends the job at once, after a message naming the rank: MPI_Abort
// under mpirun (`host`), exit under torchrun (which then ends the other ranks).
template <class Setup>
void nccl_setup(const BackendOptions& o, HostComm* host, int rank, Setup setup) {
  auto end_job = [host](int code) {
    if (host) host->abort(code);
    std::_Exit(code);
  };
  const std::string who = "collmm cuda: rank " + std::to_string(rank) + ": ";
  try {
    DeadlineGuard guard(o.timeout_s,
                        who + "NCCL setup (ncclCommInitRankConfig) did not finish within " +
                            std::to_string(o.timeout_s) + " s (--timeout): a rank died or hangs; aborting the job",
                        [&] { end_job(3); });
    if (rank == o.debug_hang_rank) std::raise(SIGSTOP);
    if (rank == o.debug_fail_rank)
      throw std::runtime_error("failing on purpose (--debug-die-rank, --debug-phase init)");
    setup();
  } catch (const std::exception& e) {
    std::cerr << (who + "NCCL setup failed: " + e.what() + "; aborting the job\n") << std::flush;
    end_job(1);
  }
}

}  // namespace

bool have_cuda_backend() { return true; }

std::unique_ptr<Executor> make_cuda_executor(const BackendOptions& o, int, char**) {
  const int gpus = visible_gpus();
  CudaSetup s;
  s.engine.gemm_sms = o.gemm_sms;
  s.engine.sm_margin = o.sm_margin;
  s.graph = o.graph;
  s.engine.algo_choice = o.gemm_algo;
  s.timeout_s = o.timeout_s;
  s.engine.comm_high_priority = o.comm_priority;
  if (o.gemm_sms < 0 || o.sm_margin < 0) throw UsageError("--gemm-sms and --sm-margin must be >= 0");
  if (o.nccl_min_ctas < 0 || o.nccl_max_ctas < 0 || (o.nccl_max_ctas > 0 && o.nccl_min_ctas > o.nccl_max_ctas))
    throw UsageError("NCCL CTA bounds: need 0 <= min <= max");

  if (o.transport == CudaTransport::local) {
    if (o.world < 1) throw UsageError("--transport local needs the number of ranks to emulate (world >= 1)");
    s.transport = CudaTransport::local;
    s.world = o.world;
    for (int r = 0; r < o.world; ++r) s.ranks.push_back(r), s.devices.push_back(r % gpus);
    s.host = make_single_process_comm();
    return std::make_unique<cuda::CudaExecutor>(std::move(s));
  }
  if (o.transport == CudaTransport::host) {
    if (o.world < 1) throw UsageError("--transport host needs the job's size: --world P (P >= 1)");
    if (o.rank < 0 || o.rank >= o.world)
      throw UsageError("--transport host: --rank " + std::to_string(o.rank) + " is not a rank of --world " +
                       std::to_string(o.world));
    s.transport = CudaTransport::host;
    s.link_copy = o.link_copy;
    s.world = o.world;
    s.ranks = {o.rank};
    s.devices = {0};
    s.host = make_single_process_comm();
    return std::make_unique<cuda::CudaExecutor>(std::move(s));
  }
  if (o.link_copy != LinkCopy::engine) throw UsageError("--link-copy applies to --transport host only");
  if (o.rank != 0)
    throw UsageError("--rank applies to --transport host only (other transports take the rank from the launcher)");
  s.transport = CudaTransport::nccl;

  if (o.gpus > 0 || (!launched_by_mpi() && !env("RANK"))) {  // -g G (or one GPU), maybe under mpirun
    const int G = o.gpus > 0 ? o.gpus : 1;
    s.host = launched_by_mpi() ? make_mpi_host_comm(MPI_THREAD_FUNNELED, o.timeout_s) : make_single_process_comm();
    s.processes_per_node = launched_by_mpi() ? mpi_node_size() : 1;
    const int per_node = launched_by_mpi() ? mpi_node_size() : 1;
    const int node_rank = launched_by_mpi() ? mpi_node_rank() : 0;
    if (G * per_node > gpus)
      throw UsageError("-g " + std::to_string(G) + " with " + std::to_string(per_node) +
                       " process(es) per node needs " + std::to_string(G * per_node) + " GPUs; " +
                       std::to_string(gpus) + " visible");
    s.world = G * s.host->procs();
    for (int i = 0; i < G; ++i) s.ranks.push_back(s.host->proc() * G + i), s.devices.push_back(node_rank * G + i);
    ncclUniqueId id;
    if (s.host->proc() == 0) COLLMM_NCCL(ncclGetUniqueId(&id));
    s.host->set_phase("setup: sharing NCCL's unique id");
    id = id_from(s.host->allgather(s.host->proc() == 0 ? id_bytes(id) : std::string(sizeof id.internal, '\0'))[0]);
    nccl_setup(o, launched_by_mpi() ? s.host.get() : nullptr, s.ranks[0],
               [&] { s.comms = cuda::make_nccl_comms(id, s.world, s.ranks[0], s.devices, nccl_settings(o)); });
  } else if (launched_by_mpi()) {  // mpirun: one rank per process
    s.host = make_mpi_host_comm(MPI_THREAD_FUNNELED, o.timeout_s);
    s.processes_per_node = mpi_node_size();
    s.processes_per_device = (mpi_node_size() + gpus - 1) / gpus;
    s.world = s.host->procs();
    s.ranks = {s.host->proc()};
    s.devices = {mpi_node_rank() % gpus};
    ncclUniqueId id;
    if (s.host->proc() == 0) COLLMM_NCCL(ncclGetUniqueId(&id));
    s.host->set_phase("setup: sharing NCCL's unique id");
    id = id_from(s.host->allgather(s.host->proc() == 0 ? id_bytes(id) : std::string(sizeof id.internal, '\0'))[0]);
    nccl_setup(o, s.host.get(), s.ranks[0],
               [&] { s.comms = cuda::make_nccl_comms(id, s.world, s.ranks[0], s.devices, nccl_settings(o)); });
  } else {  // torchrun
    if (!env("WORLD_SIZE") || !env("NCCL_COMM_ID"))
      throw UsageError("RANK is set but WORLD_SIZE or NCCL_COMM_ID is not: under torchrun set NCCL_COMM_ID=host:port");
    s.world = env_int("WORLD_SIZE");
    s.ranks = {env_int("RANK")};
    s.devices = {(env("LOCAL_RANK") ? env_int("LOCAL_RANK") : s.ranks[0]) % gpus};
    ncclComm_t host_comm = nullptr;
    nccl_setup(o, nullptr, s.ranks[0], [&] {
      ncclUniqueId id;
      COLLMM_NCCL(ncclGetUniqueId(&id));  // derived from NCCL_COMM_ID, the same on every rank
      s.comms = cuda::make_nccl_comms(id, s.world, s.ranks[0], s.devices, nccl_settings(o));
      COLLMM_CUDA(cudaSetDevice(s.devices[0]));
      COLLMM_NCCL(ncclCommSplit(s.comms[0], 0, s.ranks[0], &host_comm, nullptr));  // inherits blocking
    });
    s.host = cuda::make_nccl_host_comm(host_comm, s.devices[0], o.timeout_s);
  }
  if (o.world > 0 && o.world != s.world)
    throw UsageError("world " + std::to_string(o.world) + " asked for, but the job has " + std::to_string(s.world) +
                     " ranks");
  return std::make_unique<cuda::CudaExecutor>(std::move(s));
}

}  // namespace collmm
