// simulate.cpp: the simulator's entry points (collmm/sim.hpp): plans -> RankRuns, a problem ->
// runs and timeline, and one predicted table row.
#include "collmm/sim.hpp"

#include <algorithm>

#include "host_issue.hpp"
#include "overlap.hpp"
#include "sim_engine.hpp"

namespace collmm {

std::vector<RankRun> simulate(const std::vector<Plan>& plans, Dtype dtype, const Profile& profile, StepFilter filter) {
  if (plans.empty()) return {};
  sim::Engine engine(dtype, profile, filter, static_cast<int>(plans.size()));
  for (const Plan& p : plans) engine.add_rank(p);
  engine.run();
  return engine.rank_runs();
}

SimResult simulate(const Problem& problem, const PlanOptions& options, Dtype dtype, const Profile& profile,
                   StepFilter filter, bool want_timeline) {
  validate(problem, options);
  sim::Engine engine(dtype, profile, filter, problem.world);
  for (int r = 0; r < problem.world; ++r) engine.add_rank(make_plan(problem, options, r));
  engine.run();
  SimResult out;
  out.runs = engine.rank_runs();
  for (const RankRun& run : out.runs) out.time_us = std::max(out.time_us, run.total_us);
  if (want_timeline) out.timeline = engine.timeline(problem.op, options.algo);
  return out;
}

double issue_time_us(const Problem& problem, const PlanOptions& options, const HostCost& host, StepFilter filter) {
  if (!(host.issue_us > 0)) return 0;
  Profile free;  // every device figure unbounded: steps take ~0 (1e-20 us and less) once issued
  free.name = "host-only";
  free.gemm.model = GemmModel::roofline;
  free.gemm.peak_tflops = {{Dtype::f32, 1e30}};
  free.memory_gbps = 1e30;
  free.links = {0, 1e30, 0, 1e30, 0};
  free.host = host;
  return simulate(problem, options, Dtype::f32, free, filter, false).time_us;
}

Prediction predict(const Problem& problem, const PlanOptions& options, Dtype dtype, const Profile& profile,
                   const Prediction* sequential) {
  Prediction p;
  p.problem = problem;
  p.options = options;
  p.dtype = dtype;
  SimResult all = simulate(problem, options, dtype, profile, StepFilter::all, true);
  p.time_us = all.time_us;
  if (sequential) {
    p.t_sequential_us = sequential->time_us;
    p.t_gemm_us = sequential->t_gemm_us;
    p.t_comm_us = sequential->t_comm_us;
  } else {
    const PlanOptions seq = options_for(problem.op, Algo::sequential, options);  // no stages, waves, merge, pieces
    p.t_sequential_us = options.algo == Algo::sequential
                            ? p.time_us
                            : simulate(problem, seq, dtype, profile, StepFilter::all, false).time_us;
    p.t_gemm_us = simulate(problem, seq, dtype, profile, StepFilter::gemm_only, false).time_us;
    p.t_comm_us = simulate(problem, seq, dtype, profile, StepFilter::comm_only, false).time_us;
  }
  p.speedup = p.time_us > 0 ? p.t_sequential_us / p.time_us : 0;
  const double shorter = std::min(p.t_gemm_us, p.t_comm_us);
  p.overlap_efficiency = shorter > 0 ? (p.t_sequential_us - p.time_us) / shorter : 0;
  const Overlap o = measure_overlap(all.timeline);
  p.hidden_comm_mean = o.mean_fraction;
  p.hidden_comm_min = o.min_fraction;
  p.tflops_per_rank = p.time_us > 0 ? 2.0 * problem.m * problem.n * problem.k / problem.world / (p.time_us * 1e6) : 0;
  p.timeline = std::move(all.timeline);
  return p;
}

}  // namespace collmm
