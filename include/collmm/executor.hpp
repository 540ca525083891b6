// collmm/executor.hpp: what every backend offers the front ends. An Executor drives the ranks of
// this process (one per MPI process for cpu and cuda+nccl; several for cuda -g G or --transport
// local): it holds their buffers, walks their Plans, and times every step. A HostComm joins the
// processes of one job for the front end's own bookkeeping (agreement checks, max over ranks).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collmm/data.hpp"
#include "collmm/element_types.hpp"
#include "collmm/memory.hpp"
#include "collmm/plan.hpp"
#include "collmm/step_filter.hpp"

namespace collmm {

// Process-level coordination (MPI_COMM_WORLD, or a single process). Every collective of a
// multi-process HostComm is bounded: a process that waits longer than its timeout for the others
// says so (naming its rank and the phase set last) and ends the whole job (abort).
class HostComm {
 public:
  virtual ~HostComm() = default;
  // What the job is doing, named by a timeout's message: "setup: option agreement", ...
  void set_phase(std::string phase) { phase_ = std::move(phase); }
  const std::string& phase() const { return phase_; }
  // Work process 0 does alone before the next collective (reading the tuning cache, waiting for
  // its lock): every process names it with the same bound. The next collective's wait gets
  // `bound_s` more than its own timeout and names that work if it still gets no answer; process 0
  // bounds the work itself (the front end's process0_local_work). Cleared by that collective.
  void expect_local_work(std::string what, int bound_s) {
    local_work_ = std::move(what);
    local_bound_s_ = bound_s;
  }
  const std::string& local_work() const { return local_work_; }
  int local_bound_s() const { return local_work_.empty() ? 0 : local_bound_s_; }
  void local_work_done() { local_work_.clear(); }
  virtual int proc() const = 0;  // this process, 0..procs()-1
  virtual int procs() const = 0;
  virtual void barrier() = 0;
  virtual std::vector<std::string> allgather(const std::string& mine) = 0;  // every process's string
  virtual std::vector<double> allgather(
      const std::vector<double>& mine) = 0;       // concatenated in process order; all same length
  [[noreturn]] virtual void abort(int code) = 0;  // ends every process of the job

 private:
  std::string phase_ = "setup";
  std::string local_work_;
  int local_bound_s_ = 0;
};
std::unique_ptr<HostComm> make_single_process_comm();

struct StepTime {
  double start_us = -1, end_us = -1;  // from the iteration's start on this rank; -1: not run
};

struct RankRun {
  int rank = 0;
  double total_us = 0;          // this rank's wall time for the iteration
  std::vector<StepTime> steps;  // parallel to plan.steps (empty when timestamps were not asked for)
};

// Settings the backends read; each ignores what is not its own.
struct BackendOptions {
  std::string backend = "cpu";  // cpu | cuda
  int threads = 0;              // cpu: BLAS threads per rank; 0: the node's cores split over its ranks
  std::string transport =
      "nccl";     // cuda: nccl | local (ranks emulated in one process) | host (one rank, peers in host memory)
  int world = 0;  // cuda local and host transports: how many ranks the job has
  int rank = 0;   // cuda host transport: the rank this process runs
  std::string link_copy = "engine";  // cuda host transport: engine (cudaMemcpyAsync) | sm (a copy kernel)
  bool comm_priority = false;        // cuda: the comm lane (and the host link's streams) at the highest stream priority
  int gpus = 0;                      // cuda: -g G, GPUs driven by this process, one thread each (0: one per MPI rank)
  int gemm_sms = 0;                  // cuda: SM count target for GEMMs (0: all)
  int sm_margin = 0;                 // cuda: leave this many SMs to comm kernels
  int nccl_min_ctas = 0, nccl_max_ctas = 0;  // cuda: NCCL CTA bounds (0: NCCL's default)
  bool graph = false;                        // cuda: capture one iteration in a CUDA graph and replay it
  std::string gemm_algo =
      "heuristic";  // cuda: heuristic (cuBLASLt's first answer) | timed (fastest of its top 8, timed once per shape)
  int timeout_s = 300;  // a run that takes longer aborts the job (a rank died or hangs)
  // Tests of the job's teardown: this rank fails (throws) or stops (SIGSTOP) while the backend
  // starts (cuda: right before its NCCL communicators are made). -1: none.
  int debug_fail_rank = -1, debug_hang_rank = -1;
};

// What a backend offers when it plays the peers of its ranks (cuda --transport host): it makes
// what they send from the job's inputs, and checks what its ranks send them.
class PlayedPeers {
 public:
  virtual ~PlayedPeers() = default;
  // After prepare(): the inputs are the bench's seeded ones (data.hpp); stages every receive.
  virtual void stage(uint64_t seed) = 0;
  // After a run: what this process's ranks sent, against what their receivers needed.
  virtual Comparison check_sent() = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string backend() const = 0;
  virtual int world_size() const = 0;
  virtual std::vector<int> local_ranks() const = 0;  // ranks this process drives, ascending
  virtual HostComm& host() = 0;
  virtual bool supports(Dtype) const = 0;
  // The GEMM library that computes C: it sets the element type of C and the work buffers
  // (output_dtype), for the executor and for the cost model's predictions of its runs alike.
  virtual GemmLibrary gemm_library() const = 0;
  Dtype out_dtype(Dtype in) const { return output_dtype(gemm_library(), in); }
  virtual std::string timing_note() const { return {}; }  // e.g. why timings are not overlap figures
  // The peers this backend plays (null where the peers are real processes or emulated ranks).
  virtual PlayedPeers* played_peers() { return nullptr; }

  // Throws UsageError when this process's need (host memory, and device memory per local rank)
  // does not fit what this node (and its devices) have free now, counting the other processes
  // on the node that need as much. Called before anything is allocated.
  virtual void check_memory(const MemoryNeed& need) const = 0;

  // Allocates the buffers of these plans (plans[i] belongs to local_ranks()[i]); replaces earlier ones.
  virtual void prepare(const std::vector<Plan>& plans, Dtype dtype) = 0;
  // Copies raw elements (of the buffer's dtype) in or out of buffer `buffer` of local rank i.
  virtual void write(int i, int buffer, const void* bytes, size_t nbytes) = 0;
  // Whether bind() works on this backend (cpu: host memory; cuda: not yet).
  virtual bool can_bind() const { return false; }
  // Runs on the caller's memory: from now on buffer `buffer` of local rank i is the `nbytes` bytes
  // at `data` (row-major, the buffer's shape and dtype), read and written in place by every later
  // run(), write(), read() and poison(), until prepare() or bind() again (data = nullptr: the
  // executor's own memory again). Inputs (A, B) are only read. Throws UsageError when the size is
  // not the buffer's or the backend cannot bind.
  virtual void bind(int i, int buffer, void* data, size_t nbytes) {
    (void)i, (void)buffer, (void)data, (void)nbytes;
    throw UsageError("the " + backend() + " backend cannot run on the caller's memory (bind)");
  }
  virtual void read(int i, int buffer, void* bytes, size_t nbytes) = 0;
  // Fills C, gathered and work buffers of every local rank with NaN.
  virtual void poison() = 0;
  // One iteration of every local rank's plan, started together (barrier); returns one RankRun per
  // local rank. Throws std::runtime_error on a backend failure.
  virtual std::vector<RankRun> run(StepFilter filter, bool timestamps) = 0;
};

// Backend factories (each defined in its backend's library). make_executor picks by name and
// throws UsageError for a backend this build lacks.
std::unique_ptr<Executor> make_cpu_executor(const BackendOptions&, int argc, char** argv);
std::unique_ptr<Executor> make_cuda_executor(const BackendOptions&, int argc, char** argv);
std::unique_ptr<Executor> make_executor(const BackendOptions&, int argc, char** argv);
bool have_cuda_backend();

}  // namespace collmm
