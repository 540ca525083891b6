// host_executor.cpp: the cpu backend's Executor over any Transport. One rank per process, its
// plan's buffers in host memory (its own, or the caller's: bind), lanes as threads (lane 0 makes
// every transport call of a run; GEMM lanes call OpenBLAS). The agreement check of every rank's
// problem before any data moves, and the watchdog that aborts the job when a run outlives
// BackendOptions::timeout_s. cpu_executor.cpp gives it MPI; the PyTorch extension a ProcessGroup.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include <sched.h>

#include "agreement.hpp"
#include "blas_gemm.hpp"
#include "buffers.hpp"
#include "collmm/element_types.hpp"
#include "deadline.hpp"
#include "executor.hpp"
#include "host_executor.hpp"
#include "lane_pool.hpp"
#include "memory.hpp"

namespace collmm {
namespace cpu {

int affinity_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, CPU_COUNT(&set));
}

namespace {

using Clock = std::chrono::steady_clock;

class HostExecutor : public Executor {
 public:
  HostExecutor(const BackendOptions& options, std::unique_ptr<HostComm> host, std::unique_ptr<Transport> transport,
               int blas_threads, int ranks_on_node)
      : options_(options),
        host_(std::move(host)),
        transport_(std::move(transport)),
        blas_threads_(blas_threads),
        ranks_on_node_(ranks_on_node) {
    if (options.timeout_s < 1)
      throw UsageError("timeout must be >= 1 s (got " + std::to_string(options.timeout_s) + ")");
    if (transport_->rank() == options.debug_hang_rank) std::raise(SIGSTOP);
    if (transport_->rank() == options.debug_fail_rank)
      throw std::runtime_error("rank " + std::to_string(transport_->rank()) +
                               " failing on purpose (--debug-die-rank, --debug-phase init)");
  }
  ~HostExecutor() override { pool_.reset(); }  // lane threads go before the transport and the host comm

  std::string backend() const override { return "cpu"; }
  int world_size() const override { return transport_->size(); }
  std::vector<int> local_ranks() const override { return {transport_->rank()}; }
  HostComm& host() override { return *host_; }
  bool supports(Dtype d) const override { return gemm_supports(d); }
  GemmLibrary gemm_library() const override { return GemmLibrary::openblas; }
  // Empty unless the timings cannot show overlap: this rank confined to one core (its comm thread
  // and its GEMMs take turns), or more ranks x BLAS threads on this node than it has cores.
  std::string timing_note() const override {
    if (affinity_cores() < 2)
      return "each rank may use only 1 core (mpirun binds ranks to cores when -np <= 2; try --bind-to none "
             "or --map-by slot:PE=N): its comm thread and its GEMMs share that core, so little overlap is possible";
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (ranks_on_node_ * blas_threads_ <= cores) return {};
    return std::to_string(ranks_on_node_) + " ranks x " + std::to_string(blas_threads_) + " BLAS thread(s) on the " +
           std::to_string(cores) +
           " cores of this node: ranks take turns on the cores, so these times (and E) "
           "are not overlap figures";
  }

  // The plan's buffers are host memory here: one sum, against MemAvailable shared by the node's processes.
  void check_memory(const MemoryNeed& need) const override {
    int64_t bytes = need.host_bytes;
    for (int64_t b : need.device_bytes) bytes += b;
    check_host_memory(bytes, ranks_on_node_);
  }

  void prepare(const std::vector<Plan>& plans, Dtype dtype) override {
    if (plans.size() != 1)
      throw UsageError("cpu backend: one plan per process (got " + std::to_string(plans.size()) + ")");
    const Plan& plan = plans[0];
    std::string misfit;  // told to every rank by the agreement check, so none is left waiting
    if (plan.rank != transport_->rank() || plan.problem.world != transport_->size())
      misfit = "a plan for rank " + std::to_string(plan.rank) + " of " + std::to_string(plan.problem.world) +
               " given to rank " + std::to_string(transport_->rank()) + " of " + std::to_string(transport_->size());
    check_ranks_agree(plan, dtype, misfit);  // collective: every rank throws the same message
    if (!supports(dtype)) throw UsageError("cpu backend: no " + to_string(dtype) + " GEMM (it has f32, f64, bf16)");
    pool_.reset();
    plan_ = plan;
    dtype_ = dtype;
    buffers_ = PlanBuffers(plan_, dtype, out_dtype(dtype));
    pool_ = std::make_unique<LanePool>(plan_, [this](const Step& s) { run_step(s); });
  }

  void write(int i, int buffer, const void* bytes, size_t nbytes) override {
    std::memcpy(checked_buffer(i, buffer, nbytes).base(), bytes, nbytes);
  }
  void read(int i, int buffer, void* bytes, size_t nbytes) override {
    std::memcpy(bytes, checked_buffer(i, buffer, nbytes).base(), nbytes);
  }
  bool can_bind() const override { return true; }
  void bind(int i, int buffer, void* data, size_t nbytes) override {
    if (i != 0)
      throw UsageError("cpu backend: local rank index " + std::to_string(i) + " (this process drives one rank)");
    if (!pool_) throw std::runtime_error("cpu backend: bind() before prepare()");
    buffers_.bind(buffer, data, nbytes);
  }
  void poison() override { buffers_.poison(); }

  std::vector<RankRun> run(StepFilter filter, bool timestamps) override {
    if (!pool_) throw std::runtime_error("cpu backend: run() before prepare()");
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(options_.timeout_s);
    buffers_.back_all();
    const double cpu0 = thread_cpu_seconds();
    if (!transport_->barrier_until(deadline)) {
      char cpu[96];
      std::snprintf(cpu, sizeof cpu, "in the barrier that starts the run (this wait took %.2f CPU s)",
                    thread_cpu_seconds() - cpu0);
      watchdog(cpu, true);
    }
    std::vector<bool> skip(plan_.steps.size(), false);
    for (size_t i = 0; i < skip.size(); ++i) skip[i] = skips(filter, plan_.steps[i].kind);
    const Clock::time_point t0 = Clock::now();
    const double process_cpu0 = process_cpu_seconds();
    pool_->start(t0, std::move(skip));
    if (!pool_->wait_until(deadline)) {
      // The CPU the whole process used in the run (its lanes' waits included): napping vs spinning.
      char cpu[64];
      std::snprintf(cpu, sizeof cpu, " (this run took %.2f CPU s)", process_cpu_seconds() - process_cpu0);
      watchdog("in these steps:" + pool_->where() + cpu, !pool_->inside_own_work());
    }
    RankRun r;
    r.rank = transport_->rank();
    r.total_us = pool_->total_us();
    if (timestamps) r.steps = pool_->times();
    return {r};
  }

 private:
  HostBuffer& checked_buffer(int i, int buffer, size_t nbytes) {
    if (i != 0)
      throw UsageError("cpu backend: local rank index " + std::to_string(i) + " (this process drives one rank)");
    HostBuffer& b = buffers_.backed(buffer);
    if (nbytes != b.bytes())
      throw UsageError("cpu backend: buffer " + std::to_string(buffer) + " (" + to_string(b.role) + ") holds " +
                       std::to_string(b.bytes()) + " bytes, not " + std::to_string(nbytes));
    return b;
  }

  // Every rank's problem, options and dtype must be the same; any difference (or a local misfit)
  // is reported on every rank, naming the field and each rank's value, before any data moves.
  void check_ranks_agree(const Plan& plan, Dtype dtype, const std::string& misfit) {
    raise_if_any_process_failed(*host_, misfit.empty() ? misfit : "cpu backend: " + misfit);
    check_processes_agree(*host_, agreement_keys(plan.problem, plan.options, dtype));
  }

  void run_step(const Step& s) {
    switch (s.kind) {
      case StepKind::gemm: return run_gemm_step(s);
      case StepKind::copy: return run_copy_or_add(s, false);
      case StepKind::add: return run_copy_or_add(s, true);
      case StepKind::sendrecv: return run_sendrecv(s);
      case StepKind::allgather: return run_allgather(s);
      case StepKind::reduce_scatter: return run_reduce_scatter(s);
    }
  }

  void run_gemm_step(const Step& s) {
    const HostBuffer& a = buffers_.at(s.a.buf);
    const HostBuffer& b = buffers_.at(kBufB);
    const HostBuffer& c = buffers_.at(s.out.buf);
    if (s.a.rows != s.out.rows) throw std::runtime_error("cpu backend: gemm of unequal rows: " + describe(s));
    GemmCall g;
    g.in = dtype_;
    g.b_layout = plan_.problem.b_layout;
    g.m = s.a.rows;
    g.k = a.cols;
    g.n = c.cols;
    g.a = buffers_.ptr(s.a);
    g.lda = a.cols;
    g.b = b.base();
    g.ldb = b.cols;
    g.c = buffers_.ptr(s.out);
    g.ldc = c.cols;
    g.accumulate = s.accumulate;
    run_gemm(g);
  }

  void run_copy_or_add(const Step& s, bool add) {
    const HostBuffer& from = buffers_.at(s.a.buf);
    const HostBuffer& to = buffers_.at(s.out.buf);
    if (s.a.rows != s.out.rows || from.row_bytes() != to.row_bytes() || from.dtype != to.dtype)
      throw std::runtime_error("cpu backend: " + to_string(s.kind) + " between unlike slices: " + describe(s));
    if (add)
      run_add(to.dtype, buffers_.ptr(s.out), buffers_.ptr(s.a), s.out.rows * to.cols);
    else
      std::memcpy(buffers_.ptr(s.out), buffers_.ptr(s.a), static_cast<size_t>(s.out.rows) * to.row_bytes());
  }

  Message message(const Transfer& t) {
    return Message{buffers_.ptr(t.slice), t.slice.rows, buffers_.at(t.slice.buf).row_bytes(), t.peer};
  }

  void run_sendrecv(const Step& s) {
    std::vector<Message> sends, recvs;
    for (const Transfer& t : s.sends) sends.push_back(message(t));
    for (const Transfer& t : s.recvs) recvs.push_back(message(t));
    transport_->sendrecv(sends, recvs);
  }

  void run_allgather(const Step& s) {
    const int buf = s.parts.at(0).buf;
    std::vector<RowRange> parts;
    for (const Slice& q : s.parts) {
      if (q.buf != buf) throw std::runtime_error("cpu backend: allgather parts in several buffers: " + describe(s));
      buffers_.ptr(q);  // range check
      parts.push_back({q.row, q.rows});
    }
    const HostBuffer& to = buffers_.at(buf);
    if (buffers_.at(s.a.buf).row_bytes() != to.row_bytes())
      throw std::runtime_error("cpu backend: allgather between buffers of unlike rows: " + describe(s));
    transport_->allgather(buffers_.ptr(s.a), s.a.rows, to.base(), to.row_bytes(), parts);
  }

  void run_reduce_scatter(const Step& s) {
    const HostBuffer& from = buffers_.at(s.parts.at(0).buf);
    std::vector<int64_t> counts;
    int64_t next_row = s.parts[0].row;
    for (const Slice& q : s.parts) {
      if (q.buf != s.parts[0].buf || q.row != next_row)
        throw std::runtime_error("cpu backend: reduce-scatter parts not stacked in one buffer: " + describe(s));
      buffers_.ptr(q);  // range check
      next_row += q.rows;
      counts.push_back(q.rows * from.cols);
    }
    const HostBuffer& to = buffers_.at(s.out.buf);
    const Slice& own = s.parts.at(static_cast<size_t>(transport_->rank()));
    if (own.rows != s.out.rows || to.row_bytes() != from.row_bytes() || to.dtype != from.dtype)
      throw std::runtime_error("cpu backend: reduce-scatter output unlike its part: " + describe(s));
    transport_->reduce_scatter(buffers_.ptr(s.parts[0]), buffers_.ptr(s.out), from.dtype, counts);
  }

  // The run outlived timeout_s. Waiting for a peer (`on_peer`): the peer died, hangs or is slower
  // than --timeout; otherwise this rank's own work is (one iteration longer than --timeout, not a
  // fault of any peer). Say which and where, then end the whole job.
  [[noreturn]] void watchdog(const std::string& where, bool on_peer) {
    const std::string why = on_peer ? "no answer from a peer (it died, hangs, or its own step is slower than --timeout)"
                                    : "this rank's own work is slower than --timeout (not a peer's fault: give a "
                                      "larger --timeout or a smaller problem)";
    std::cerr << ("collmm cpu: rank " + std::to_string(transport_->rank()) + " of " +
                  std::to_string(transport_->size()) + ": the run of " + to_string(plan_.problem.op) + " " +
                  to_string(plan_.options.algo) + " timed out after " + std::to_string(options_.timeout_s) +
                  " s: " + why + ", stuck " + where + "\naborting the job\n")
              << std::flush;
    // The comm lane may still be inside the transport; HostComm::abort ends every process of the job
    // from here (MPI_Abort needs the MULTIPLE level that make_mpi_host_comm asks for).
    host_->abort(3);
    std::abort();  // not reached: HostComm::abort does not return
  }

  BackendOptions options_;
  std::unique_ptr<HostComm> host_;
  std::unique_ptr<Transport> transport_;
  int blas_threads_ = 1, ranks_on_node_ = 1;
  Plan plan_;
  Dtype dtype_ = Dtype::f32;
  PlanBuffers buffers_;
  std::unique_ptr<LanePool> pool_;
};

}  // namespace

std::unique_ptr<Executor> make_host_executor(const BackendOptions& options, std::unique_ptr<HostComm> host,
                                             std::unique_ptr<Transport> transport, int blas_threads,
                                             int ranks_on_node) {
  return std::make_unique<HostExecutor>(options, std::move(host), std::move(transport), blas_threads, ranks_on_node);
}

}  // namespace cpu
}  // namespace collmm
