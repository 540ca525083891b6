// collmm/sim.hpp: the simulator. It walks every rank's Plan (the same plans the backends run)
// through the cost model (the machine's figures: a Profile, collmm/profile.hpp) and returns what an
// executor returns: one RankRun per rank with every step timed. So the Timeline, the SVG, the
// Chrome trace, the overlap metric and the table serve predicted and measured runs alike.
//
// Entry points:
//   std::vector<RankRun> simulate(plans, dtype, profile, filter);   // plans[r] is rank r's
//   SimResult simulate(problem, options, dtype, profile, filter);   // builds the plans itself
//   Prediction predict(problem, options, dtype, profile);           // one row of the table
//
// Execution rules (plan.hpp's, followed exactly):
//   - steps on a lane run one after another in list order; a step also waits for the steps in
//     `waits`;
//   - a sendrecv step is one group: its messages start when both sides have posted them (the k-th
//     send r -> q meets the k-th receive on q from r), and the step ends when all are done;
//   - the k-th allgather / reduce-scatter of every rank is one collective that starts when every
//     rank has posted it and ends on all ranks together.
// Among steps that become ready at the same instant, the earlier one in the list starts first (that
// is what "posted first" means here). Skipped steps (StepFilter) take no time.
// Host issue (Profile::host, issue_us > 0): a step also waits until the host has enqueued it. The
// host spends issue_us x issue_ops(step) on each step that is not skipped, never waiting for the
// device: per rank in list order (one issuer per rank), or, shared, one issuer for every rank in
// the order the cuda local transport issues in (src/plan/issue_order.hpp, which both walk). See
// src/sim/host_issue.hpp and src/sim/sim_host.cpp.
//
// The simulation is event-driven: a heap of activity end times, with rates changed only where SM
// contention says so. Plans of P ranks have O(P) steps each, O(P^2) in all; P = 1024 ring runs
// in about a second.
#pragma once

#include <vector>

#include "collmm/profile.hpp"
#include "collmm/rank_run.hpp"
#include "collmm/step_filter.hpp"
#include "collmm/timeline.hpp"

namespace collmm {

// Simulates the plans of all ranks of one job (plans[r].rank == r, plans.size() == P). Throws
// std::runtime_error when the plans do not match (a send without its receive, collectives that
// differ) or deadlock.
std::vector<RankRun> simulate(const std::vector<Plan>& plans, Dtype dtype, const Profile& profile,
                              StepFilter filter = StepFilter::all);

struct SimResult {
  std::vector<RankRun> runs;  // one per rank
  Timeline timeline;          // the events of the steps that ran (empty unless asked for)
  double time_us = 0;         // the slowest rank's total
};

// Builds rank r's plan with make_plan for r = 0..P-1, one at a time, and simulates them.
SimResult simulate(const Problem&, const PlanOptions&, Dtype, const Profile&, StepFilter filter = StepFilter::all,
                   bool want_timeline = true);

// One row of the predicted table, with the same columns as collmm-bench's measured one.
struct Prediction {
  Problem problem;
  PlanOptions options;
  Dtype dtype = Dtype::bf16;
  double time_us = 0;             // the whole plan
  double t_gemm_us = 0;           // as collmm-bench: the sequential plan's GEMMs alone
  double t_comm_us = 0;           // and its comm alone
  double t_sequential_us = 0;     // the sequential algorithm on the same shape
  double speedup = 0;             // t_sequential / time
  double overlap_efficiency = 0;  // (t_sequential - time) / min(t_gemm, t_comm); 0 when that is 0
  double hidden_comm_mean = 0;    // overlap.hpp: comm time covered by GEMM, mean over ranks
  double hidden_comm_min = 0;     // and the worst rank
  double tflops_per_rank = 0;     // 2MNK / P / time
  Timeline timeline;              // the predicted iteration (for the SVG and the Chrome trace)
};

// Simulates the plan, and the sequential plan three times (all, gemm_only, comm_only) unless
// `sequential` (the sequential row of the same shape) is given.
Prediction predict(const Problem&, const PlanOptions&, Dtype, const Profile&, const Prediction* sequential = nullptr);

}  // namespace collmm
