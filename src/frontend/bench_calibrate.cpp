// bench_calibrate.cpp: collmm-bench --calibrate: the calibration spec for the bench's shape, timers
// built from plans run on the executor, the fits (src/sim/calibrate.hpp), and the profile file
// (bench_calibrate.hpp).
#include "bench_calibrate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include "bench_case.hpp"
#include "bench_model.hpp"
#include "calibrate.hpp"
#include "calibration_hooks.hpp"
#include "collmm/sim.hpp"
#include "host_issue.hpp"
#include "tuning.hpp"

namespace collmm {
namespace {

// Times one plan per rank of the job (built for every local rank) with a filter; one whole
// iteration first so that every buffer holds data. Returns the median of --iters timed runs (of the
// slowest rank each). For a series timed again because load made it not grow (`least`), it returns
// the least of 3 x --iters runs. On a loaded machine most runs of a small transfer wait a scheduler
// tick (4 ms here) for a peer, and more runs give the clean one more chances.
double time_plan(Executor& ex, const BenchOptions& o, const Problem& p, const PlanOptions& po, StepFilter filter,
                 bool least = false) {
  std::vector<Plan> plans;
  for (int r : ex.local_ranks()) plans.push_back(make_plan(p, po, r));
  ex.prepare(plans, o.dtype);
  upload_inputs(ex, plans, o.seed, o.dtype);  // the bench's random inputs: GEMMs on zeros run faster
  ex.run(StepFilter::all, false);
  const std::vector<double> us = iteration_times(ex, filter, o.warmup, least ? 3 * o.iters : o.iters);
  return least ? *std::min_element(us.begin(), us.end()) : median(us);
}

// The add steps' durations of the gemm_rs ring's comm alone (timestamps on), median over --iters
// runs and the local ranks' add steps, the largest over the processes; `bytes_out` gets the adds' size.
double time_adds(Executor& ex, const BenchOptions& o, const Problem& p, double& bytes_out) {
  std::vector<Plan> plans;
  for (int r : ex.local_ranks()) plans.push_back(make_plan(p, plan_options_of(o, Algo::ring), r));
  ex.prepare(plans, o.dtype);
  ex.run(StepFilter::all, false);
  for (int w = 0; w < o.warmup; ++w) ex.run(StepFilter::comm_only, false);
  std::vector<double> us;
  bytes_out = 0;
  for (int it = 0; it < std::max(1, o.iters); ++it) {
    const std::vector<RankRun> runs = ex.run(StepFilter::comm_only, true);
    for (size_t i = 0; i < runs.size(); ++i)
      for (size_t s = 0; s < plans[i].steps.size(); ++s) {
        const Step& st = plans[i].steps[s];
        if (st.kind != StepKind::add || s >= runs[i].steps.size() || runs[i].steps[s].end_us < 0) continue;
        us.push_back(runs[i].steps[s].end_us - runs[i].steps[s].start_us);
        const BufferSpec& b = plans[i].buffers.at(st.out.buf);
        bytes_out =
            std::max(bytes_out, double(st.out.rows) * double(b.cols) * double(dtype_size(ex.out_dtype(o.dtype))));
      }
  }
  const std::vector<double> all = ex.host().allgather(std::vector<double>{median(us), bytes_out});
  double slowest = 0;
  for (size_t i = 0; i < all.size(); i += 2)
    slowest = std::max(slowest, all[i]), bytes_out = std::max(bytes_out, all[i + 1]);
  return slowest;
}

// Host microseconds per device operation enqueued, and per GEMM launch. The host wall time of the
// issue (CalibrationHooks::last_issue_us; median of --iters runs) of every algorithm of the asked
// ops at the bench's shape is fitted by fit_issue against the GEMMs and other device operations it
// issued. Those are issue_ops, summed over the local ranks when one thread issues them all, else the
// most of one rank. The largest over the processes; {0, 0} when the backend does not enqueue its
// steps (cpu).
HostCost time_issue(Executor& ex, const BenchOptions& o, int world, std::ostream& out, bool printer) {
  CalibrationHooks* hooks = ex.calibration_hooks();
  if (!hooks) return {};  // the same backend on every process: all return here
  std::vector<IssueSample> samples;
  for (Op op : o.ops)
    for (Algo a : all_algos()) {
      const Problem p = problem_of(o, op, world);
      std::vector<Plan> plans;
      try {
        for (int r : ex.local_ranks()) plans.push_back(make_plan(p, plan_options_of(o, a), r));
      } catch (const UsageError&) {
        continue;  // an algorithm this shape does not allow
      }
      const IssueSample ops = issue_counts(plans, world, hooks->single_issuer());
      ex.prepare(plans, o.dtype);
      ex.run(StepFilter::all, false);
      if (!(hooks->last_issue_us() > 0)) return {};  // the same backend on every process: all return here
      for (int w = 0; w < o.warmup; ++w) ex.run(StepFilter::all, false);
      std::vector<double> us;
      for (int it = 0; it < std::max(1, o.iters); ++it) {
        ex.run(StepFilter::all, false);
        us.push_back(hooks->last_issue_us());
      }
      const double t = median(us);
      if (printer) {
        char buf[200];
        std::snprintf(
            buf, sizeof buf, "#   issue %s %-10s %6.0f GEMMs + %6.0f other operations  %10.1f us  %6.2f us each\n",
            to_string(op).c_str(), to_string(a).c_str(), ops.gemms, ops.others, t, t / (ops.gemms + ops.others));
        out << buf;
      }
      samples.push_back({ops.gemms, ops.others, t});
    }
  HostCost h = fit_issue(samples);
  const std::vector<double> all = ex.host().allgather(std::vector<double>{h.issue_us, h.gemm_issue_us});
  for (size_t i = 0; i < all.size(); i += 2)
    h.issue_us = std::max(h.issue_us, all[i]), h.gemm_issue_us = std::max(h.gemm_issue_us, all[i + 1]);
  return h;
}

// The device's share of a time measured for the plans of (p, po) with filter f while the host
// issued them step by step. The host's issue lead for them (issue_time_us: when the host has issued
// their last step) is taken off, as the simulator adds the issue itself. Where the host took
// (nearly) all of it, a tenth is kept so that the fits stay positive. Used only where the backend
// cannot replay graphs; with graphs the device's time is measured as it is.
double device_us(double measured, const Problem& p, const PlanOptions& po, StepFilter f, const HostCost& host) {
  return std::max(measured - issue_time_us(p, po, host, f), 0.1 * measured);
}

// GPUs: the bench's own sequential plan run for about 2 s before anything is timed, so that every
// time below is taken at the clocks and power of sustained load, as the bench's rows are. The
// count of runs is process 0's, so NCCL ranks stay together.
void settle(Executor& ex, const BenchOptions& o, int world) {
  if (ex.backend() != "cuda") return;
  std::vector<Plan> plans;
  for (int r : ex.local_ranks())
    plans.push_back(make_plan(problem_of(o, o.ops.front(), world), plan_options_of(o, Algo::sequential), r));
  ex.prepare(plans, o.dtype);
  upload_inputs(ex, plans, o.seed, o.dtype);
  const auto t0 = std::chrono::steady_clock::now();
  ex.run(StepFilter::all, false);
  const double once_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double runs = std::min(1000.0, std::ceil(2.0 / std::max(once_s, 1e-4)));
  const double n = ex.host().allgather(std::vector<double>{runs}).at(0);
  for (int i = 0; i < static_cast<int>(n); ++i) ex.run(StepFilter::all, false);
}

Problem gemm_rs_problem(int64_t m, int64_t n, int64_t k, int world) {
  Problem p;
  p.op = Op::gemm_rs;
  p.m = m, p.n = n, p.k = k;
  p.world = world;
  return p;
}

Problem ag_gemm_problem(int64_t m, int64_t n, int64_t k, int world, BLayout layout) {
  Problem p;
  p.op = Op::ag_gemm;
  p.m = m, p.n = n, p.k = k;
  p.world = world;
  p.b_layout = layout;
  return p;
}

// The contention factor is fitted on the ag_gemm ring of the asked shape.
Problem contention_problem(const BenchOptions& o, int world) {
  return ag_gemm_problem(o.m, o.n, o.k, world, o.b_layout);
}

// Every GEMM shape the asked cases (and --algo auto's candidates) run, over all ranks.
std::set<GemmShape> bench_gemm_shapes(const BenchOptions& o, int world) {
  std::set<GemmShape> shapes;
  for (Op op : o.ops) {
    const Problem p = problem_of(o, op, world);
    std::vector<PlanOptions> cases = auto_candidates(p);
    for (Algo a : algos_to_run(o)) cases.push_back(plan_options_of(o, op, a));
    for (const ListedConfig& c : o.configs) try {
        cases.push_back(plan_options_of(o, op, c));
      } catch (const UsageError&) {  // an entry this op does not take: Bench::validate says so
      }
    for (const PlanOptions& po : cases)
      for (int r = 0; r < world; ++r) {
        Plan plan;
        try {
          plan = make_plan(p, po, r);
        } catch (const UsageError&) {
          continue;  // a candidate this shape does not allow
        }
        const LocalShape ls = local_shape(p, r);
        // A GEMM is timed as every rank's GEMM of a sequential plan, which needs a row per rank: a
        // smaller one (a piece of a few rows) is timed at `world` rows, its cost the same to within
        // the launch's.
        for (const Step& s : plan.steps)
          if (s.kind == StepKind::gemm && s.a.rows > 0)
            shapes.insert({std::max<int64_t>(s.a.rows, world), ls.gemm_n, ls.gemm_k});
      }
  }
  return shapes;
}

std::string line(const char* format, double a, double b, double c = 0, double d = 0, double e = 0) {
  char buf[200];
  std::snprintf(buf, sizeof buf, format, a, b, c, d, e);
  return buf;
}

// Where comm and GEMMs share a rank's compute, the contention factor is fitted to the measured
// ag_gemm ring. That is cpu (MPI copies beside BLAS on the same cores) and ranks emulated on one GPU
// (one issuing thread: their copies run beside the other ranks' GEMMs). Elsewhere the base
// profile's SM contention figures stay.
bool fits_contention(const Executor& ex, const CalibrationSpec& spec) {
  return (ex.backend() == "cpu" || spec.shared_issuer) && spec.world > 1;
}

// What run_calibration measures, in the spec's terms, plus the ring the contention fit needs.
struct Measured {
  CalibrationTimes times;
  double ring_us = 0;  // the ag_gemm ring at the bench's shape (fits_contention only)
};

// The spec for the bench's shape: every GEMM shape its plans run (and the standard shapes no larger),
// message sizes up to its largest chunk, collective parts and adds at its own block sizes.
CalibrationSpec build_spec(Executor& ex, const BenchOptions& o) {
  const int world = ex.world_size();
  const size_t elem = dtype_size(o.dtype);
  CalibrationSpec spec;
  spec.base = profile_for(o, ex.gemm_library());
  spec.name = "calibrated-" + ex.backend() + "-P" + std::to_string(world);
  spec.dtype = o.dtype;
  CalibrationHooks* hooks = ex.calibration_hooks();
  spec.shared_issuer = hooks && hooks->single_issuer();
  std::set<GemmShape> shapes = bench_gemm_shapes(o, world);
  // The standard shapes fill the rate table between the bench's own, but none larger than the
  // largest GEMM a rank of the bench runs: on a 16-core CPU a 4096x8192x8192 sgemm takes 1.8 s.
  double most = 0;
  for (const GemmShape& s : shapes) most = std::max(most, double(s[0]) * double(s[1]) * double(s[2]));
  for (const GemmShape& s : calibration_shapes(std::max({o.m, o.n, o.k})))
    if (double(s[0]) * double(s[1]) * double(s[2]) <= most) shapes.insert(s);
  spec.gemm_shapes.assign(shapes.begin(), shapes.end());

  // The largest chunk a ring step of the bench moves: ag_gemm's A rows block, gemm_rs's C rows block.
  const double chunk = double(block_size(o.m, world, 0)) * double(std::max(o.k, o.n)) * double(elem);
  if (world > 1) spec.comm_bytes = calibration_sizes(std::max(16.0 * 1024 * 1024, chunk));
  spec.world = world;
  // The library's allgather / reduce-scatter: 64 KiB x 16^i up to the bench's own parts (ag_gemm's
  // A block, gemm_rs's C block), and those parts. One line (latency + bytes / bw) does not fit both
  // in-cache and out-of-cache sizes (measured here: reduce-scatter 3.0 ms at 2 MiB, 50 ms at
  // 16 MiB), so the fit stays in the bench's range. The adds: the gemm_rs ring's block of the
  // bench only, for the same reason (an add ran at 50 GB/s at 2 MiB, 16 GB/s at 16 MiB).
  const double ag_part = double(block_size(o.m, world, 0)) * double(o.k) * double(elem);
  const double rs_part = double(block_size(o.m, world, 0)) * double(o.n) * double(dtype_size(ex.out_dtype(o.dtype)));
  if (world > 1) {
    std::set<double> sizes{ag_part, rs_part};
    // At least 64 KiB and 1 MiB, so that noise cannot make a small shape's fit slope negative.
    for (double b : calibration_sizes(std::max({1024.0 * 1024, ag_part, rs_part}))) sizes.insert(b);
    spec.collective_bytes.assign(sizes.begin(), sizes.end());
    spec.add_bytes = {rs_part};
  }
  return spec;
}

// Times everything the spec asks for (src/sim/calibrate.hpp's measure over the timers below), the
// host's issue first: the timers take the host's share off what they measure. Process 0 prints
// each measured point.
Measured time_all(Executor& ex, const BenchOptions& o, const CalibrationSpec& spec, std::ostream& out, bool printer) {
  const int world = spec.world;
  const double cols = 256;  // the comm plans' K: a 256-element row
  settle(ex, o, world);
  HostCost measured_host = time_issue(ex, o, world, out, printer);
  const double issue_h = measured_host.issue_us;
  measured_host.shared = spec.shared_issuer;
  const HostCost host = issue_h > 0 ? measured_host : spec.base.host;
  // The device's own times: replayed graphs where the backend has them, else the step-by-step times
  // less the issue lead. A replay keeps the host's issue out of the way; taking the issue lead off a
  // step-by-step run misses how much of the device's work ran under the issue.
  CalibrationHooks* hooks = ex.calibration_hooks();
  const bool replay = issue_h > 0 && hooks->replay_graphs(true);
  if (printer && issue_h > 0)
    out << (replay ? line("#   the times below are the device's own: replayed CUDA graphs (host issue %.2f us per "
                          "operation apart)\n",
                          issue_h, 0)
                   : line("#   the times below are the device's share: measured less the host's issue lead at %.2f us "
                          "per operation\n",
                          issue_h, 0));
  bool again = false;  // in a series' extra round (round_hook below): its runs' least time
  auto net = [&](double t, const Problem& p, const PlanOptions& po, StepFilter f) {
    return replay ? t : device_us(t, p, po, f, host);
  };

  // A GEMM shape as every rank runs it at once: the sequential ag_gemm plan's GEMMs.
  auto gemm_timer = [&](int64_t m, int64_t n, int64_t k) {
    const Problem p = ag_gemm_problem(m, n * world, k, world, o.b_layout);
    const PlanOptions po = plan_options_of(o, Algo::sequential);
    const double us = net(time_plan(ex, o, p, po, StepFilter::gemm_only), p, po, StepFilter::gemm_only);
    if (printer)
      out << line("#   gemm %6.0f x %6.0f x %6.0f  %12.1f us  %8.4f TFLOP/s\n", double(m), double(n), double(k), us,
                  2.0 * m * n * k / (us * 1e6));
    return us;
  };
  auto comm_timer = [&](double bytes) {
    const int64_t rows = std::max<int64_t>(1, int64_t(bytes / (cols * double(dtype_size(o.dtype)))));
    const Problem p = ag_gemm_problem(rows * world, world, int64_t(cols), world, BLayout::kn);
    const PlanOptions po = plan_options_of(o, Algo::ring);
    const double us =
        net(time_plan(ex, o, p, po, StepFilter::comm_only, again), p, po, StepFilter::comm_only) / (world - 1);
    if (printer) out << line("#   sendrecv step %12.0f bytes  %12.1f us  %8.2f GB/s\n", bytes, us, bytes / (us * 1e3));
    return us;
  };
  // The sequential plans' comm alone: ag_gemm's one allgather of [rows, 256] parts, gemm_rs's one
  // reduce-scatter of [rows, 256] parts (its K = P: one column of A per rank).
  auto collective_timer = [&](StepKind kind, double bytes) {
    const double out_elem = double(dtype_size(kind == StepKind::allgather ? o.dtype : ex.out_dtype(o.dtype)));
    const int64_t rows = std::max<int64_t>(1, int64_t(bytes / (cols * out_elem)));
    const Problem p = kind == StepKind::allgather
                          ? ag_gemm_problem(rows * world, world, int64_t(cols), world, BLayout::kn)
                          : gemm_rs_problem(rows * world, int64_t(cols), world, world);
    const PlanOptions po = plan_options_of(o, Algo::sequential);
    const double us = net(time_plan(ex, o, p, po, StepFilter::comm_only, again), p, po, StepFilter::comm_only);
    if (printer) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "#   %-14s %12.0f bytes per part  %12.1f us  %8.2f GB/s per ring step\n",
                    to_string(kind).c_str(), bytes, us, bytes * (world - 1) / (us * 1e3));
      out << buf;
    }
    return us;
  };
  auto add_timer = [&](double bytes) {
    const int64_t rows = std::max<int64_t>(1, int64_t(bytes / (cols * double(dtype_size(ex.out_dtype(o.dtype))))));
    double moved = 0;
    const double us = time_adds(ex, o, gemm_rs_problem(rows * world, int64_t(cols), world, world), moved);
    if (printer)
      out << line("#   add step %12.0f bytes  %12.1f us  %8.2f GB/s (3 x bytes moved)\n", moved, us,
                  3 * moved / (us * 1e3));
    return us;
  };
  auto issue_timer = [&] { return measured_host; };
  // A series timed again (its times did not grow with the size): its runs' least time, said so.
  auto round_hook = [&](const char* what, int round) {
    again = round > 1;
    if (printer && again)
      out << "#   " << what << " times do not grow with the size (load on the machine?): timed again, round " << round
          << " of " << kCalibrationRounds << ", each size keeping its least time\n";
  };
  Measured m;
  m.times = measure(spec, gemm_timer, comm_timer, collective_timer, add_timer, issue_timer, round_hook);
  again = false;
  if (replay) hooks->replay_graphs(o.backend.graph);  // the ring below is timed the bench's own way
  if (fits_contention(ex, spec))
    m.ring_us = time_plan(ex, o, contention_problem(o, world), plan_options_of(o, Algo::ring), StepFilter::all);
  return m;
}

// The profile: src/sim/calibrate.hpp's fits, then the contention factor where fits_contention.
Profile fit(const Executor& ex, const BenchOptions& o, const CalibrationSpec& spec, const Measured& m) {
  Profile prof = fit_profile(spec, m.times);
  if (!fits_contention(ex, spec)) return prof;
  const Problem p = contention_problem(o, spec.world);
  const double s = fit_contention(prof, p, plan_options_of(o, Algo::ring), o.dtype, m.ring_us);
  prof.contention = {true, s, s, prof.contention.launch_order};
  prof.notes += " Contention fitted: GEMM and comm " + line("%.3f", s, 0) +
                "x slower while the other runs on the rank (ag_gemm ring M=" + std::to_string(p.m) +
                " N=" + std::to_string(p.n) + " K=" + std::to_string(p.k) + " measured " + line("%.1f", m.ring_us, 0) +
                " us).";
  return prof;
}

void print_header(std::ostream& out, const Executor& ex, const BenchOptions& o, const CalibrationSpec& spec) {
  out << "# collmm-bench --calibrate: backend " << ex.backend() << ", " << spec.world << " ranks, "
      << to_string(o.dtype) << ", base profile '" << spec.base.name << "', " << spec.gemm_shapes.size()
      << " GEMM shapes, " << spec.comm_bytes.size() << " message sizes, median of " << o.iters << " runs each\n";
  if (spec.world == 1) out << "# one rank: no link to time; the link figures are the base profile's\n";
}

void print_fits(std::ostream& out, const Executor& ex, const CalibrationSpec& spec, const Measured& m,
                const Profile& prof) {
  if (prof.host.issue_us > 0)
    out << line("# host issue: %.2f us per device operation, %.2f us per GEMM", prof.host.issue_us,
                issue_cost_us(prof.host, StepKind::gemm, 1))
        << (prof.host.shared ? ", one host thread issues every rank's steps\n" : ", one host thread per rank\n");
  if (spec.world > 1) {
    out << line("# link fit: %.2f GB/s, latency %.1f us\n", prof.links.intra_gbps, prof.links.intra_latency_us);
    out << line("# allgather fit: %.2f GB/s, latency %.1f us per ring step; reduce-scatter: %.2f GB/s, %.1f us\n",
                prof.allgather.gbps, prof.allgather.latency_us, prof.reduce_scatter.gbps,
                prof.reduce_scatter.latency_us);
    out << line("# memory (adds): %.2f GB/s\n", prof.memory_gbps, 0);
  }
  if (fits_contention(ex, spec))
    out << line("# contention fit: ag_gemm ring measured %.1f us -> GEMM and comm %.3fx slower while the other runs\n",
                m.ring_us, prof.contention.gemm_slowdown);
}

}  // namespace

Profile run_calibration(Executor& ex, const BenchOptions& o, std::ostream& out) {
  const bool printer = ex.host().proc() == 0;
  const CalibrationSpec spec = build_spec(ex, o);
  if (printer) print_header(out, ex, o, spec);
  const Measured measured = time_all(ex, o, spec, out, printer);
  const Profile prof = fit(ex, o, spec, measured);
  if (printer) {
    print_fits(out, ex, spec, measured, prof);
    save_profile(prof, o.calibrate_path);
    out << "# profile written: " << o.calibrate_path << " (use it with --profile " << o.calibrate_path << ")\n";
  }
  return prof;
}

}  // namespace collmm
