// executor.hpp: what every backend offers the front ends. An Executor drives the ranks of
// this process (one per MPI process for cpu and cuda+nccl; several for cuda -g G or --transport
// local): it holds their buffers, walks their Plans, and times every step. Its HostComm
// (src/common/host_comm.hpp) joins the processes of the job; the factories are in src/common/backends.hpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collmm/element_types.hpp"
#include "collmm/plan.hpp"
#include "collmm/rank_run.hpp"
#include "collmm/step_filter.hpp"
#include "host_comm.hpp"
#include "memory.hpp"

namespace collmm {

class CalibrationHooks;
class PlayedPeers;

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
  // Optional capabilities, each reached through its accessor: null where the backend has none.
  // The peers this backend plays (src/common/played_peers.hpp; cuda --transport host).
  virtual PlayedPeers* played_peers() { return nullptr; }
  // What it offers `collmm-bench --calibrate` (src/common/calibration_hooks.hpp; cuda).
  virtual CalibrationHooks* calibration_hooks() { return nullptr; }

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
  // at `data` (row-major, the buffer's shape and dtype). Every later run(), write(), read() and
  // poison() reads and writes it in place, until prepare() or bind() again (data = nullptr: the
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

}  // namespace collmm
