// bench.hpp: collmm-bench without its command line: check the options on every process, then run
// every (op, algo) case and report. tools/bench/main.cpp parses the command line into
// BenchOptions and turns what this throws into messages and exit codes.
#pragma once

#include <ostream>
#include <vector>

#include "bench_case.hpp"
#include "bench_options.hpp"

namespace collmm {

class Bench {
 public:
  Bench(Executor& executor, BenchOptions options);

  // Collective, before any data moves: the options agree on every process (or UsageError "ranks
  // disagree on ..."), and every case can run (sizes split, dtype supported, iterations >= 1). Every
  // process throws the same UsageError, so each can print it and exit without hanging the others.
  void validate();

  // Collective: runs every case. Process 0 prints the table to `out` (a row as each case ends) and
  // writes the --json and --trace files; every process writes its own ranks' --save files.
  std::vector<CaseResult> run(std::ostream& out);

 private:
  Executor& ex_;
  BenchOptions o_;
};

}  // namespace collmm
