// bench_case.cpp: one (op, algo) case of collmm-bench: plans -> prepare -> inputs -> warm-up ->
// timed iterations (step times kept; the median one becomes the case's timeline and overlap) ->
// (standalone GEMM and comm) -> one more iteration, poisoned and checked -> saved.
// Every timed iteration asks for step times: both backends record them in every run anyway
// (steady clock / CUDA events), asking only reads them back after the run.
#include "bench_case.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <limits>
#include <set>
#include <stdexcept>

#include "calibrate.hpp"
#include "calibration_hooks.hpp"
#include "chrome_trace.hpp"
#include "collmm/element_types.hpp"
#include "npy.hpp"
#include "played_peers.hpp"
#include "preflight.hpp"
#include "quote.hpp"

namespace collmm {
namespace {

int64_t buffer_elems(const Plan& plan, int buf) {
  const BufferSpec& b = plan.buffers[static_cast<size_t>(buf)];
  return b.rows * b.cols;
}

std::vector<unsigned char> read_buffer(Executor& ex, int i, const Plan& plan, int buf, Dtype dtype) {
  std::vector<unsigned char> bytes(static_cast<size_t>(buffer_elems(plan, buf)) * dtype_size(dtype));
  ex.read(i, buf, bytes.data(), bytes.size());
  return bytes;
}

// The slowest rank of each timed iteration, over the whole job (collective).
std::vector<double> slowest_per_iteration(HostComm& host, const std::vector<double>& slowest_here) {
  const std::vector<double> all = host.allgather(slowest_here);  // iters values per process
  std::vector<double> slowest(slowest_here.size(), 0.0);
  for (size_t j = 0; j < all.size(); ++j) slowest[j % slowest.size()] = std::max(slowest[j % slowest.size()], all[j]);
  return slowest;
}

// The index of the iteration whose time is nearest the median (the first such).
size_t median_index(const std::vector<double>& v) {
  const double m = median(v);
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (std::abs(v[i] - m) < std::abs(v[best] - m)) best = i;
  return best;
}

// Timed iterations of the whole plan with step times: the median time and this process's runs of
// the median iteration. Each iteration also runs the plan once under every filter in `alone` (its
// GEMMs alone, its comm alone), right after the whole plan, and `alone_us` gets their medians. So
// the figures set side by side see the same device state. A GPU's clocks drift by 10-15% over
// seconds of back-to-back GEMMs: measured one after the other, one plan's GEMM-only runs differed so.
// With `hooks` (the backend enqueues its steps), issue_us gets the median host issue time of the
// whole runs; every process passes hooks alike (the same backend and options).
double time_with_steps(Executor& ex, int warmup, int iters, std::vector<RankRun>& median_runs,
                       const std::vector<StepFilter>& alone, std::vector<double>& alone_us, CalibrationHooks* hooks,
                       double& issue_us) {
  auto slowest_of = [](const std::vector<RankRun>& runs) {
    double slowest = 0;
    for (const RankRun& run : runs) slowest = std::max(slowest, run.total_us);
    return slowest;
  };
  for (int w = 0; w < warmup; ++w) {
    ex.run(StepFilter::all, false);
    for (StepFilter f : alone) ex.run(f, false);
  }
  std::vector<std::vector<RankRun>> runs;
  std::vector<double> slowest_here, issue_here;
  std::vector<std::vector<double>> alone_here(alone.size());
  for (int it = 0; it < iters; ++it) {
    runs.push_back(ex.run(StepFilter::all, true));
    slowest_here.push_back(slowest_of(runs.back()));
    if (hooks) issue_here.push_back(hooks->last_issue_us());
    for (size_t f = 0; f < alone.size(); ++f) alone_here[f].push_back(slowest_of(ex.run(alone[f], false)));
  }
  const std::vector<double> slowest = slowest_per_iteration(ex.host(), slowest_here);
  median_runs = std::move(runs[median_index(slowest)]);
  alone_us.clear();
  for (const std::vector<double>& here : alone_here) alone_us.push_back(median(slowest_per_iteration(ex.host(), here)));
  if (hooks) issue_us = median(slowest_per_iteration(ex.host(), issue_here));
  return median(slowest);
}

// Compares C (and ag_gemm's gathered A) of every local rank, and what they sent to played peers;
// sums and maxes over the job.
void check_outputs(Executor& ex, const std::vector<Plan>& plans, const Reference& ref, Dtype dtype,
                   CaseResult& result) {
  const Dtype out = ex.out_dtype(dtype);
  double wrong = 0, max_err = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& plan = plans[i];
    const std::vector<unsigned char> c = read_buffer(ex, static_cast<int>(i), plan, kBufC, out);
    const Comparison cc = compare(decode(c.data(), static_cast<size_t>(buffer_elems(plan, kBufC)), out), ref.c[i],
                                  dtype, out, plan.problem.k);
    wrong += static_cast<double>(cc.wrong);
    max_err = std::max(max_err, cc.max_rel_err);
    const int g = find_buffer(plan, Role::gathered);
    if (g >= 0) {
      const std::vector<unsigned char> ga = read_buffer(ex, static_cast<int>(i), plan, g, dtype);
      const Comparison cg = compare(decode(ga.data(), static_cast<size_t>(buffer_elems(plan, g)), dtype),
                                    ref.gathered_a, dtype, dtype, 1);
      wrong += static_cast<double>(cg.wrong);
      max_err = std::max(max_err, cg.max_rel_err);
    }
  }
  if (PlayedPeers* peers = ex.played_peers()) {  // what the ranks sent to peers played by the backend
    const Comparison sent = peers->check_sent();
    wrong += static_cast<double>(sent.wrong);
    max_err = std::max(max_err, sent.max_rel_err);
  }
  const std::vector<double> all = ex.host().allgather(std::vector<double>{wrong, max_err});
  result.checked = true;
  result.wrong = 0;
  result.max_rel_err = 0;
  for (size_t q = 0; q < all.size(); q += 2) {
    result.wrong += static_cast<int64_t>(all[q]);
    result.max_rel_err = std::max(result.max_rel_err, all[q + 1]);
  }
}

void save_buffers(Executor& ex, const std::vector<Plan>& plans, Dtype dtype, const std::string& dir,
                  const std::string& label) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // several processes race here; check the result
  if (!std::filesystem::is_directory(dir)) throw std::runtime_error("--save: cannot create directory " + quote(dir));
  const Dtype out = ex.out_dtype(dtype);
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& plan = plans[i];
    const std::string prefix =
        dir + "/" + to_string(plan.problem.op) + "-" + file_label(label) + "-rank" + std::to_string(plan.rank) + "-";
    auto save = [&](int buf, const std::string& name) {
      const Dtype t = buffer_dtype(plan.buffers[static_cast<size_t>(buf)].role, dtype, out);
      const BufferSpec& b = plan.buffers[static_cast<size_t>(buf)];
      write_npy(prefix + name + ".npy", t, b.rows, b.cols, read_buffer(ex, static_cast<int>(i), plan, buf, t));
    };
    save(kBufA, "A");
    save(kBufB, "B");
    save(kBufC, "C");
    const int g = find_buffer(plan, Role::gathered);
    if (g >= 0) save(g, "gathered");
  }
}

// The GEMM steps' time in a timeline, summed per rank, the mean over the ranks that ran GEMMs (a
// timeline may hold fewer ranks than the job: the host transport runs one of them).
double gemm_busy_us(const Timeline& t) {
  double busy = 0;
  std::set<int> ranks;
  for (const TimelineEvent& e : t.events)
    if (e.kind == StepKind::gemm) busy += e.end_us - e.start_us, ranks.insert(e.rank);
  return ranks.empty() ? 0 : busy / static_cast<double>(ranks.size());
}

// The number of steps a schedule has: 1 + its largest step index.
int steps_of(const Plan& plan) {
  int last = 0;
  for (const Step& s : plan.steps) last = std::max(last, s.index);
  return last + 1;
}

}  // namespace

void upload_inputs(Executor& ex, const std::vector<Plan>& plans, uint64_t seed, Dtype dtype) {
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& plan = plans[i];
    const std::vector<unsigned char> a = encode(make_local_a(plan.problem, plan.rank, seed, dtype).v, dtype);
    const std::vector<unsigned char> b = encode(make_local_b(plan.problem, plan.rank, seed, dtype).v, dtype);
    ex.write(static_cast<int>(i), kBufA, a.data(), a.size());
    ex.write(static_cast<int>(i), kBufB, b.data(), b.size());
  }
  if (PlayedPeers* peers = ex.played_peers()) peers->stage(seed);  // what the played peers send
}

void inject_fault(const BenchOptions& o, const std::vector<int>& local_ranks, const std::string& phase) {
  if (phase != o.debug_phase) return;
  for (int r : local_ranks) {
    if (r == o.debug_die_rank) std::raise(SIGKILL);
    if (r == o.debug_hang_rank) std::raise(SIGSTOP);
  }
}

std::vector<double> iteration_times(Executor& ex, StepFilter filter, int warmup, int iters) {
  for (int w = 0; w < warmup; ++w) ex.run(filter, false);
  std::vector<double> slowest_here;
  for (int it = 0; it < iters; ++it) {
    double slowest = 0;
    for (const RankRun& run : ex.run(filter, false)) slowest = std::max(slowest, run.total_us);
    slowest_here.push_back(slowest);
  }
  return slowest_per_iteration(ex.host(), slowest_here);
}

double time_iterations(Executor& ex, StepFilter filter, int warmup, int iters) {
  return median(iteration_times(ex, filter, warmup, iters));
}

CaseResult merge_rounds(const std::vector<CaseResult>& rounds) {
  if (rounds.size() == 1) return rounds[0];
  std::vector<double> times;
  for (const CaseResult& r : rounds) times.push_back(r.time_us);
  CaseResult m = rounds.at(median_index(times));
  auto median_of = [&](double CaseResult::*field) {
    std::vector<double> v;
    for (const CaseResult& r : rounds) v.push_back(r.*field);
    return median(v);
  };
  m.time_us = median(times);
  m.t_gemm_us = median_of(&CaseResult::t_gemm_us);
  m.t_comm_us = median_of(&CaseResult::t_comm_us);
  if (!std::isnan(m.issue_us)) m.issue_us = median_of(&CaseResult::issue_us);
  if (!std::isnan(m.t_gemm_plan_us)) {  // --gemm-rate: measured in every round alike
    m.t_gemm_plan_us = median_of(&CaseResult::t_gemm_plan_us);
    m.gemm_busy_us = median_of(&CaseResult::gemm_busy_us);
  }
  m.wrong = 0;
  m.max_rel_err = 0;
  for (const CaseResult& r : rounds) {
    m.wrong += r.wrong;
    m.max_rel_err = std::max(m.max_rel_err, r.max_rel_err);
  }
  m.round_us = times;
  return m;
}

void derive_figures(CaseResult& r, const CaseResult& seq) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Problem& p = r.problem;
  r.t_gemm_us = seq.t_gemm_us;
  r.t_comm_us = seq.t_comm_us;
  r.tflops = r.time_us > 0 ? 2.0 * p.m * p.n * p.k / p.world / (r.time_us * 1e-6) / 1e12 : nan;
  r.speedup = r.time_us > 0 ? seq.time_us / r.time_us : nan;
  const double hidden_max = std::min(seq.t_gemm_us, seq.t_comm_us);
  // One rank has no communication to hide (its "comm" is a local copy): E is undefined there.
  r.efficiency = hidden_max > 0 && p.world > 1 ? (seq.time_us - r.time_us) / hidden_max : nan;
}

Reference make_reference(const Problem& p, const std::vector<int>& local_ranks, uint64_t seed, Dtype dtype) {
  Reference ref;
  for (int r : local_ranks) ref.c.push_back(reference_c(p, r, seed, dtype));
  if (gathers_a(p.op)) ref.gathered_a = make_global_a(p, seed, dtype);
  return ref;
}

CaseResult run_case(Executor& ex, const BenchOptions& o, Op op, const PlanOptions& plan_options, const CaseWork& work,
                    const std::string& label) {
  CaseResult result;
  result.plan = plan_options;
  result.label = label.empty() ? algo_label(plan_options) : label;
  result.problem = problem_of(o, op, ex.world_size());
  result.dtype = o.dtype;

  const std::string name = to_string(op) + " " + result.label;
  HostComm& host = ex.host();
  std::vector<Plan> plans;
  for (int r : ex.local_ranks()) plans.push_back(make_plan(result.problem, plan_options, r));
  result.steps = steps_of(plans.at(0));
  inject_fault(o, ex.local_ranks(), "setup");
  host.set_phase("the setup of " + name + " (the ranks' agreement on its plan)");
  ex.prepare(plans, o.dtype);
  upload_inputs(ex, plans, o.seed, o.dtype);
  inject_fault(o, ex.local_ranks(), "run");

  // The plan's GEMMs alone (for t_gemm and for --gemm-rate) and its comm alone (for t_comm), timed
  // interleaved with the whole plan. The sequential baseline always runs them, every case does with
  // --gemm-rate (so --gemm-rate runs time every row alike, with GEMM-only runs between iterations).
  std::vector<StepFilter> alone;
  if (work.alone || o.gemm_rate) alone.push_back(StepFilter::gemm_only);
  if (work.alone) alone.push_back(StepFilter::comm_only);
  std::vector<RankRun> median_runs;
  std::vector<double> alone_us;
  host.set_phase("the timed runs of " + name + " (gathering the times)");
  // The host's issue, where it enqueues steps (with --graph it launches a graph: nothing to count).
  CalibrationHooks* hooks = o.backend.graph ? nullptr : ex.calibration_hooks();
  result.time_us = time_with_steps(ex, o.warmup, o.iters, median_runs, alone, alone_us, hooks, result.issue_us);
  if (hooks) {  // every process alike: the same backend
    const IssueSample mine = issue_counts(plans, ex.world_size(), hooks->single_issuer());
    const std::vector<double> all = host.allgather(std::vector<double>{mine.gemms, mine.others});
    for (size_t q = 0; q < all.size(); q += 2)
      if (all[q] + all[q + 1] > result.issue_gemms + result.issue_others)
        result.issue_gemms = all[q], result.issue_others = all[q + 1];
    result.issue_shared = hooks->single_issuer();
  }
  host.set_phase("the timed runs of " + name + " (gathering the timeline)");
  result.timeline = gather_timeline(host, make_timeline(plans, median_runs));
  result.overlap = measure_overlap(result.timeline);
  if (o.gemm_rate) {
    result.t_gemm_plan_us = alone_us.at(0);
    result.gemm_busy_us = gemm_busy_us(result.timeline);
  }
  if (work.alone) {
    result.t_gemm_us = alone_us.at(0);
    result.t_comm_us = alone_us.at(1);
  }

  // One more whole iteration for the check (on poisoned outputs) and the saved files: the
  // filtered runs above leave C half done. Run on every process alike (--save is per process).
  host.set_phase("the checked run of " + name);
  if (work.check) ex.poison();
  ex.run(StepFilter::all, false);
  if (work.check) check_outputs(ex, plans, *work.check, o.dtype, result);
  if (!work.save_dir.empty()) save_buffers(ex, plans, o.dtype, work.save_dir, result.label);
  return result;
}

}  // namespace collmm
