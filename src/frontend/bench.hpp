// bench.hpp: collmm-bench without its command line: check the options on every process, then run
// every (op, algo) case and report. tools/bench/main.cpp parses the command line into
// BenchOptions and turns what this throws into messages and exit codes.
#pragma once

#include <ostream>
#include <vector>

#include "bench_case.hpp"
#include "bench_model.hpp"
#include "bench_options.hpp"

namespace collmm {

class Bench {
 public:
  Bench(Executor& executor, BenchOptions options);

  // Collective, before any data moves: the options agree on every process (or UsageError "ranks
  // disagree on ..."), and every case can run (sizes split, dtype supported, iterations >= 1, the
  // profile loads). Every process throws the same UsageError, so each can print it and exit
  // without hanging the others. With --algo auto, this is where each op's pick is made.
  void validate();

  // Collective: runs every case. Process 0 prints the table to `out` (a row as each case ends; the
  // --algo auto choice before its row) and writes the --json, --trace and --timeline files and the
  // --tune-cache records; every process writes its own ranks' --save files.
  std::vector<CaseResult> run(std::ostream& out);

 private:
  // --algo auto, before its first row: prints the pick and its alternatives, times the best few
  // candidates (--auto-measure) and takes the fastest into picks_ (and into auto_timed_).
  void measure_auto(size_t op_i, bool printer, std::ostream& out);
  // One op's cases, every round, its rows (merged over the rounds) appended to `results`.
  void run_op(size_t op_i, bool printer, std::ostream& out, std::vector<CaseResult>& results);

  Executor& ex_;
  BenchOptions o_;
  std::vector<AutoPick> picks_;          // --algo auto: one per op of o_.ops
  std::vector<TuningEntry> auto_timed_;  // --algo auto: the candidates it timed, for --tune-cache
  std::string save_staging_;             // --save: the staging directory inside DIR (save_dir.hpp)
  bool predict_ = false;                 // --profile given
  Profile profile_;
};

}  // namespace collmm
