// bench_model.cpp: profile choice, predicted times, the shared --algo auto pick and the tuning
// cache records of collmm-bench (bench_model.hpp).
#include "bench_model.hpp"

#include <filesystem>
#include <sstream>

#include "collmm/algorithms.hpp"
#include "collmm/sim.hpp"
#include "deadline.hpp"
#include "quote.hpp"

namespace collmm {

std::string default_profile_name(const BackendOptions& b) {
  if (b.backend != Backend::cuda) return "cpu-2core";
  return b.transport == CudaTransport::host ? "h200-host" : "h200-nvlink";
}

Profile profile_for(const BenchOptions& o, GemmLibrary library) {
  Profile p = load_profile(o.profile.empty() ? default_profile_name(o.backend) : o.profile);
  p.gemm.library = library;  // the model sizes C and the forwarded sums as the executor does
  return p;
}

double predicted_time_us(const Problem& problem, const PlanOptions& options, Dtype dtype, const Profile& profile) {
  return simulate(problem, options, dtype, profile, StepFilter::all, false).time_us;
}

void process0_local_work(HostComm& host, const std::string& what, const std::function<void()>& work) {
  host.expect_local_work(what, kLocalWorkBoundS);
  if (host.proc() != 0) return;
  const DeadlineGuard guard(kLocalWorkBoundS,
                            "collmm: process 0: its own work (" + what + ") did not finish within " +
                                std::to_string(kLocalWorkBoundS) + " s (not a peer's fault); aborting the job",
                            [&host] { host.abort(3); });
  work();
  host.local_work_done();  // done: process 0's own next wait is --timeout alone, as any peer's
}

AutoPick choose_on_process0(HostComm& host, const Problem& problem, const BenchOptions& o, GemmLibrary library,
                            std::string& error) {
  std::string mine;  // "<to_json(choice)>\n<source>\n<print(choice)>"
  process0_local_work(host, "--algo auto's choice, reading tuning cache " + quote(o.tune_cache_path), [&] {
    if (!error.empty()) return;
    try {
      TuningCache cache;
      const bool have_cache = !o.tune_cache_path.empty() && std::filesystem::exists(o.tune_cache_path);
      if (have_cache) cache = load_tuning_cache(o.tune_cache_path);
      const Choice c = choose(problem, o.dtype, profile_for(o, library), have_cache ? &cache : nullptr);
      mine = to_json(c).dump() + "\n" + c.source + "\n" + print(c);
    } catch (const UsageError& e) {
      error = e.what();
    }
  });
  const std::string shared = host.allgather(mine).at(0);
  AutoPick pick;
  if (shared.empty()) return pick;  // process 0 failed: raise_if_any_process_failed reports it
  std::istringstream in(shared);
  std::string choice;
  std::getline(in, choice);
  std::getline(in, pick.source);
  pick.choice = choice_from_json(nlohmann::json::parse(choice));
  pick.options = pick.choice.options;
  pick.options.post = o.plan.post;
  pick.printed = shared.substr(static_cast<size_t>(in.tellg()));
  return pick;
}

std::vector<Alternative> auto_timed_candidates(const BenchOptions& o, const AutoPick& pick) {
  if (!needs_measuring(pick.choice, o.auto_measure)) return {};
  std::vector<Alternative> candidates = candidates_to_time(pick.choice, o.auto_measure);
  for (Alternative& a : candidates) a.options.post = o.plan.post;
  return candidates;
}

MeasuredChoice measure_auto_pick(Executor& ex, const BenchOptions& o, Op op, AutoPick& pick) {
  const Problem problem = problem_of(o, op, ex.world_size());
  auto time = [&](const PlanOptions& options, int warmup, int iters) {
    std::vector<Plan> plans;
    for (int r : ex.local_ranks()) plans.push_back(make_plan(problem, options, r));
    ex.prepare(plans, o.dtype);
    upload_inputs(ex, plans, o.seed, o.dtype);
    return time_iterations(ex, StepFilter::all, warmup, iters);
  };
  const MeasuredChoice m = measure_choice(auto_timed_candidates(o, pick), time, ex.host(), o.auto_measure);
  pick.options = m.options;
  pick.source = "measured";
  return m;
}

size_t record_measurements(const std::string& path, const std::vector<CaseResult>& results) {
  std::vector<TuningEntry> entries;
  for (const CaseResult& r : results) {
    if (r.plan.post != Post::comm_first || !(r.time_us > 0)) continue;
    TuningEntry e;
    e.problem = r.problem;
    e.dtype = r.dtype;
    e.options = options_for(r.problem.op, r.plan.algo, r.plan);
    if (!algorithm(r.plan.algo).takes_gemm_lanes) e.options.gemm_lanes = 1;  // as auto_candidates lists it
    e.time_us = r.time_us;
    entries.push_back(e);
  }
  update_tuning_cache(path, entries);
  return entries.size();
}

}  // namespace collmm
