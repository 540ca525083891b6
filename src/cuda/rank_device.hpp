// rank_device.hpp: one rank's state on its GPU: the plan's buffers, one CUDA stream per lane
// (each with its own cuBLASLt workspace), one set of events per step, and the GEMM engine. It
// issues the steps that need no peer (gemm, copy, add) and the bracket every step shares. That is
// open_step (waits as cudaStreamWaitEvent on the waited steps' end events; a transfer's start
// event) and close_step (the end event, where a later step waits for it). Comm steps are issued
// by a transport between open_step and close_step.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <vector>

#include "collmm/plan.hpp"
#include "collmm/rank_run.hpp"
#include "collmm/step_filter.hpp"
#include "lt_gemm.hpp"

namespace collmm::cuda {

// Dependency events (no timing) order the streams; timing events are recorded beside them with
// cudaEventRecordExternal, so that inside a CUDA graph capture they become event-record nodes
// that keep working at replay (a plain record during capture only marks a dependency).
// The host records only what is read: `start` for transfers, `end` for a step another one waits for
// (each record is host time per step, which paces the iteration at small sizes).
struct StepEvents {
  cudaEvent_t start = nullptr;                     // transfers: after the step's waits, "my send data is ready"
  cudaEvent_t end = nullptr;                       // the step is done (where a later step waits for it)
  cudaEvent_t copied = nullptr;                    // local transport: this rank's receive copies are done
  cudaEvent_t t_start = nullptr, t_end = nullptr;  // timing
};

struct EngineSettings {
  int gemm_sms = 0;   // SM count target for GEMMs; 0: all
  int sm_margin = 0;  // or leave this many SMs free
  size_t workspace_bytes = size_t(32) << 20;
  GemmAlgo algo_choice = GemmAlgo::heuristic;
  bool comm_high_priority = false;  // lane 0 (comm, copies, adds) at the device's highest stream priority
};

class RankDevice {
 public:
  // `caller_buffers`: the buffers the caller's memory will be bound to (bind), allocated nowhere here.
  RankDevice(int device, const Plan& plan, Dtype dtype, const EngineSettings&,
             const std::vector<int>& caller_buffers = {});
  ~RankDevice();
  RankDevice(const RankDevice&) = delete;
  RankDevice& operator=(const RankDevice&) = delete;

  int device() const { return device_; }
  int rank() const { return plan_.rank; }
  const Plan& plan() const { return plan_; }
  Dtype in_dtype() const { return in_; }
  Dtype dtype_of(int buf) const;  // input dtype for A, B, gathered; output dtype for C and work
  char* ptr(const Slice&) const;
  size_t bytes(const Slice&) const;
  void* buffer(int buf) const { return buffers_[buf]; }
  size_t buffer_bytes(int buf) const;
  // From now on buffer `buf` is the device memory at `data` (buffer_bytes(buf) of it, on this
  // rank's device); nullptr: this rank's own allocation again (UsageError where it has none).
  void bind(int buf, void* data);
  cudaStream_t lane(int l) const { return lanes_[l]; }
  const StepEvents& events(int step) const { return events_[step]; }
  cudaEvent_t begin_event() const { return begin_; }
  cudaEvent_t finish_event() const { return finish_; }
  cudaEvent_t done_event() const { return t_finish_; }  // completes when the iteration (or its graph) is done

  // Per iteration: which steps are skipped (they count as done at once). Those the filter leaves
  // out. And, where the caller binds the outputs it takes (DeviceMatmul), a copy that only fills a
  // buffer of this rank's own that the caller does not take. That is the ag_gemm rings' own chunk
  // into a gathered A nobody asked for (at P = 1 a copy of all of A).
  void set_filter(StepFilter);
  bool skipped(int step) const { return skip_[step] || (caller_binds_ && unwanted_[step] && unbound(step)); }

  // Records the iteration's begin on lane 0 (after `origin`, if given) and makes every lane wait for it.
  void begin_iteration(cudaEvent_t origin);
  void open_step(int step);
  void close_step(int step);
  // gemm, copy or add: open, enqueue, close.
  void issue_local_step(int step);
  // Lane 0 waits for every lane's last step; records finish.
  void end_iteration();
  // One iteration of the plan: begin_iteration(origin), every step not skipped in list order (local
  // steps here, transfers through `transfer(step)` between open_step and close_step), end_iteration.
  void issue_iteration(cudaEvent_t origin, const std::function<void(int step)>& transfer);
  // After the finish event completed: times relative to begin.
  RankRun times(bool timestamps) const;

  void poison();  // NaN (all bytes 0xff) into C, gathered and work buffers

  // Device scratch a transport may stage a step's data in (allocated at prepare, outside any run
  // or graph capture); grows only.
  void reserve_scratch(size_t bytes);
  char* scratch() const { return static_cast<char*>(scratch_); }
  size_t scratch_bytes() const { return scratch_bytes_; }

 private:
  int device_;
  Plan plan_;
  Dtype in_, out_;
  std::vector<void*> buffers_;  // what the steps use: own_ or the caller's memory
  std::vector<void*> own_;      // this rank's allocations (nullptr for the caller's buffers)
  std::vector<cudaStream_t> lanes_;
  std::vector<void*> workspaces_;
  std::vector<cudaEvent_t> lane_done_;  // each lane's end of the iteration
  std::vector<StepEvents> events_;
  std::vector<bool> skip_;
  std::vector<bool> unwanted_;  // per step: a copy that only fills a buffer other than A, B and C
  bool caller_binds_ = false;   // the caller's memory is bound to some buffers (caller_buffers given)
  bool unbound(int step) const {
    const int b = plan_.steps[step].out.buf;
    return buffers_[b] == own_[b];
  }
  std::vector<bool> waited_;  // per step: a later step waits for it (its `end` is recorded)
  bool capturing_ = false;    // this iteration is being captured in a CUDA graph (asked once, on lane 0)
  // A timing event: inside a capture an external event-record node (a plain record there only
  // marks a dependency); outside a capture that flag is refused, so a plain record.
  void stamp(cudaEvent_t e, cudaStream_t st) const;
  cudaEvent_t begin_ = nullptr, finish_ = nullptr, t_begin_ = nullptr, t_finish_ = nullptr;
  std::unique_ptr<GemmEngine> engine_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace collmm::cuda
