// cpu_executor.cpp: make_cpu_executor: the host executor (host_executor.hpp) on MPI: MPI_COMM_WORLD
// as its HostComm, a duplicate of it as its transport, and OpenBLAS threads per rank.
#include <algorithm>
#include <thread>

#include "backends.hpp"
#include "blas_gemm.hpp"
#include "host_executor.hpp"
#include "mpi_host.hpp"
#include "mpi_transport.hpp"

namespace collmm {
namespace {

// BLAS threads per rank: the option, or this node's cores split over its ranks (never more than
// the cores this process may run on).
int default_blas_threads(int requested) {
  if (requested > 0) return requested;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::min(std::max(1, cores / std::max(1, mpi_node_size())), cpu::affinity_cores());
}

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const BackendOptions& options, int /*argc*/, char** /*argv*/) {
  if (options.threads < 0) throw UsageError("--threads must be >= 1 (got " + std::to_string(options.threads) + ")");
  if (options.timeout_s < 1) throw UsageError("timeout must be >= 1 s (got " + std::to_string(options.timeout_s) + ")");
  // MPI_Init before the transport dups the world; every host collective bounded by the timeout.
  auto host = make_mpi_host_comm(MPI_THREAD_SERIALIZED, options.timeout_s);
  auto transport = std::make_unique<cpu::MpiTransport>();
  const int threads = default_blas_threads(options.threads);
  cpu::set_blas_threads(threads);
  return cpu::make_host_executor(options, std::move(host), std::move(transport), threads, mpi_node_size());
}

}  // namespace collmm
