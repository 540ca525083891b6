// test_bench_errors.cpp: collmm-bench on bad input: ranks that disagree, impossible
// options, a rank that dies and a rank that hangs. Each job must end in bounded time with a
// non-zero exit and a message naming the problem.
#include <gtest/gtest.h>

#include "harness.hpp"

using namespace collmm_cli_test;

namespace {

const std::string kSmall = " -n 16 -k 16 -w 1 -i 2";

TEST(BenchErrors, RanksThatDisagreeAreNamedOnEveryRank) {
  const CommandResult r =
      run_command(mpirun(1) + " " + bench() + " -m 64" + kSmall + " : -np 1 " + bench() + " -m 48" + kSmall, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_EQ(count_of(r.output, "ranks disagree on M: rank 0 has 64, rank 1 has 48"), 2u) << r.output;
  EXPECT_EQ(r.output.find("# collmm-bench"), std::string::npos) << "no table may start:\n" << r.output;
}

TEST(BenchErrors, EveryDifferingKeyIsNamed) {
  const CommandResult r = run_command(mpirun(1) + " " + bench() + " -m 64 --dtype f32" + kSmall + " : -np 1 " +
                                          bench() + " -m 64 --dtype f64 --algo ring" + kSmall,
                                      60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("dtype: rank 0 has f32, rank 1 has f64"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("algo: rank 0 has sequential,pipelined,ring,bidir, rank 1 has ring"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("on M:"), std::string::npos) << r.output;
}

struct BadOption {
  const char* args;
  int np;
  const char* message;
};

class BenchBadOption : public ::testing::TestWithParam<BadOption> {};

TEST_P(BenchBadOption, IsAUsageErrorWithAMessage) {
  const BadOption& b = GetParam();
  const CommandResult r = run_command(mpirun(b.np) + " " + bench() + " " + b.args, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find(b.message), std::string::npos) << "expected '" << b.message << "' in:\n" << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BenchBadOption,
    ::testing::Values(BadOption{"--stages 0 -m 16 -n 16 -k 16", 2, "--stages: must be an integer >= 1 (got 0)"},
                      BadOption{"-m 2 -n 16 -k 16", 4, "M=2 is smaller than the 4 ranks"},
                      BadOption{"--dtype foo", 2, "--dtype: unknown dtype 'foo'"},
                      BadOption{"--algo foo", 2, "--algo: unknown algorithm 'foo'"},
                      BadOption{"--op foo", 2, "--op: unknown op 'foo'"},
                      BadOption{"--algo pipelined --stages 9 -m 16 -n 16 -k 16", 2, "--stages 9 cannot split M=16"},
                      BadOption{"--iters 0", 2, "--iters: must be an integer 1..1000000"},
                      BadOption{"--bogus", 2, "--bogus"},
                      BadOption{"--algo ring:pieces4:merge2", 2, "write it as 'ring:merge2:pieces4'"},
                      BadOption{"--algo ring:stages2", 2, "unknown option 'stages2'"},
                      BadOption{"--op all --algo ring:merge2 -m 16 -n 16 -k 16", 2,
                                "--algo ring:merge2: gemm_rs's ring does not take these options"},
                      BadOption{"--op gemm_rs --algo ring:pieces9h -m 64 -n 16 -k 16", 2,
                                "gemm_rs ring:pieces9h: --pieces 9 with --piece-sizes halving: at most 8"},
                      BadOption{"--rounds 0", 2, "--rounds: must be an integer 1..100"},
                      BadOption{"--op ag_gemm --pieces 4 --algo ring,ring:pieces4 -m 64 -n 16 -k 16", 2,
                                "--algo ring:pieces4: ag_gemm runs this plan already as ring:pieces4"}));

TEST(BenchErrors, DtypeTheBackendLacksIsAUsageError) {
  const CommandResult r = run_command(mpirun(2) + " " + bench() + " --dtype fp8 -m 16" + kSmall, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("backend has no fp8 GEMM"), std::string::npos) << r.output;
}

// A failure on one rank only, after the options were checked (here: --save into a path that cannot
// be a directory, on rank 1): that rank says so and the whole job ends.
TEST(BenchErrors, AnErrorOnOneRankEndsTheJob) {
  const std::string args = " --op ag_gemm --algo ring -m 16" + kSmall + " --timeout 20";
  const CommandResult r =
      run_command(mpirun(1) + " " + bench() + args + " : -np 1 " + bench() + args + " --save /dev/null/collmm", 90);
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_NE(r.rc, 124) << "the job had to be stopped from outside:\n" << r.output;
  EXPECT_NE(r.output.find("rank 1: --save: cannot create directory /dev/null/collmm"), std::string::npos) << r.output;
}

TEST(BenchErrors, AKilledRankEndsTheJob) {
  const CommandResult r =
      run_command(mpirun(4) + " " + bench() + " -m 64 -n 64 -k 64 --timeout 20 --debug-die-rank 1", 90);
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_NE(r.rc, 124) << "the job had to be stopped from outside:\n" << r.output;
}

TEST(BenchErrors, AHungRankEndsTheJobAfterTheTimeout) {
  const CommandResult r =
      run_command(mpirun(3) + " " + bench() + " -m 64 -n 64 -k 64 --timeout 3 --debug-hang-rank 2", 90);
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_NE(r.rc, 124) << "the job had to be stopped from outside:\n" << r.output;
  EXPECT_NE(r.output.find("timed out after 3 s"), std::string::npos) << r.output;
}

}  // namespace
