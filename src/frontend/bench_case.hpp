// bench_case.hpp: one (op, algo) case of collmm-bench on every local rank. Its plans, buffers,
// inputs and timed iterations (median over iterations of the slowest rank); the standalone GEMM and
// comm times; the timeline and measured overlap of the median iteration; the checked iteration and
// the saved .npy files.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "bench_options.hpp"
#include "collmm/timeline.hpp"
#include "data.hpp"
#include "executor.hpp"
#include "median.hpp"
#include "overlap.hpp"

namespace collmm {

// What one case measured; all figures are over every rank of the job (every process has them).
struct CaseResult {
  PlanOptions plan;       // the case's plan options (algo, stages as asked, post, gemm lanes)
  std::string label;      // the table's algo cell, the JSON's "label": algo_label ("ring", "ring:pieces4"),
                          // or "auto:ring" for the --algo auto pick
  std::string chosen_by;  // --algo auto: "model" or "measured" (the tuning cache); "" otherwise
  Problem problem;        // its op, sizes and world
  Dtype dtype = Dtype::f32;
  int steps = 1;          // steps the schedule has (1 + its largest step index)
  double time_us = 0;     // median over iterations of the slowest rank
  double t_gemm_us = -1;  // only its GEMMs / only its comm (measured for the sequential case)
  double t_comm_us = -1;
  // Derived from the op's sequential case (see derive_figures); NaN where undefined.
  double tflops = 0;      // per rank: 2 M N K / P / time
  double speedup = 0;     // T_sequential / T
  double efficiency = 0;  // (T_sequential - T) / min(t_gemm, t_comm)
  bool checked = false;
  int64_t wrong = 0;       // summed over ranks (C, and ag_gemm's gathered A)
  double max_rel_err = 0;  // max over ranks
  // The timed iteration whose slowest rank is the median (the one time_us reports; for an even
  // count the one nearest it), every rank's step times, gathered on every process.
  Timeline timeline;
  Overlap overlap;  // measure_overlap(timeline): hidden comm / comm per rank
  double predicted_us = std::numeric_limits<double>::quiet_NaN();  // --profile: the simulated time
  // --gemm-rate: this plan's GEMMs alone (filter gemm_only, median), and the GEMM steps' busy time
  // in the median iteration beside the comm (mean over ranks). Their ratio is the GEMMs' rate while
  // transfers run, relative to alone (1: the comm costs the GEMMs nothing).
  double t_gemm_plan_us = std::numeric_limits<double>::quiet_NaN();
  double gemm_busy_us = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> round_us;  // --rounds R > 1: the time of each round (time_us is their median)
  // Where a host thread enqueues the steps (cuda): the host wall time of that issue in the timed
  // iterations (median of the slowest process's, CalibrationHooks::last_issue_us), and the device
  // operations one iteration issues (issue_counts). A time_us close to issue_us is the host's, not
  // the device's. NaN / 0 on backends whose threads run the steps themselves (cpu) and with --graph
  // (the issue is the graph's launch). The counts are those of the process that issues the most;
  // issue_shared: one thread issues every local rank's steps (the cost model's host.shared).
  double issue_us = std::numeric_limits<double>::quiet_NaN();
  double issue_gemms = 0, issue_others = 0;
  bool issue_shared = false;
};

// The expected outputs of one op on this process's ranks, computed once and shared by its cases.
struct Reference {
  std::vector<HostMatrix> c;  // per local rank
  HostMatrix gathered_a;      // ag_gemm only
};
Reference make_reference(const Problem&, const std::vector<int>& local_ranks, uint64_t seed, Dtype);

// What to do beside the timing.
struct CaseWork {
  bool alone = false;                // also time the GEMMs alone and the comm alone (sequential case)
  const Reference* check = nullptr;  // poison, run once and compare against this
  std::string save_dir;              // write each local rank's A, B, C (and gathered) as .npy
};

// Collective over the job: every process runs it with the same arguments. `label` names the row
// (default: algo_label of the options).
// Every local rank's A and B: the bench's seeded random inputs (real data: GEMMs on zeros run
// faster than on real numbers, so timings are taken on these).
void upload_inputs(Executor& ex, const std::vector<Plan>& plans, uint64_t seed, Dtype dtype);

CaseResult run_case(Executor&, const BenchOptions&, Op, const PlanOptions&, const CaseWork&,
                    const std::string& label = "");

// The --debug-die-rank / --debug-hang-rank hooks: when `phase` is the option's debug_phase and this
// process drives the named rank, it kills itself (SIGKILL) or stops (SIGSTOP).
void inject_fault(const BenchOptions&, const std::vector<int>& local_ranks, const std::string& phase);

// warmup + iters iterations with this filter; the slowest rank of the job in each timed one
// (collective), and their median. Used by the cases and by --calibrate.
std::vector<double> iteration_times(Executor&, StepFilter, int warmup, int iters);
double time_iterations(Executor&, StepFilter, int warmup, int iters);

// One row from the rounds of one case (--rounds). The round whose time is nearest the median gives
// the timeline and overlap. The times (and t_gemm, t_comm, the GEMM rate) are the medians over the
// rounds; a check counts the wrong elements of every round. One round is returned as it is.
CaseResult merge_rounds(const std::vector<CaseResult>& rounds);

// Fills t_gemm_us, t_comm_us (from the sequential case), tflops, speedup and efficiency.
void derive_figures(CaseResult& result, const CaseResult& sequential);

}  // namespace collmm
