// test_bench_inputs.cpp: every bad input is refused before any work, on every rank,
// with a message saying what is wrong and exit code 2: sizes that overflow, a run the memory cannot
// hold, --gemm-lanes out of bounds (from the flag or a tuning-cache entry), output paths that cannot
// be written, --calibrate with too few runs; collmm-sim's bounds and size suffixes; the table's E
// and its note where ranks share cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "collmm/sizes.hpp"
#include "collmm/types.hpp"
#include "harness.hpp"

using namespace collmm_cli_test;
using nlohmann::json;

namespace {

struct BadInput {
  const char* args;
  const char* message;
};

class BenchBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(BenchBadInput, IsRefusedOnEveryRankBeforeAnyWork) {
  const BadInput& b = GetParam();
  const std::string dir = fresh_dir("bad_input");
  std::ofstream(dir + "/lanes.json")
      << R"({"entries":[{"op":"ag_gemm","m":64,"n":64,"k":64,"world_size":2,"dtype":"f32","algo":"ring",)"
      << R"("gemm_lanes":100000,"time_us":5}]})";
  std::ofstream(dir + "/corrupt.json") << R"({"entries": [{"op": "ag_gemm", "m")";
  std::filesystem::create_directories(dir + "/t-gemm_rs-ring.svg");  // one case's --timeline file
  std::string args = b.args;
  for (size_t at; (at = args.find("DIR")) != std::string::npos;) args.replace(at, 3, dir);
  if (args.find("-i ") == std::string::npos) args += " -i 2";
  const CommandResult r = run_command(mpirun(2) + " " + bench() + " -w 1 " + args, 60);
  std::string message = b.message;
  for (size_t at; (at = message.find("DIR")) != std::string::npos;) message.replace(at, 3, dir);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_EQ(count_of(r.output, message), 2u) << "expected '" << message << "' from both ranks in:\n" << r.output;
  EXPECT_EQ(r.output.find("# collmm-bench"), std::string::npos) << "no table may start:\n" << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BenchBadInput,
    ::testing::Values(
        BadInput{"-m 4611686018427387904 -n 8 -k 8", "-m: size '4611686018427387904': more than 1099511627776"},
        BadInput{"-m 1T -n 1T -k 8", "M*N = 1099511627776*1099511627776 elements is more than"},
        BadInput{"-m 8Q", "-m: size '8Q': unknown suffix"},
        BadInput{"-m 64K -n 64K -k 64K --dtype f64", "of host memory per process"},
        BadInput{"--gemm-lanes 100000", "--gemm-lanes: Value 100000 not in range 1 to 64"},
        BadInput{"-m 64 -n 64 -k 64 --algo auto --tune-cache DIR/lanes.json",
                 "tuning cache 'DIR/lanes.json': entry 0: gemm_lanes 100000 is not 1..64"},
        BadInput{"-m 64 -n 64 -k 64 --algo ring --tune-cache DIR/corrupt.json",
                 "tuning cache 'DIR/corrupt.json' is not valid JSON"},
        BadInput{"-m 64 -n 64 -k 64 --json /nonexistent/r.json", "--json '/nonexistent/r.json': cannot be written"},
        BadInput{"-m 64 -n 64 -k 64 --trace DIR", "--trace 'DIR': cannot be written (it is a directory)"},
        BadInput{"-m 64 -n 64 -k 64 --timeline /nonexistent/t.svg",
                 "--timeline '/nonexistent/t.svg': cannot be written"},
        BadInput{"-m 64 -n 64 -k 64 --op all --algo all --timeline DIR/t.svg",
                 "--timeline 'DIR/t-gemm_rs-ring.svg': cannot be written (it is a directory)"},
        BadInput{"-m 64 -n 64 -k 64 --tune-cache /nonexistent/c.json",
                 "--tune-cache '/nonexistent/c.json': cannot be written"},
        BadInput{"-m 64 -n 64 -k 64 --calibrate /nonexistent/p.json -i 20",
                 "--calibrate '/nonexistent/p.json': cannot be written"},
        BadInput{"-m 64 -n 64 -k 64 --save /dev/null/x", "--save: cannot create directory '/dev/null/x'"},
        BadInput{"-m 64 -n 64 -k 64 --calibrate DIR/p.json", "--calibrate needs -i >= 10 (got 2)"},
        BadInput{"-m 64 -n 64 -k 64 --algo ring,rign,auto", "--algo: unknown algorithm 'rign'"}));

// An existing output file is probed (before the memory check refuses this run) without being truncated.
TEST(BenchInputs, AProbedOutputKeepsItsContentUntilWritten) {
  const std::string dir = fresh_dir("probe");
  std::ofstream(dir + "/r.json") << "old";
  const CommandResult r =
      run_command(mpirun(2) + " " + bench() + " -m 64K -n 64K -k 64K --dtype f64 -w 1 --json " + dir + "/r.json", 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_EQ(read_file(dir + "/r.json"), "old");
}

TEST(ParseSize, SuffixesAndBounds) {
  using collmm::parse_size;
  EXPECT_EQ(parse_size("8192"), 8192);
  EXPECT_EQ(parse_size("8K"), 8192);
  EXPECT_EQ(parse_size("8k"), 8192);
  EXPECT_EQ(parse_size("1M"), 1048576);
  EXPECT_EQ(parse_size("2G"), int64_t(2) << 30);
  EXPECT_EQ(parse_size("1T"), collmm::kMaxSize);
  for (const char* bad : {"", "K", "-1", " 8", "8 ", "8KB", "2T", "99999999999999999999", "1.5K", "0x10"})
    EXPECT_THROW(parse_size(bad), collmm::UsageError) << "'" << bad << "'";
}

struct SimCase {
  const char* args;
  int rc;
  const char* message;
};

class SimInput : public ::testing::TestWithParam<SimCase> {};

TEST_P(SimInput, BoundedWithAMessage) {
  const SimCase& c = GetParam();
  const CommandResult r = run_command(std::string(COLLMM_SIM) + " " + c.args, 60);
  EXPECT_EQ(r.rc, c.rc) << r.output;
  EXPECT_NE(r.output.find(c.message), std::string::npos) << "expected '" << c.message << "' in:\n" << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SimInput,
    ::testing::Values(SimCase{"-P 100000", 2, "--world: Value 100000 not in range 1 to 1024"},
                      SimCase{"-P 0", 2, "--world: Value 0 not in range 1 to 1024"},
                      SimCase{"-m 1M -n 8 -k 8 -P 2 --algo ring --profile cpu-2core", 0, "1048576"},
                      SimCase{"-m 4611686018427387904", 2, "more than 1099511627776"},
                      SimCase{"-m 1T -n 1T -k 1T", 2, "M*K = 1099511627776*1099511627776 elements is more than"},
                      SimCase{"--gemm-lanes 100000", 2, "--gemm-lanes: Value 100000 not in range 1 to 64"},
                      SimCase{"-P 1024 --algo all", 2,
                              "ag_gemm pipelined at P = 1024 would simulate about 8.39e+06 steps, more than 4000000: "
                              "give --stages 3 or fewer"},
                      SimCase{"--algo x", 2,
                              "--algo: unknown algorithm 'x' (expected one of: sequential, pipelined, ring, bidir, "
                              "all, auto, or an algorithm with options of its own"},
                      SimCase{"--timeline-ranks -1", 2, "--timeline-ranks: must be an integer >= 0 (got -1)"},
                      SimCase{"-P 2 --algo sequential --pieces 2", 2,
                              "--pieces 2 applies to ring and bidir only, and the --algo list runs none of them"},
                      SimCase{"-P 2 --op gemm_rs --algo ring:merge2", 2,
                              "--algo ring:merge2: gemm_rs's ring does not take these options"}));

// collmm-sim takes collmm-bench's --algo list and names its rows (table, JSON "label") and their
// --timeline files as collmm-bench does; output paths are checked before anything is simulated,
// refused as collmm-bench refuses them (exit 2), and no temporary file is named.
TEST(SimAlgoList, RowsAndFilesAreNamedAsTheBenchNamesThem) {
  const std::string dir = fresh_dir("sim_algo_list");
  const std::string sim = std::string(COLLMM_SIM) + " -P 4 -m 1024 -n 1024 -k 1024 --op ag_gemm --profile cpu-2core" +
                          " --algo ring,bidir:pieces4h,auto";
  const CommandResult r = run_command(sim + " --timeline " + dir + "/t.svg --json " + dir + "/p.json", 60);
  ASSERT_EQ(r.rc, 0) << r.output;
  const json rows = json::parse(read_file(dir + "/p.json")).at("results");
  ASSERT_EQ(rows.size(), 3u) << r.output;
  EXPECT_EQ(rows[0].at("label"), "ring");
  EXPECT_EQ(rows[1].at("label"), "bidir:pieces4h");
  EXPECT_EQ(rows[2].at("label").get<std::string>().rfind("auto:", 0), 0u) << rows[2];
  for (const json& row : rows) {
    std::string label = row.at("label"), file = label;
    for (char& c : file)
      if (c == ':') c = '-';
    EXPECT_NE(r.output.find(" " + label + " "), std::string::npos) << label << " in:\n" << r.output;
    EXPECT_TRUE(std::filesystem::exists(dir + "/t-ag_gemm-" + file + ".svg")) << file;
  }
  const CommandResult missing = run_command(sim + " --timeline " + dir + "/missing/t.svg", 60);
  EXPECT_EQ(missing.rc, 2) << missing.output;
  EXPECT_NE(missing.output.find("collmm-sim: --timeline '" + dir +
                                "/missing/t-ag_gemm-ring.svg': cannot be written (No such file or directory); nothing "
                                "was simulated\n"),
            std::string::npos)
      << missing.output;
  EXPECT_EQ(missing.output.find("# collmm-sim"), std::string::npos) << "no table may start:\n" << missing.output;
  EXPECT_EQ(missing.output.find(".tmp."), std::string::npos) << missing.output;
}

// gemm_ar's ring in waves is an --algo entry, ring:waves2, as the ring's row under --waves 2 is
// labelled; an op whose ring has no waves refuses it. The old spellings (ring:stages2, --stages 2 on
// gemm_ar's ring) still run, each with a deprecation message.
TEST(SimAlgoList, TheRingInWavesIsAnEntry) {
  const std::string dir = fresh_dir("sim_waves");
  const std::string sim = std::string(COLLMM_SIM) + " -P 4 -m 1024 -n 1024 -k 1024 --profile cpu-2core";
  const CommandResult r = run_command(sim + " --op gemm_ar --algo ring,ring:waves2 --json " + dir + "/w.json", 60);
  ASSERT_EQ(r.rc, 0) << r.output;
  const json rows = json::parse(read_file(dir + "/w.json")).at("results");
  ASSERT_EQ(rows.size(), 2u) << r.output;
  EXPECT_EQ(rows[0].at("label"), "ring");
  EXPECT_EQ(rows[0].at("waves"), 0);
  EXPECT_EQ(rows[1].at("label"), "ring:waves2");
  EXPECT_EQ(rows[1].at("waves"), 2);
  EXPECT_EQ(r.output.find("deprecated"), std::string::npos) << r.output;
  for (const char* flag : {"--waves 2", "--stages 2"}) {
    const CommandResult f = run_command(sim + " --op gemm_ar --algo ring " + flag, 60);
    ASSERT_EQ(f.rc, 0) << f.output;
    EXPECT_NE(f.output.find(" ring:waves2 "), std::string::npos) << f.output;
    EXPECT_EQ(
        f.output.find("--stages 2 as the waves of gemm_ar's ring is deprecated: give --waves 2") != std::string::npos,
        std::string(flag) == "--stages 2")
        << f.output;
  }
  const CommandResult old = run_command(sim + " --op gemm_ar --algo ring:stages2", 60);
  ASSERT_EQ(old.rc, 0) << old.output;
  EXPECT_NE(old.output.find(" ring:waves2 "), std::string::npos) << old.output;
  EXPECT_NE(old.output.find("'ring:stages2' is deprecated: the ring's waves are written 'ring:waves2'"),
            std::string::npos)
      << old.output;
  const CommandResult rs = run_command(sim + " --op gemm_rs --algo ring:waves2", 60);
  EXPECT_EQ(rs.rc, 2) << rs.output;
  EXPECT_NE(rs.output.find("--algo ring:waves2: gemm_rs's ring does not take these options"), std::string::npos)
      << rs.output;
}

// The README's demo on a small machine: more ranks than cores. The header says the times are no
// overlap figures, and no E outside [0, 1] is printed as a number.
TEST(BenchInputs, RanksSharingCoresAreNoOverlapFigures) {
  const CommandResult r = run_command(mpirun(4) + " " + bench() + " --threads 1 -m 256 -n 256 -k 256 -w 1 -i 3", 120);
  ASSERT_EQ(r.rc, 0) << r.output;
  const bool shared = std::thread::hardware_concurrency() < 4;
  EXPECT_EQ(r.output.find("ranks take turns on the cores") != std::string::npos, shared) << r.output;
  std::istringstream lines(r.output);
  int rows = 0;
  size_t e_column = 0;  // E's place, read off the header line
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::vector<std::string> c;
    for (std::string x; cells >> x;) c.push_back(x);
    if (!c.empty() && c[0] == "#" && c.size() > 1 && c[1] == "op") {
      e_column = std::find(c.begin(), c.end(), "E") - c.begin() - 1;  // the "#" is no column
      continue;
    }
    if (e_column == 0 || c.size() <= e_column || (c[0] != "ag_gemm" && c[0] != "gemm_rs" && c[0] != "gemm_ar"))
      continue;
    ++rows;
    const std::string& e = c[e_column];
    if (e == "N/A" || e == "<0" || e == ">1") continue;
    const double v = std::stod(e);
    EXPECT_TRUE(v >= 0 && v <= 1) << "E = " << e << " in: " << line;
  }
  EXPECT_EQ(rows, 12) << r.output;
}

// Jobs sharing one tuning cache: four at once, each recording its 12 rows (3 ops x 4 algorithms);
// the cache ends up with all 48 and parses.
TEST(BenchInputs, ConcurrentJobsShareOneTuningCache) {
  const std::string dir = fresh_dir("shared_cache");
  const std::string cache = dir + "/tune.json";
  std::string jobs;
  // Each job's mpirun its own session directory (TMPDIR, short: Open MPI puts sockets there):
  // launchers started at the same moment race to create one /tmp/ompi.<host>.<uid> ("File exists").
  for (int m : {64, 72, 80, 88})
    jobs += "(t=$(mktemp -d) && TMPDIR=$t " + mpirun(1) + " " + bench() + " -m " + std::to_string(m) +
            " -n 32 -k 32 -w 0 -i 1 --tune-cache " + cache + " > " + dir + "/job" + std::to_string(m) +
            ".txt 2>&1; rm -rf $t) & ";
  const CommandResult r = run_command("sh -c '" + jobs + "wait'", 120);
  EXPECT_EQ(r.rc, 0) << r.output;
  for (int m : {64, 72, 80, 88}) {
    const std::string out = read_file(dir + "/job" + std::to_string(m) + ".txt");
    EXPECT_NE(out.find("12 measured rows recorded in " + cache), std::string::npos) << out;
  }
  const std::string text = read_file(cache);
  EXPECT_EQ(count_of(text, "\"time_us\""), 48u) << text;
  for (int m : {64, 72, 80, 88}) EXPECT_EQ(count_of(text, "\"m\": " + std::to_string(m) + ","), 12u) << "M=" << m;
}

}  // namespace
