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

// gemm_ar beside another op, size, dtype and algorithm: every key named on both ranks, no table.
TEST(BenchErrors, GemmArRanksThatDisagreeAreRefusedOnEveryRank) {
  const CommandResult r = run_command(mpirun(1) + " " + bench() + " --op gemm_ar -m 64 -n 16 --dtype f32 --algo ring" +
                                          " -k 16 -w 1 -i 2 : -np 1 " + bench() +
                                          " --op gemm_rs -m 48 -n 24 --dtype bf16 --algo bidir -k 16 -w 1 -i 2",
                                      60);
  EXPECT_EQ(r.rc, 2) << r.output;
  for (const char* key : {"op: rank 0 has gemm_ar, rank 1 has gemm_rs", "M: rank 0 has 64, rank 1 has 48",
                          "N: rank 0 has 16, rank 1 has 24", "dtype: rank 0 has f32, rank 1 has bf16",
                          "algo: rank 0 has ring, rank 1 has bidir"})
    EXPECT_EQ(count_of(r.output, key), 2u) << key << "\n" << r.output;
  EXPECT_EQ(r.output.find("# collmm-bench"), std::string::npos) << "no table may start:\n" << r.output;
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
                      BadOption{"--algo pipelined --stages 9 -m 16 -n 16 -k 16", 2, "stages 9 cannot split M=16"},
                      BadOption{"--iters 0", 2, "--iters: must be an integer 1..1000000"},
                      BadOption{"--bogus", 2, "--bogus"},
                      BadOption{"--algo ring:pieces4:merge2", 2, "write it as 'ring:merge2:pieces4'"},
                      BadOption{"--op ag_gemm --algo ring:waves2 -m 16 -n 16 -k 16", 2,
                                "--algo ring:waves2: ag_gemm's ring does not take these options"},
                      // gemm_ar's waves within the field list's range (each wave's P steps cost time),
                      // in the old spelling too
                      BadOption{"--op gemm_ar --algo ring:stages65 -m 256 -n 4 -k 4", 2, "stages takes a count 1..64"},
                      BadOption{"--op gemm_ar --algo ring:waves65 -m 256 -n 4 -k 4", 2, "waves takes a count 1..64"},
                      BadOption{"--op gemm_ar --algo ring --waves 65 -m 256 -n 4 -k 4", 2, "waves 65 is not 0..64"},
                      BadOption{"--op all --algo ring:merge2 -m 16 -n 16 -k 16", 2,
                                "--algo ring:merge2: gemm_rs's ring does not take these options"},
                      BadOption{"--op gemm_rs --algo ring:pieces9h -m 64 -n 16 -k 16", 2,
                                "gemm_rs ring:pieces9h: pieces 9 of halving size: at most 8"},
                      BadOption{"--rounds 0", 2, "--rounds: must be an integer 1..100"},
                      BadOption{"--op ag_gemm --pieces 4 --algo ring,ring:pieces4 -m 64 -n 16 -k 16", 2,
                                "--algo ring:pieces4: ag_gemm runs this plan already as ring:pieces4"}));

// Refused on every rank before any data moves (no table starts), exit 2, in one sentence each: a
// --pieces or --piece-sizes that no algorithm of the --algo list takes (sequential and pipelined
// refuse pieces, auto chooses its own), a cuda option with the cpu backend, sizes wrong for every
// case (named by no op or algorithm) and a split wrong for one op's every algorithm (named by the op).
TEST(BenchErrors, OptionsNoCaseTakesAreRefusedOnEveryRank) {
  struct Refused {
    const char* args;
    const char* line;  // from "collmm-bench: " to the end of the line
  };
  for (const Refused& c :
       {Refused{"--algo sequential,pipelined --pieces 2 -m 16",
                "--pieces 2 applies to ring and bidir only, and the --algo list runs none of them (it has sequential, "
                "pipelined): add one of them to --algo, or leave --pieces 2 out (auto and entries such as ring:pieces4 "
                "choose their own pieces)\n"},
        Refused{"--algo auto --piece-sizes halving -m 16",
                "--piece-sizes halving applies to ring and bidir only, and "
                "the --algo list runs none of them (it has auto alone)"},
        Refused{"--algo ring:pieces2 --pieces 2 -m 16",
                "--pieces 2 applies to ring and bidir only, and the --algo "
                "list runs none of them (it has sequential)"},
        Refused{"--backend cpu --world 4 --transport host -m 16",
                "--transport and --world apply to --backend cuda only: the cpu backend runs one rank per MPI process "
                "(mpirun -np P) and has no use for them\n"},
        Refused{"--graph -m 16", "--graph applies to --backend cuda only"},
        Refused{"-m 0", "M must be 1..1099511627776 (got 0).\n"},
        Refused{"--op gemm_rs -m 1",
                "gemm_rs: M=1 is smaller than the 2 ranks: every rank needs at least one row of C.\n"}}) {
    const CommandResult r = run_command(mpirun(2) + " " + bench() + " " + c.args + kSmall, 60);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.output;
    EXPECT_EQ(count_of(r.output, std::string("collmm-bench: ") + c.line), 2u) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("# collmm-bench"), std::string::npos) << "no table may start:\n" << r.output;
  }
  // --algo all runs --pieces on the rings (their rows named so) and sequential and pipelined without it.
  const CommandResult all =
      run_command(mpirun(2) + " " + bench() + " --op ag_gemm --algo all --pieces 2 -m 16" + kSmall, 60);
  ASSERT_EQ(all.rc, 0) << all.output;
  for (const char* row : {" sequential ", " pipelined ", " ring:pieces2 ", " bidir:pieces2 "})
    EXPECT_NE(all.output.find(row), std::string::npos) << row << " in:\n" << all.output;
}

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
  EXPECT_NE(r.output.find("rank 1: --save: cannot create directory '/dev/null/collmm"), std::string::npos) << r.output;
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
