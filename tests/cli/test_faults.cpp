// test_faults.cpp: faults injected into running collmm-bench jobs: a rank killed
// (SIGKILL) or stopped (SIGSTOP) in setup, in the timed runs and in the output phase, and a rank
// that fails (throws) or stops while its backend starts (init). Every job must
// end by itself within --timeout + 5 s of the fault (plus the job's start), with a message naming
// the rank, and the ranks left waiting must nap, not spin a core. The figures are printed
// ("fault: ...") for docs/reliability.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "harness.hpp"

using namespace collmm_cli_test;

namespace {

constexpr int kTimeout = 3;     // --timeout of the faulty jobs
constexpr double kStartup = 6;  // mpirun's start and the run up to the fault, on a loaded 2-core machine

struct Fault {
  const char* kind;     // die (SIGKILL; in init a thrown failure) | hang (SIGSTOP)
  const char* phase;    // init | setup | run | output
  const char* message;  // what the survivors (or mpirun) must say
};

// The largest "(this wait took X CPU s)" of the survivors' messages; -1 if none.
double most_wait_cpu_s(const std::string& output) {
  double most = -1;
  const std::string key = "this wait took ";
  for (size_t at = output.find(key); at != std::string::npos; at = output.find(key, at + 1))
    most = std::max(most, std::stod(output.substr(at + key.size())));
  return most;
}

class BenchFault : public ::testing::TestWithParam<Fault> {};

TEST_P(BenchFault, EndsTheJobInBoundedTimeNamingTheRank) {
  const Fault& f = GetParam();
  const CommandResult r =
      run_command(mpirun(3) + " " + bench() + " --op ag_gemm -m 64 -n 64 -k 64 -w 1 -i 2 --timeout " +
                      std::to_string(kTimeout) + " --debug-" + f.kind + "-rank 1 --debug-phase " + f.phase,
                  60);
  const double cpu = most_wait_cpu_s(r.output);
  std::printf("fault: %s in %s: job gone after %.2f s (--timeout %d), exit %d, a survivor's wait took %.2f CPU s\n",
              f.kind, f.phase, r.seconds, kTimeout, r.rc, cpu);
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_NE(r.rc, 124) << "the job had to be stopped from outside:\n" << r.output;
  EXPECT_LT(r.seconds, kTimeout + 5 + kStartup) << r.output;
  EXPECT_NE(r.output.find(f.message), std::string::npos) << "expected '" << f.message << "' in:\n" << r.output;
  // A survivor waits kTimeout seconds: spinning would cost about kTimeout CPU seconds.
  if (std::string(f.kind) == "hang") {
    EXPECT_GE(cpu, 0) << "no wait's CPU time in:\n" << r.output;
    EXPECT_LT(cpu, 0.25 * kTimeout) << "the waiting ranks spin:\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    PerPhase, BenchFault,
    ::testing::Values(
        Fault{"die", "init", "rank 1 failing on purpose (--debug-die-rank, --debug-phase init)"},
        Fault{"hang", "init",
              "no answer from rank 1 within 3 s (--timeout) in setup: the ranks' agreement on the options"},
        Fault{"die", "setup", "process rank 1"}, Fault{"die", "run", "process rank 1"},
        Fault{"die", "output", "process rank 1"},
        Fault{
            "hang", "setup",
            "no answer from rank 1 within 3 s (--timeout) in the setup of ag_gemm sequential (the ranks' agreement on "
            "its plan)"},
        Fault{"hang", "run", "the run of ag_gemm sequential timed out after 3 s"},
        Fault{"hang", "output", "no answer from rank 1 within 3 s (--timeout) in the end of the job"}),
    [](const ::testing::TestParamInfo<Fault>& info) { return std::string(info.param.kind) + "_" + info.param.phase; });

// The output phase of a job whose rank 1 stops there: process 0 still writes its results, and the
// job ends within --timeout + 15 s of the stop, with --save (whose files wait for every rank) and
// with --tune-cache (process 0's own work on the cache extends the wait by 180 s only while it
// works: it took 197.6 s before).
class BenchFaultOutput : public ::testing::TestWithParam<const char*> {};

TEST_P(BenchFaultOutput, ResultsAreWrittenBeforeTheJobEnds) {
  const std::string extra = GetParam();
  const std::string dir = fresh_dir(std::string("fault_output_") + (extra.empty() ? "plain" : extra.substr(2)));
  const std::string more = extra.empty() ? "" : " " + extra + " " + dir + (extra == "--save" ? "/npy" : "/cache.json");
  const CommandResult r = run_command(mpirun(2) + " " + bench() +
                                          " --op ag_gemm --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 3 "
                                          "--debug-hang-rank 1 --debug-phase output --json " +
                                          dir + "/r.json" + more,
                                      240);
  std::printf("fault: rank 1 stopped in output%s: job gone after %.2f s, exit %d\n", more.c_str(), r.seconds, r.rc);
  EXPECT_EQ(job_exit_code(r), 3) << r.output;
  EXPECT_LT(r.seconds, kTimeout + 15 + kStartup) << r.output;
  EXPECT_NE(read_file(dir + "/r.json").find("\"algo\": \"ring\""), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Outputs, BenchFaultOutput, ::testing::Values("", "--save", "--tune-cache"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           const std::string p = info.param;
                           return p.empty() ? std::string("json") : p.substr(2) == "save" ? "save" : "tune_cache";
                         });

}  // namespace
