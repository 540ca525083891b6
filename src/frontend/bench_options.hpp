// bench_options.hpp: everything collmm-bench is told, as a struct of enums (the CLI in
// tools/bench fills it), and the canonical key=value list of what every process must agree on.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "algo_entries.hpp"
#include "collmm/backend_options.hpp"
#include "measured_choice.hpp"

namespace collmm {

struct BenchOptions {
  std::vector<Op> ops = all_ops();       // --op NAME|all
  std::vector<Algo> algos;               // --algo NAME,...|all (empty: all_algos(); auto alone: none)
  std::vector<ListedConfig> configs;     // --algo entries with their own options (ring:pieces4h)
  bool algo_auto = false;                // --algo auto: the model's (or cache's) pick, row "auto:<algo>"
  MeasureSettings auto_measure;          // --auto-measure on|off: auto times its best few candidates
  int64_t m = 1024, n = 1024, k = 1024;  // global sizes
  BLayout b_layout = BLayout::kn;
  Dtype dtype = Dtype::f32;
  PlanOptions plan;  // stages (0: the algorithm's default), post, gemm_lanes; algo per case
  int warmup = 5, iters = 20;
  int rounds = 1;  // --rounds R: every case of an op run R times in turn; each row the median of its rounds
  bool check = false;
  bool gemm_rate = false;  // --gemm-rate: also time each case's GEMMs alone (CaseResult::gemm_busy_us)
  uint64_t seed = 1;
  std::string json_path;        // --json FILE (process 0 writes)
  std::string trace_path;       // --trace FILE (process 0 writes all ranks' events)
  std::string save_dir;         // --save DIR (every process writes its ranks' .npy files)
  std::string timeline_path;    // --timeline FILE.svg (process 0 writes; FILE-<op>-<algo>.svg per case when several)
  std::string profile;          // --profile NAME|FILE: predicted time beside the measured one ("" : none)
  std::string tune_cache_path;  // --tune-cache FILE: read by --algo auto, every measured row recorded into it
  std::string calibrate_path;   // --calibrate FILE: measure the cost model's inputs, write the profile, exit
  BackendOptions backend;
  // Hidden, for tests of the job's teardown: this rank kills itself (SIGKILL) or stops (SIGSTOP:
  // a hang the others' --timeout must end) in phase debug_phase. The phases: "init" (as the backend
  // starts: BackendOptions::debug_fail_rank, a failure that throws, and debug_hang_rank), "setup"
  // (before its first plan's agreement), "run" (before its first timed run) or "output" (before the
  // results are written).
  int debug_die_rank = -1, debug_hang_rank = -1;
  std::string debug_phase = "run";
};

// The options that must be the same on every process, as (key, value) pairs in a fixed order.
// Paths are left out (only process 0 writes the JSON, the trace and the timelines; each process
// saves its own ranks); whether a trace is taken is in (it keeps the ranks' command lines alike).
std::vector<std::pair<std::string, std::string>> agreement_keys(const BenchOptions&);

// The Problem of one op on `world` ranks.
Problem problem_of(const BenchOptions&, Op op, int world);

// The algorithms to run, in table order (none for --algo auto alone: its pick is chosen in
// Bench::validate, bench_model.hpp).
std::vector<Algo> algos_to_run(const BenchOptions&);

// The plan options of one listed algorithm: --stages applies to pipelined only (0 elsewhere).
PlanOptions plan_options_of(const BenchOptions&, Algo);  // without --merge and --pieces
// The same for one op: every option kept where it applies (options_for).
PlanOptions plan_options_of(const BenchOptions&, Op, Algo);
// The plan options of a listed configuration for one op (config_options, algo_entries.hpp: the
// other options from --stages, --post, ...); UsageError where the op's algorithm does not take its
// merge or pieces.
PlanOptions plan_options_of(const BenchOptions&, Op, const ListedConfig&);
// The rows of one op (entry_rows, algo_entries.hpp): each algorithm of algos_to_run, then each
// listed configuration; auto's row is not among them.
std::vector<EntryRow> entry_rows(const BenchOptions&, Op);

}  // namespace collmm
