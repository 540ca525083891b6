// test_bounds.cpp: every phase of a job bounded, every output atomic, one set of limits.
// - a rank stopped before MPI_Init or inside MPI_Finalize: the others end the job by --timeout;
//   one stopped after its peers exited: mpirun --timeout ends it;
// - a rank stopped before its first point-to-point transfer: the others nap while they wait
//   (their process's CPU over the wait is printed, under 10% of a core);
// - a run slower than --timeout on this rank's own GEMM is reported as such, not as a dead peer;
// - process 0's local work (a large tuning cache, another job's lock on it) is not a peer's hang;
// - a process killed between an output's open and its rename leaves the previous file whole
//   (--json, --trace, --timeline, --tune-cache, --calibrate's profile, --save's files);
// - the same limits on the command line and in the tuning cache, profile fields range-checked;
// - collmm-sim refuses before simulating what would take minutes or GBs; a run under ulimit -v
//   is refused with the limit named.
// The figures are printed ("bound: ...") for docs/reliability.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness.hpp"

using namespace collmm_cli_test;

namespace {

constexpr int kTimeout = 3;
constexpr double kStartup = 6;  // mpirun's start on a loaded 2-core machine

const std::string kJob = " --op ag_gemm -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 3";

bool has(const CommandResult& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

// The largest "(this run took X CPU s)" of the survivors' messages; -1 if none.
double most_run_cpu_s(const std::string& output) {
  double most = -1;
  const std::string key = "this run took ";
  for (size_t at = output.find(key); at != std::string::npos; at = output.find(key, at + 1))
    most = std::max(most, std::stod(output.substr(at + key.size())));
  return most;
}

struct Stop {
  const char* point;    // --debug-phase
  const char* message;  // what the survivors say
};

class BoundedStop : public ::testing::TestWithParam<Stop> {};

TEST_P(BoundedStop, TheOthersEndTheJobByTheTimeout) {
  const Stop& s = GetParam();
  const CommandResult r =
      run_command(mpirun(3) + " " + bench() + kJob + " --algo ring --debug-hang-rank 1 --debug-phase " + s.point, 60);
  std::printf("bound: rank 1 stopped at %s: job gone after %.2f s (--timeout %d), exit %d\n", s.point, r.seconds,
              kTimeout, r.rc);
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_NE(r.rc, 124) << "the job had to be stopped from outside:\n" << r.output;
  EXPECT_LT(r.seconds, kTimeout + 5 + kStartup) << r.output;
  EXPECT_TRUE(has(r, s.message)) << "expected '" << s.message << "' in:\n" << r.output;
}

INSTANTIATE_TEST_SUITE_P(Points, BoundedStop,
                         ::testing::Values(Stop{"mpi_init", "MPI_Init did not finish within 3 s (--timeout)"},
                                           Stop{"mpi_finalize", "MPI_Finalize did not finish within 3 s (--timeout)"},
                                           Stop{"sendrecv", "timed out after 3 s: no answer from a peer"}),
                         [](const ::testing::TestParamInfo<Stop>& info) { return std::string(info.param.point); });

// A rank stopped after its peers have exited (its process stops itself once collmm-bench is done)
// has nobody left to notice: only the launcher can end the job, with Open MPI's own limit
// (mpirun --timeout, as the README says and scripts/build-env.sh's mpirun_cmd passes).
TEST(BoundedStop, ARankStoppedAfterItsPeersExitedIsEndedByTheLauncher) {
  const std::string run = bench() + kJob + " --algo ring";
  const CommandResult r =
      run_command(std::string(COLLMM_MPIEXEC) + " --oversubscribe --allow-run-as-root --timeout 6 -np 1 " + run +
                      " : -np 1 sh -c '" + run + " >/dev/null; kill -STOP $$'",
                  60);
  std::printf("bound: rank 1 stopped after its peers exited, mpirun --timeout 6: job gone after %.2f s, exit %d\n",
              r.seconds, r.rc);
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_NE(r.rc, 124) << "the job had to be stopped from outside:\n" << r.output;
  EXPECT_LT(r.seconds, 6 + kStartup) << r.output;
  EXPECT_TRUE(has(r, "time limit for job execution has been reached")) << r.output;
}

// The ranks left waiting inside a transfer nap: their whole process (every lane) uses under 10%
// of one core over the --timeout they wait.
TEST(BoundedWait, RanksWaitingForAStoppedPeerNap) {
  const CommandResult r =
      run_command(mpirun(3) + " " + bench() + kJob + " --algo ring --debug-hang-rank 1 --debug-phase sendrecv", 60);
  const double cpu = most_run_cpu_s(r.output);
  std::printf("bound: held sendrecv: a waiting rank's process used %.2f CPU s over its %d s wait (%.1f%% of a core)\n",
              cpu, kTimeout, 100 * cpu / kTimeout);
  EXPECT_GE(cpu, 0) << r.output;
  EXPECT_LT(cpu, 0.1 * kTimeout) << r.output;
}

// A run whose own GEMM outlives --timeout: said as such on every rank, never as a dead peer.
// Whether the ranks that timed out were all inside GEMMs (the watchdog's "inside step" lines name
// no transfer, and no rank waited in the barrier that starts the run).
bool stuck_in_gemms_only(const std::string& output) {
  std::istringstream lines(output);
  bool gemm = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("in the barrier that starts the run") != std::string::npos) return false;
    if (line.find("inside step") == std::string::npos) continue;
    for (const char* comm : {"allgather", "reduce_scatter", "sendrecv", " recv ", " send "})
      if (line.find(comm) != std::string::npos) return false;
    gemm = gemm || line.find("gemm") != std::string::npos;
  }
  return gemm;
}

TEST(BoundedWait, AnOwnStepSlowerThanTheTimeoutIsNotAPeersFault) {
  // The condition of this test is measured, not assumed: every rank that timed out was inside its
  // own GEMM. On a loaded machine a rank may instead still be in the all-gather or the barrier
  // before it, because its peer came late (rightly reported as a peer's lateness); the job is then
  // run again with twice the bound. The GEMM (137 GFLOP per rank on one thread) grows with the load.
  CommandResult r;
  int timeout = 1;
  for (;; timeout *= 2) {
    r = run_command(mpirun(2) + " " + bench() +
                        " --op ag_gemm --algo sequential -m 8192 -n 8192 -k 2048 -w 0 -i 1 --threads 1 --timeout " +
                        std::to_string(timeout),
                    180);
    if (stuck_in_gemms_only(r.output) || r.rc == 0 || timeout >= 4) break;
  }
  std::printf("bound: an own GEMM longer than --timeout %d: exit %d after %.2f s\n", timeout, r.rc, r.seconds);
  if (!stuck_in_gemms_only(r.output))  // a GEMM faster than the bound, or ranks too far apart to test
    GTEST_SKIP() << "no run had every timed-out rank inside its GEMM (the machine's load):\n" << r.output;
  EXPECT_EQ(job_exit_code(r), 3) << r.output;
  EXPECT_TRUE(has(r, "this rank's own work is slower than --timeout")) << r.output;
  EXPECT_FALSE(has(r, "no answer from a peer")) << r.output;
}

// Process 0's local work (parsing a large tuning cache, waiting for another job's lock on it)
// outlives --timeout 1 while the other ranks wait: the job succeeds, nobody is called dead.
TEST(BoundedWait, ProcessZerosLocalWorkIsNotAPeersHang) {
  const std::string dir = fresh_dir("local_work");
  const std::string big = dir + "/big.json";
  {
    std::ofstream out(big);
    out << "{\"entries\": [";
    for (int i = 0; i < 200000; ++i)
      out << (i ? "," : "") << R"({"op": "gemm_rs", "m": )" << 64 + i
          << R"(, "n": 64, "k": 64, "world_size": 3, "dtype": "f32", "algo": "ring", "time_us": 10})";
    out << "]}\n";
  }
  const double megabytes = double(std::filesystem::file_size(big)) / 1e6;
  // --timeout 3: a margin for the ranks' lateness on a loaded machine; the lock is held longer.
  const std::string job = " --op ag_gemm -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 3 --algo auto --auto-measure off";
  CommandResult r = run_command(mpirun(3) + " " + bench() + job + " --tune-cache " + big, 120);
  std::printf("bound: a %.0f MB tuning cache read and written by process 0 under --timeout 3: exit %d after %.2f s\n",
              megabytes, r.rc, r.seconds);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(has(r, "# tuning cache: 1 measured row recorded in " + big)) << r.output;

  const std::string cache = dir + "/small.json";
  r = run_command("sh -c 'flock " + cache + ".lock sleep 10 & sleep 0.2; " + mpirun(3) + " " + bench() + job +
                      " --tune-cache " + cache + "; rc=$?; wait; exit $rc'",
                  120);
  std::printf("bound: the cache's lock held by another job for 10 s under --timeout 3: exit %d after %.2f s\n", r.rc,
              r.seconds);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_GE(r.seconds, 9.5) << "the lock was not waited for:\n" << r.output;
  EXPECT_TRUE(has(r, "# tuning cache: 1 measured row recorded in " + cache)) << r.output;
}

// Process 0 killed between opening an output under its temporary name and renaming it into place
// (the fault points of write_file_atomically: "write", before its bytes; "rename", after them and
// their flush): the previous file is still there, byte for byte, and nothing but the temporary
// (empty, or whole) and the tuning cache's lock file is left beside it. A run without the kill
// then replaces the file, so the check can fail.
struct Output {
  const char* option;  // the output's option
  const char* job;     // the rest of the job
  int ranks = 2;       // --calibrate: one rank, whose profile (GEMMs alone) no load can make refused
};

// What a previous run left: a valid file of the kind where the job reads it (the tuning cache) or
// where it is easy to make (a profile), else any text.
std::string previous_output(const std::string& option, const std::string& dir) {
  if (option == "--tune-cache")
    return R"({"entries": [{"op": "gemm_rs", "m": 128, "n": 64, "k": 64, "world_size": 2, "dtype": "f32", )"
           R"("algo": "ring", "time_us": 10}]})"
           "\n";
  if (option == "--calibrate") {
    const std::string saved = dir + "/saved-profile.json";
    const CommandResult r =
        run_command(std::string(COLLMM_SIM) + " -P 2 --profile cpu-2core --save-profile " + saved, 30);
    if (r.rc != 0) throw std::runtime_error("collmm-sim --save-profile failed:\n" + r.output);
    const std::string text = read_file(saved);
    std::filesystem::remove(saved);
    return text;
  }
  return "the previous run's output\n";
}

class AtomicOutput : public ::testing::TestWithParam<Output> {};

TEST_P(AtomicOutput, AKillBeforeTheRenameLeavesTheOldFile) {
  const std::string option = GetParam().option;
  const std::string name = "out";
  const std::string job = mpirun(GetParam().ranks) + " " + bench() + " " + GetParam().job + " " + option + " ";
  std::string path, previous;
  for (const std::string point : {"write", "rename"}) {
    const std::string dir = fresh_dir("atomic" + option + "-" + point);
    path = dir + "/" + name;
    previous = previous_output(option, dir);
    { std::ofstream(path, std::ios::binary) << previous; }
    const CommandResult r = run_command(job + path + " --debug-die-rank 0 --debug-phase " + point, 120);
    const bool intact = read_file(path) == previous;
    std::printf("bound: %s, process 0 killed before the %s: exit %d after %.2f s, old file %s\n", option.c_str(),
                point.c_str(), r.rc, r.seconds, intact ? "intact" : "LOST");
    EXPECT_EQ(r.rc, 137) << r.output;
    EXPECT_TRUE(has(r, "exited on signal 9")) << "process 0 was not killed before the " << point << ":\n" << r.output;
    EXPECT_TRUE(intact) << option << " " << point << "\n" << r.output;
    int temporaries = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string file = entry.path().filename().string();
      if (file == name || (option == "--tune-cache" && file == name + ".lock")) continue;
      EXPECT_EQ(file.rfind(name + ".tmp.", 0), 0u) << "unexpected " << file;
      // Killed before the write: nothing in it; before the rename: the whole new file.
      const uintmax_t bytes = std::filesystem::file_size(entry.path());
      EXPECT_TRUE(point == "write" ? bytes == 0 : bytes > 0) << file << ": " << bytes << " bytes";
      ++temporaries;
    }
    EXPECT_EQ(temporaries, 1) << "the kill was not between the temporary's open and its rename";
  }
  const CommandResult r = run_command(job + path, 120);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(read_file(path), previous) << "a run without the kill did not replace " << option << "'s file";
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, AtomicOutput,
    ::testing::Values(Output{"--json", "--op ag_gemm --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 3"},
                      Output{"--trace", "--op ag_gemm --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 3"},
                      Output{"--timeline", "--op ag_gemm --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 3"},
                      Output{"--tune-cache", "--op ag_gemm --algo ring -m 64 -n 64 -k 64 -w 1 -i 2 --timeout 3"},
                      Output{"--calibrate", "--op ag_gemm --algo ring -m 48 -n 40 -k 36 -w 1 -i 10 --threads 1", 1}),
    [](const ::testing::TestParamInfo<Output>& info) {
      std::string n = info.param.option + 2;
      std::replace(n.begin(), n.end(), '-', '_');
      return n;
    });

// --save fills a staging directory inside DIR and moves its files in at the end: a killed run
// leaves DIR's files as they were (its own in the hidden staging directory), a finished one adds
// its files beside what DIR holds.
TEST(AtomicOutputs, AKilledSaveLeavesDirAsItWas) {
  const std::string dir = fresh_dir("atomic_save") + "/npy";
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/old.npy") << "old"; }
  CommandResult r = run_command(
      mpirun(2) + " " + bench() + kJob + " --algo ring --save " + dir + " --debug-die-rank 1 --debug-phase write", 60);
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_TRUE(has(r, "exited on signal 9")) << "process 1 was not killed at its first write:\n" << r.output;
  EXPECT_EQ(read_file(dir + "/old.npy"), "old");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "old.npy" || (name.rfind(".collmm-save-", 0) == 0 && entry.is_directory())) << name;
  }
  r = run_command(mpirun(2) + " " + bench() + kJob + " --algo ring --save " + dir, 60);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(read_file(dir + "/old.npy"), "old");
  EXPECT_TRUE(std::filesystem::exists(dir + "/ag_gemm-ring-rank1-A.npy"));
}

// Counts beyond their range: a clear message, exit 2, before MPI is up.
TEST(OneSetOfLimits, CountsOutOfRangeAreRefusedByName) {
  for (const std::string args : {"--threads 1000000", "--seed -1", "--seed 99999999999999999999999", "-i 99999999999",
                                 "-w 99999999999", "--timeout 0"}) {
    const CommandResult r = run_command(bench() + " " + args, 30);
    std::printf("bound: %s: exit %d\n", args.c_str(), r.rc);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r, "must be an integer")) << args << "\n" << r.output;
  }
}

// What the command line refuses the cache refuses, and the other way round: a run with
// --merge 2000 records nothing; an entry that cannot apply to its own shape is refused as an entry,
// by collmm-bench and by collmm-sim.
TEST(OneSetOfLimits, ABadRunCannotPoisonTheTuningCache) {
  const std::string dir = fresh_dir("poison");
  const std::string cache = dir + "/cache.json";
  CommandResult r =
      run_command(mpirun(2) + " " + bench() + kJob + " --algo ring --merge 2000 --tune-cache " + cache, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "merge 2000 is not 1..1024")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(cache));
  {
    std::ofstream(cache) << R"({"entries": [{"op": "gemm_rs", "m": 64, "n": 64, "k": 64, "world_size": 2,
      "dtype": "f32", "algo": "ring", "merge": 4, "time_us": 10}]})";
  }
  r = run_command(
      mpirun(2) + " " + bench() + " --op gemm_rs -m 64 -n 64 -k 64 -w 1 -i 2 --algo auto --tune-cache " + cache, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "tuning cache '" + cache + "': entry 0: its plan options cannot apply")) << r.output;
  // collmm-sim: the same limit on its command line, the same refusal of the entry.
  const std::string sim = COLLMM_SIM;
  r = run_command(sim + " -P 2 -m 64 -n 64 -k 64 --op ag_gemm --algo ring --merge 2000", 30);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "merge 2000 is not 1..1024")) << r.output;
  r = run_command(sim + " -P 2 -m 64 -n 64 -k 64 --op gemm_rs --algo auto --tune-cache " + cache, 30);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "tuning cache '" + cache + "': entry 0: its plan options cannot apply")) << r.output;
}

// Every profile field out of range: refused when the profile is read, exit 2, naming the option,
// the path and the field; a directory is named as one.
TEST(OneSetOfLimits, ProfileFieldsAreRangeCheckedBeforeAnyWork) {
  const std::string dir = fresh_dir("profile_ranges");
  const std::string good = dir + "/good.json";
  ASSERT_EQ(run_command(std::string(COLLMM_SIM) + " -P 2 --save-profile " + good + " --profile cpu-2core", 30).rc, 0);
  const std::string text = read_file(good);
  struct Bad {
    const char* field;  // as the message names it
    const char* from;   // text in the good profile
    const char* to;
  };
  for (const Bad& b : {Bad{"links.intra_gbps", "\"intra_gbps\": 4.0", "\"intra_gbps\": 0.0"},
                       Bad{"links.intra_latency_us", "\"intra_latency_us\": 2.0", "\"intra_latency_us\": -1.0"},
                       Bad{"memory_gbps", "\"memory_gbps\": 8.0", "\"memory_gbps\": -8.0"},
                       Bad{"gemm.overhead_us", "\"overhead_us\": 2.0", "\"overhead_us\": -2.0"},
                       Bad{"gemm.peak_tflops.f32", "\"f32\": 0.06", "\"f32\": 0.0"}}) {
    const size_t at = text.find(b.from);
    ASSERT_NE(at, std::string::npos) << b.from << " in\n" << text;
    const std::string path = dir + "/bad-" + b.field + ".json";
    { std::ofstream(path) << text.substr(0, at) + b.to + text.substr(at + std::string(b.from).size()); }
    const CommandResult r = run_command(mpirun(2) + " " + bench() + kJob + " --algo ring --profile " + path, 60);
    EXPECT_EQ(r.rc, 2) << b.field << "\n" << r.output;
    EXPECT_TRUE(has(r, std::string("--profile: profile '") + path + "': " + b.field)) << r.output;
  }
  const CommandResult r = run_command(mpirun(2) + " " + bench() + kJob + " --algo ring --profile " + dir, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "' cannot be read (it is a directory)")) << r.output;
}

// A field the model reads left out (the run's dtype's GEMM peak: it failed after the sequential
// case, naming the profile's name), a field it does not know and a key given twice: refused before
// any work, exit 2, naming the file and the field.
TEST(OneSetOfLimits, ProfileFieldsAreRequiredAndKnown) {
  const std::string dir = fresh_dir("profile_fields");
  const std::string good = dir + "/good.json";
  ASSERT_EQ(run_command(std::string(COLLMM_SIM) + " -P 2 --save-profile " + good + " --profile cpu-2core", 30).rc, 0);
  const nlohmann::json text = nlohmann::json::parse(read_file(good));
  struct Bad {
    std::string name, text, message;
  };
  nlohmann::json no_peak = text, unknown = text;
  no_peak["gemm"]["peak_tflops"].erase("f32");
  unknown["links"]["intra_gpbs"] = 4;
  std::string twice = text.dump(2);
  twice.insert(twice.find("\"memory_gbps\""), "\"memory_gbps\": 800,\n  ");
  for (const Bad& b : {Bad{"no-peak", no_peak.dump(2), "missing field gemm.peak_tflops.f32"},
                       Bad{"unknown", unknown.dump(2), "unknown field 'links.intra_gpbs'"},
                       Bad{"twice", twice, "'memory_gbps' is given twice"}}) {
    const std::string path = dir + "/" + b.name + ".json";
    { std::ofstream(path) << b.text; }
    for (const std::string& tool :
         {mpirun(2) + " " + bench() + kJob + " --algo ring", std::string(COLLMM_SIM) + " -P 2 --dtype f32"}) {
      const CommandResult r = run_command(tool + " --profile " + path, 60);
      std::printf("bound: profile %s: exit %d after %.2f s\n", b.name.c_str(), r.rc, r.seconds);
      EXPECT_EQ(r.rc, 2) << b.name << "\n" << r.output;
      EXPECT_TRUE(has(r, "profile '" + path + "': " + b.message)) << r.output;
      EXPECT_FALSE(has(r, "sequential")) << "a case ran:\n" << r.output;
    }
  }
}

// collmm-sim at P = 1024: refused at once, with the figure and the option that lowers it.
TEST(BoundedSim, AutoAndTraceAtP1024AreRefusedBeforeSimulating) {
  const std::string sim = COLLMM_SIM;
  const std::string dir = fresh_dir("sim_bounds");
  for (const std::string& args :
       std::vector<std::string>{" -P 1024 --algo auto --op all", " -P 1024 --algo ring --trace " + dir + "/t.json"}) {
    const CommandResult r = run_command(sim + args, 60);
    std::printf("bound: collmm-sim%s: exit %d after %.2f s\n", args.c_str(), r.rc, r.seconds);
    EXPECT_EQ(r.rc, 2) << r.output;
    EXPECT_LT(r.seconds, 5) << r.output;
    EXPECT_TRUE(has(r, "more than")) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/t.json"));
}

// Under ulimit -v a run that does not fit is refused with the limit named, before any allocation.
TEST(BoundedMemory, AnAddressSpaceLimitIsRespected) {
  const CommandResult r = run_command(
      "sh -c 'ulimit -v 3000000; exec " + bench() + " --op ag_gemm --algo ring -m 16K -n 16K -k 16K -w 0 -i 1'", 60);
  std::printf("bound: ulimit -v 3000000 (2.9 GiB), a run of 16K^3: exit %d after %.2f s\n", r.rc, r.seconds);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(has(r, "RLIMIT_AS (ulimit -v)")) << r.output;
}

}  // namespace
