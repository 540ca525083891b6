// trace.hpp: the steps of every op call made while collmm.trace is on, as collmm-bench shows its
// runs: one Chrome trace of the calls laid end to end, an SVG timeline per call, and a table per
// call (op, algo, shape, time, t_gemm and t_comm read off the call's own steps, hidden%, E).
// Nothing is recorded while tracing is off (the executors run without step times). Beside it, kept
// always: the last run's record (torch.ops.collmm.last_comm, last_plan, last_auto).
#pragma once

#include <string>
#include <vector>

#include "collmm/timeline.hpp"

namespace collmm::torch_ext {

struct TracedCall {
  Timeline timeline;  // every rank's steps (gathered over the group)
  int64_t m = 0, n = 0, k = 0;
  int64_t plan_m = 0;  // the plan's M: more than m where the caller's rows were padded (row_split.hpp)
  Dtype dtype = Dtype::f32;
  std::string label;  // what made the call: "<module> forward" / "<module> backward" (trace_add fills it)
};

// Per call, from its timeline, all on one basis, the slowest rank (the one whose last step ends
// last):
//   - time: its last step's end;
//   - t_gemm, t_comm: the union of its GEMM (comm) step intervals;
//   - E: (t_gemm + t_comm - time) / min(t_gemm, t_comm), the part of the smaller one hidden
//     (collmm-bench's E with this call's own t_gemm and t_comm in place of the sequential plan's);
//   - hidden: the mean over ranks of the comm time covered by a GEMM.
struct CallFigures {
  double time_us = 0, t_gemm_us = 0, t_comm_us = 0, hidden = 0, e = 0;
};
CallFigures figures(const Timeline& t);

void trace_start();
bool tracing();
// Records `call` (while tracing), labelled with the module that made it (set_trace_module) and
// forward, or with the module its forward ran in and backward (inside a TraceBackward).
void trace_add(TracedCall call);

// The module whose forward runs now ("" for none): set by collmm.trace's module hooks.
void set_trace_module(const std::string& name);
std::string trace_module();
// Between begin and end (on this thread), calls are labelled "<module> backward": an autograd
// backward, with the module of the forward it belongs to. Begin and end nest. The ops' C++ autograd
// uses TraceBackward; autograd Functions written in Python call the ops trace_backward_begin/_end.
void trace_backward_begin(std::string module);
void trace_backward_end();
class TraceBackward {
 public:
  explicit TraceBackward(std::string module) { trace_backward_begin(std::move(module)); }
  ~TraceBackward() { trace_backward_end(); }
  TraceBackward(const TraceBackward&) = delete;
  TraceBackward& operator=(const TraceBackward&) = delete;
};
// Ends tracing. Where `write`: PATH.json (Chrome trace), PATH-<i>-<op>-<algo>.svg per call and
// PATH.txt (the table). Returns the table.
std::string trace_stop(const std::string& path, bool write);

// The last run of this process: how it moved its data, "nccl" (NcclComm), "c10d", "nccl+c10d" (uneven
// collectives padded through c10d beside the rest) or "none" (no transfer), and its plan's options
// (to_string(PlanOptions): what "auto" picked).
void note_last_run(const char* comm_path, const std::string& plan_options);
std::string last_comm_path();
std::string last_plan_options();
// auto's last decision in this process (a shape's first call decides, later calls reuse it): the
// model's alternatives, and, where it timed them, each candidate's host steps, times and the pick, as
// collmm-bench --algo auto prints them.
void note_last_auto(const std::string& report);
std::string last_auto_report();

}  // namespace collmm::torch_ext
