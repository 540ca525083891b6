// trace.hpp: the steps of every op call made while collmm.trace is on, as collmm-bench shows its
// runs: one Chrome trace of the calls laid end to end, an SVG timeline per call, and a table per
// call (op, algo, shape, time, t_gemm and t_comm read off the call's own steps, hidden%, E).
// Nothing is recorded while tracing is off (the executors run without step times).
#pragma once

#include <string>
#include <vector>

#include "collmm/timeline.hpp"

namespace collmm::torch_ext {

struct TracedCall {
  Timeline timeline;  // every rank's steps (gathered over the group)
  int64_t m = 0, n = 0, k = 0;
  Dtype dtype = Dtype::f32;
};

// Per call, from its timeline: time = the slowest rank's last step end; t_gemm, t_comm = the mean
// over ranks of the union of its GEMM (comm) step intervals; E = (t_gemm + t_comm - time) /
// min(t_gemm, t_comm), the part of the smaller one hidden (collmm-bench's E with this call's own
// t_gemm and t_comm in place of the sequential plan's).
struct CallFigures {
  double time_us = 0, t_gemm_us = 0, t_comm_us = 0, hidden = 0, e = 0;
};
CallFigures figures(const Timeline& t);

void trace_start();
bool tracing();
void trace_add(TracedCall call);
// Ends tracing. Where `write`: PATH.json (Chrome trace), PATH-<i>-<op>-<algo>.svg per call and
// PATH.txt (the table). Returns the table.
std::string trace_stop(const std::string& path, bool write);

}  // namespace collmm::torch_ext
