// host_comm.hpp: the processes of one job, joined for the front end's own bookkeeping
// (agreement checks, max over ranks, the gathering of timelines). MPI_COMM_WORLD, a NCCL
// communicator, a c10d group, or a single process.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace collmm {

// Process-level coordination. Every collective of a multi-process HostComm is bounded: a process
// that waits longer than its timeout for the others says so (naming its rank and the phase set
// last) and ends the whole job (abort).
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

// The HostComm of a job of one process.
std::unique_ptr<HostComm> make_single_process_comm();

}  // namespace collmm
