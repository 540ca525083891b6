// test_bench_model.cpp: collmm-bench's model options under mpirun: --timeline (a well-formed SVG
// with one box per executed step of the timed iteration), the measured overlap in the JSON,
// --profile (predicted_us), --algo auto (a printed choice and its auto:<algo> row), --tune-cache
// (records, then a "measured" pick) and --calibrate (a profile load_profile reads).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "../sim/xml_check.hpp"
#include "collmm/plan.hpp"
#include "collmm/profile.hpp"
#include "harness.hpp"
#include "tuning.hpp"

using namespace collmm_cli_test;
using nlohmann::json;

namespace {

const std::string kShape = " -m 48 -n 40 -k 36 -w 1 -i 3 --threads 1 --backend cpu";

CommandResult bench_run(int np, const std::string& args) {
  return run_command(mpirun(np) + " " + bench() + kShape + " " + args, 60);
}

// --calibrate takes -i >= 10 (kCalibrateMinIters).
CommandResult calibrate_run(int np, const std::string& args) {
  return run_command(mpirun(np) + " " + bench() + " -m 48 -n 40 -k 36 -w 1 -i 10 --threads 1 --backend cpu " + args,
                     90);
}

// Steps of every rank's plan (all of them run with StepFilter::all).
size_t plan_steps(collmm::Op op, collmm::Algo algo, int world) {
  collmm::Problem p;
  p.op = op, p.m = 48, p.n = 40, p.k = 36, p.world = world;
  collmm::PlanOptions o;
  o.algo = algo;
  size_t steps = 0;
  for (int r = 0; r < world; ++r) steps += collmm::make_plan(p, o, r).steps.size();
  return steps;
}

TEST(BenchTimeline, OneWellFormedSvgWithABoxPerStep) {
  const std::string dir = fresh_dir("bench_timeline");
  const CommandResult one = bench_run(3, "--op gemm_rs --algo ring --timeline " + dir + "/t.svg");
  ASSERT_EQ(one.rc, 0) << one.output;
  const std::string svg = read_file(dir + "/t.svg");
  EXPECT_EQ(collmm::xml_problem(svg), "");
  EXPECT_EQ(count_of(svg, "class=\"step\""), plan_steps(collmm::Op::gemm_rs, collmm::Algo::ring, 3));

  // Several cases: one file per case, named FILE-<op>-<algo>.svg.
  const CommandResult all = bench_run(2, "--op all --algo all --timeline " + dir + "/many.svg");
  ASSERT_EQ(all.rc, 0) << all.output;
  for (collmm::Op op : collmm::all_ops())
    for (collmm::Algo algo : collmm::all_algos()) {
      const std::string path = dir + "/many-" + collmm::to_string(op) + "-" + collmm::to_string(algo) + ".svg";
      ASSERT_TRUE(std::filesystem::exists(path)) << path << "\n" << all.output;
      const std::string s = read_file(path);
      EXPECT_EQ(collmm::xml_problem(s), "") << path;
      EXPECT_EQ(count_of(s, "class=\"step\""), plan_steps(op, algo, 2)) << path;
    }
}

TEST(BenchOverlap, JsonFractionsInZeroOneAndPredictionWithProfile) {
  const std::string dir = fresh_dir("bench_overlap");
  const CommandResult r = bench_run(4, "--op all --algo all --profile cpu-2core --json " + dir + "/r.json");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("pred/meas"), std::string::npos) << r.output;
  const json j = json::parse(read_file(dir + "/r.json"));
  ASSERT_EQ(j.at("results").size(), 12u);
  for (const json& row : j.at("results")) {
    const double mean = row.at("overlap_hidden_fraction").get<double>();
    const double min = row.at("overlap_hidden_fraction_min").get<double>();
    EXPECT_GE(min, 0);
    EXPECT_LE(min, mean + 1e-12);
    EXPECT_LE(mean, 1);
    ASSERT_EQ(row.at("overlap_hidden_fraction_per_rank").size(), 4u);
    for (const json& f : row.at("overlap_hidden_fraction_per_rank")) {
      EXPECT_GE(f.get<double>(), min - 1e-12);
      EXPECT_LE(f.get<double>(), 1);
    }
    EXPECT_GT(row.at("predicted_us").get<double>(), 0);
  }

  // Without --profile: no prediction, no pred columns.
  const CommandResult plain = bench_run(2, "--op ag_gemm --algo ring --json " + dir + "/plain.json");
  ASSERT_EQ(plain.rc, 0) << plain.output;
  EXPECT_EQ(plain.output.find("pred_us"), std::string::npos) << plain.output;
  EXPECT_FALSE(json::parse(read_file(dir + "/plain.json")).at("results").at(0).contains("predicted_us"));
}

// --algo all,auto: every algorithm and the auto row in one run, side by side (one baseline for all).
TEST(BenchAuto, RunsBesideEveryAlgorithmInOneRun) {
  const std::string dir = fresh_dir("bench_auto_beside");
  const CommandResult r =
      bench_run(2, "--op gemm_rs --algo all,auto --auto-measure off --check --json " + dir + "/r.json");
  ASSERT_EQ(r.rc, 0) << r.output;
  const json rows = json::parse(read_file(dir + "/r.json")).at("results");
  std::vector<std::string> labels;
  for (const json& row : rows) {
    labels.push_back(row.at("label"));
    EXPECT_EQ(row.at("wrong"), 0) << row;
    EXPECT_EQ(row.at("t_comm_us"), rows[0].at("t_comm_us")) << "one baseline for every row";
  }
  ASSERT_EQ(labels.size(), 5u) << r.output;
  EXPECT_EQ(std::vector<std::string>(labels.begin(), labels.begin() + 4),
            (std::vector<std::string>{"sequential", "pipelined", "ring", "bidir"}));
  EXPECT_EQ(labels[4].rfind("auto:", 0), 0u) << labels[4];
  EXPECT_NE(r.output.find("# gemm_rs --algo auto"), std::string::npos) << r.output;
}

TEST(BenchAuto, ChoosesRunsAndLearnsFromTheTuningCache) {
  const std::string dir = fresh_dir("bench_auto");
  const std::string cache = dir + "/tune.json";
  const CommandResult model = bench_run(2, "--op ag_gemm --algo auto --auto-measure off --check --tune-cache " + cache +
                                               " --json " + dir + "/model.json");
  ASSERT_EQ(model.rc, 0) << model.output;
  EXPECT_NE(model.output.find("# auto: "), std::string::npos) << model.output;
  EXPECT_NE(model.output.find("(from the model;"), std::string::npos) << model.output;
  EXPECT_NE(model.output.find("alternatives (predicted, fastest first)"), std::string::npos) << model.output;
  const json m = json::parse(read_file(dir + "/model.json")).at("results");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].at("label").get<std::string>().rfind("auto:", 0), 0u) << m[0];
  EXPECT_EQ(m[0].at("label"), "auto:" + m[0].at("algo").get<std::string>());
  EXPECT_EQ(m[0].at("chosen_by"), "model");
  EXPECT_EQ(m[0].at("wrong"), 0);
  EXPECT_NE(model.output.find(" auto:" + m[0].at("algo").get<std::string>() + " "), std::string::npos) << model.output;

  // Measure every algorithm into the cache (the auto row above is in it already).
  const CommandResult all = bench_run(2, "--op ag_gemm --algo all --tune-cache " + cache);
  ASSERT_EQ(all.rc, 0) << all.output;
  const json entries = json::parse(read_file(cache)).at("entries");
  std::set<std::string> algos;
  for (const json& e : entries) {
    EXPECT_EQ(e.at("op"), "ag_gemm");
    EXPECT_EQ(e.at("m"), 48);
    EXPECT_EQ(e.at("world_size"), 2);
    EXPECT_GT(e.at("time_us").get<double>(), 0);
    algos.insert(e.at("algo").get<std::string>());
  }
  EXPECT_EQ(algos, (std::set<std::string>{"sequential", "pipelined", "ring", "bidir"}));

  // A second auto run picks the fastest measured configuration, or within the tie margin (1%) of it
  // the one of fewest host steps (--auto-measure off: from the cache alone; measuring on would time
  // the unmeasured candidates again, and on a loaded machine those fresh times may order the
  // algorithms differently from the cache's).
  const CommandResult measured = bench_run(
      2, "--op ag_gemm --algo auto --auto-measure off --tune-cache " + cache + " --json " + dir + "/measured.json");
  ASSERT_EQ(measured.rc, 0) << measured.output;
  EXPECT_NE(measured.output.find("(from the measured;"), std::string::npos) << measured.output;
  const json r = json::parse(read_file(dir + "/measured.json")).at("results").at(0);
  EXPECT_EQ(r.at("chosen_by"), "measured");
  double best = -1, picked = -1;
  for (const json& e : entries) {
    const double t = e.at("time_us");
    if (best < 0 || t < best) best = t;
    if (e.at("algo") == r.at("algo") && (picked < 0 || t < picked)) picked = t;
  }
  ASSERT_GT(picked, 0) << r;
  EXPECT_LE(picked, best * (1 + collmm::kTieMargin)) << r;
}

// --tune-cache says how many rows it recorded: none of a run posted gemm-first (auto's candidates
// are all posted comm-first), and why; an empty file is an empty cache, as a missing one is.
TEST(BenchTuneCache, SaysHowManyRowsItRecordedAndWhy) {
  const std::string dir = fresh_dir("bench_tune_count");
  const std::string cache = dir + "/tune.json";
  std::ofstream{cache};  // 0 bytes
  const CommandResult gemm_first = bench_run(2, "--op ag_gemm --algo all --post gemm-first --tune-cache " + cache);
  ASSERT_EQ(gemm_first.rc, 0) << gemm_first.output;
  EXPECT_NE(gemm_first.output.find("# tuning cache: 0 measured rows recorded in " + cache +
                                   " (4 left out: rows posted gemm-first, and --algo auto runs comm-first)\n"),
            std::string::npos)
      << gemm_first.output;
  EXPECT_TRUE(json::parse(read_file(cache)).at("entries").empty());
  const CommandResult two = bench_run(2, "--op ag_gemm --algo ring,bidir:pieces2 --tune-cache " + cache);
  ASSERT_EQ(two.rc, 0) << two.output;
  EXPECT_NE(two.output.find("# tuning cache: 2 measured rows recorded in " + cache + "\n"), std::string::npos)
      << two.output;
  EXPECT_EQ(json::parse(read_file(cache)).at("entries").size(), 2u);
}

TEST(BenchAuto, TimesTheBestCandidatesAndRunsTheFastest) {
  const std::string dir = fresh_dir("bench_auto_measured");
  const std::string cache = dir + "/tune.json";
  const CommandResult r = bench_run(
      2, "--op gemm_rs --algo auto --check --b-layout nk --tune-cache " + cache + " --json " + dir + "/auto.json");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("(from the model;"), std::string::npos) << r.output;  // the start
  const size_t timed = r.output.find("# auto measured: ");
  ASSERT_NE(timed, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 warm-up + 3 timed runs each", timed), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("#   sequential ", timed), std::string::npos) << r.output;  // always among them
  EXPECT_NE(r.output.find("<- pick", timed), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(from the measured;", timed), std::string::npos) << r.output;
  const json row = json::parse(read_file(dir + "/auto.json")).at("results").at(0);
  EXPECT_EQ(row.at("chosen_by"), "measured");
  EXPECT_EQ(row.at("wrong"), 0);
  // Every timed candidate is in the cache: source auto (the pick's row: bench), B layout nk.
  int autos = 0;
  const json written = json::parse(read_file(cache));
  for (const json& e : written.at("entries")) {
    EXPECT_EQ(e.at("b_layout"), "nk");
    autos += e.at("source").get<std::string>() == "auto" ? 1 : 0;
  }
  EXPECT_GE(autos, 1) << read_file(cache);
  // The next run finds them all in the cache: nothing timed, the measured pick.
  const CommandResult again = bench_run(2, "--op gemm_rs --algo auto --b-layout nk --tune-cache " + cache);
  ASSERT_EQ(again.rc, 0) << again.output;
  EXPECT_EQ(again.output.find("# auto measured: "), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("(from the measured;"), std::string::npos) << again.output;
  // Off: the model's pick alone.
  const CommandResult off = bench_run(2, "--op gemm_rs --algo auto --auto-measure off");
  ASSERT_EQ(off.rc, 0) << off.output;
  EXPECT_EQ(off.output.find("# auto measured: "), std::string::npos) << off.output;
  const CommandResult bad = bench_run(2, "--op gemm_rs --algo auto --auto-measure sometimes");
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_NE(bad.output.find("--auto-measure: auto-measure must be on or off"), std::string::npos) << bad.output;
}

// gemm_ar through auto: its candidates timed and checked, the measured ones in the cache under its
// op, and collmm-sim's auto then picks from that cache.
TEST(BenchAuto, GemmArMeasuredCandidatesReachTheCacheAndTheSimulator) {
  const std::string dir = fresh_dir("bench_auto_ar");
  const std::string cache = dir + "/tune.json";
  const CommandResult r =
      bench_run(2, "--op gemm_ar --algo auto --check --tune-cache " + cache + " --json " + dir + "/auto.json");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("# gemm_ar --algo auto"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(from the measured;"), std::string::npos) << r.output;
  const json row = json::parse(read_file(dir + "/auto.json")).at("results").at(0);
  EXPECT_EQ(row.at("op"), "gemm_ar");
  EXPECT_EQ(row.at("wrong"), 0);
  const json written = json::parse(read_file(cache));
  ASSERT_FALSE(written.at("entries").empty());
  for (const json& e : written.at("entries")) EXPECT_EQ(e.at("op"), "gemm_ar");
  const CommandResult sim =
      run_command(std::string(COLLMM_SIM) + " -P 2 --op gemm_ar --algo auto -m " + row.at("m").dump() + " -n " +
                      row.at("n").dump() + " -k " + row.at("k").dump() + " --dtype f32 --tune-cache " + cache,
                  30);
  ASSERT_EQ(sim.rc, 0) << sim.output;
  EXPECT_NE(sim.output.find("(from the measured"), std::string::npos) << sim.output;
}

// The machine's load from others: the 1-minute load average less the job's own `ranks`, against
// the cores. At or above them every rank of a job waits scheduler slices (ms) for its peers.
bool overloaded_by_others(int ranks, double& load) {
  std::ifstream in("/proc/loadavg");
  load = 0;
  in >> load;
  return load - ranks >= double(std::thread::hardware_concurrency());
}

// Two ranks: a profile whose link and collective figures are fitted to times that grow with the
// size. On a machine other jobs overload, those times are scheduler slices and may not grow even in
// the least of every round: the bench must then say so, after all its rounds; on any other machine
// the refusal is a failure.
TEST(BenchCalibrate, WritesALoadableProfile) {
  const std::string dir = fresh_dir("bench_calibrate");
  const CommandResult two = calibrate_run(2, "--op all --calibrate " + dir + "/cal.json");
  double load = 0;
  const bool refused =
      two.rc != 0 && two.output.find("the machine is too loaded or noisy to calibrate") != std::string::npos;
  if (refused && overloaded_by_others(2, load)) {
    std::printf("calibrate: refused at 2 ranks on a machine at load %.1f on %u cores: %s\n", load,
                std::thread::hardware_concurrency(),
                two.output.find("round 4 of 4") != std::string::npos ? "after every round" : "ROUNDS MISSING");
    EXPECT_NE(two.output.find("round 4 of 4"), std::string::npos) << two.output;
  } else {
    ASSERT_EQ(two.rc, 0) << "load average " << load << "\n" << two.output;
    const collmm::Profile p = collmm::load_profile(dir + "/cal.json");
    EXPECT_EQ(p.gemm.model, collmm::GemmModel::table);
    EXPECT_GE(p.gemm.table.size(), 6u);
    for (const collmm::GemmPoint& g : p.gemm.table) EXPECT_GT(g.tflops, 0);
    EXPECT_GT(p.links.intra_gbps, 0);
    EXPECT_GE(p.contention.gemm_slowdown, 1);
    // The profile drives a prediction.
    const CommandResult use = bench_run(2, "--op ag_gemm --algo ring --profile " + dir + "/cal.json");
    ASSERT_EQ(use.rc, 0) << use.output;
    EXPECT_NE(use.output.find("pred/meas"), std::string::npos) << use.output;
  }

  // One rank: no link to time, said so; still a loadable profile.
  const CommandResult one = calibrate_run(1, "--op ag_gemm --calibrate " + dir + "/one.json");
  ASSERT_EQ(one.rc, 0) << one.output;
  EXPECT_NE(one.output.find("no link to time"), std::string::npos) << one.output;
  EXPECT_GE(collmm::load_profile(dir + "/one.json").gemm.table.size(), 6u);
}

}  // namespace
