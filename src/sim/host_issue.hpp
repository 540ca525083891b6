// host_issue.hpp: the host's cost of issuing a plan, as the cost model counts it (Profile::host,
// collmm/profile.hpp): the device operations of a step (issue_ops), their host time
// (issue_cost_us; both in sim_host.cpp), and the host's share of a whole run (issue_time_us,
// simulate.cpp), which calibration takes off measured times.
#pragma once

#include "collmm/plan.hpp"
#include "collmm/profile.hpp"
#include "collmm/step_filter.hpp"
#include "collmm/types.hpp"

namespace collmm {

// The device operations an executor enqueues for one step, the unit of the host issue cost: a
// gemm, copy or add is one; a sendrecv one per receive (a copy on the receiving rank), at least
// one; an allgather or reduce-scatter `world` (the local transport's P copies, or copy and P-1 adds).
int issue_ops(StepKind kind, int receives, int world);
// The host's time to enqueue `ops` device operations of a step of this kind (Profile::host).
double issue_cost_us(const HostCost&, StepKind kind, int ops);

// The host's share of a run: the simulated time of this problem's plans on a device that takes
// no time, i.e. when the host (Profile::host, with `host`'s figures) has issued their last step;
// 0 when host.issue_us is 0. Calibration takes it off measured times, so that the device figures
// it fits do not count the issue a second time.
double issue_time_us(const Problem&, const PlanOptions&, const HostCost& host, StepFilter filter = StepFilter::all);

}  // namespace collmm
