// main.cpp: collmm-bench. Parses the command line, starts the backend, checks the options on every
// process, runs the cases; turns errors into messages and exit codes:
//   0 all ran (and, with --check, every output was right)   1 a wrong output or a runtime failure
//   2 a usage error: bad option, ranks that disagree, a size the algorithm cannot split.
// --calibrate FILE measures the cost model's inputs instead of running the cases.
// A failure on one process after the options were checked ends the whole job (HostComm::abort),
// so no rank waits forever on a partner that is gone.
#include <iostream>
#include <string>

#include "backends.hpp"
#include "bench.hpp"
#include "bench_calibrate.hpp"
#include "cli.hpp"
#include "quote.hpp"
#include "report.hpp"

namespace {

// One write per message, so that lines of several ranks do not interleave.
// A message's control characters are escaped (one_line): only collmm's own newlines end lines.
void say(const std::string& message) { std::cerr << ("collmm-bench: " + message + "\n") << std::flush; }

}  // namespace

int main(int argc, char** argv) {
  using namespace collmm;
  CLI::App app{
      "collmm-bench: AllGather+GEMM (ag_gemm), GEMM+ReduceScatter (gemm_rs) and GEMM+AllReduce "
      "(gemm_ar) with overlapped communication, timed and checked.\n"
      "Run under mpirun: mpirun -np P collmm-bench --op all --algo all --check",
      "collmm-bench"};
  BenchOptions options;
  try {
    options = parse_bench_cli(argc, argv, app);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    say(one_line(e.what()) + "\nRun with --help for more information.");
    return 2;
  } catch (const UsageError& e) {
    say(one_line(e.what()));
    return 2;
  }

  std::unique_ptr<Executor> executor;
  try {
    executor = make_executor(options.backend, argc, argv);
  } catch (const UsageError& e) {
    say(one_line(e.what()));
    return 2;
  } catch (const std::exception& e) {
    say("cannot start the " + to_string(options.backend.backend) + " backend: " + one_line(e.what()));
    return 1;
  }

  const int proc = executor->host().proc();
  try {
    Bench bench(*executor, options);
    try {
      bench.validate();
    } catch (const UsageError& e) {
      // Thrown alike on every process: each says it, and none leaves before all have said it
      // (mpirun ends the job as soon as one process exits non-zero).
      say(one_line(e.what()));
      executor->host().barrier();
      return 2;
    }
    if (!options.calibrate_path.empty()) {
      executor->host().set_phase("the calibration (--calibrate)");
      run_calibration(*executor, options, std::cout);
      return 0;
    }
    const std::vector<CaseResult> results = bench.run(std::cout);
    return options.check && total_wrong(results) > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    say("rank " + std::to_string(proc) + ": " + one_line(e.what()));
    executor->host().abort(1);
  }
}
