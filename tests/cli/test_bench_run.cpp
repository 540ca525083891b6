// test_bench_run.cpp: collmm-bench under mpirun, checking on: --op all --algo all on 4 ranks with
// uneven shards, writing --json, --trace and --save; then the files are read back and checked (the
// JSON keys, every rank and both lanes in the trace, .npy headers and sizes, and the
// saved C recomputed from the saved A and B). Also bf16 with B transposed, and f64, on 3 and 2 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "harness.hpp"

using namespace collmm_cli_test;
using nlohmann::json;

namespace {

const int P = 4;
const int64_t M = 67, N = 45, K = 38;  // none divides by 4
const char* kOps[] = {"ag_gemm", "gemm_rs", "gemm_ar"};
const char* kAlgos[] = {"sequential", "pipelined", "ring", "bidir"};

// Table rows (lines whose first word is `first_word`) as heading -> cell, the headings read off the
// table's header line ("#  op  M  N ...").
std::vector<std::map<std::string, std::string>> table_rows(const std::string& out, const std::string& first_word) {
  std::vector<std::map<std::string, std::string>> rows;
  std::vector<std::string> heads;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() > 1 && w[0] == "#" && w[1] == "op") heads.assign(w.begin() + 1, w.end());
    if (w.empty() || w[0] != first_word) continue;
    EXPECT_EQ(w.size(), heads.size()) << "a row with a cell per heading: " << line;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < w.size() && i < heads.size(); ++i) row[heads[i]] = w[i];
    rows.push_back(row);
  }
  return rows;
}

class BenchRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fresh_dir("bench_run");
    result_ =
        run_command(mpirun(P) + " " + bench() + " --backend cpu --op all --algo all --check -m " + std::to_string(M) +
                        " -n " + std::to_string(N) + " -k " + std::to_string(K) + " -w 1 -i 3 --threads 1 --json " +
                        dir_ + "/r.json --trace " + dir_ + "/trace.json --save " + dir_ + "/npy",
                    120);
  }
  static std::string dir_;
  static CommandResult result_;
};
std::string BenchRun::dir_;
CommandResult BenchRun::result_;

TEST_F(BenchRun, PassesWithARowPerOpAndAlgo) {
  ASSERT_EQ(result_.rc, 0) << result_.output;
  for (const char* op : kOps) {
    const auto rows = table_rows(result_.output, op);
    ASSERT_EQ(rows.size(), 4u) << result_.output;
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i].at("algo"), kAlgos[i]);
      EXPECT_EQ(rows[i].at("M"), std::to_string(M));
      EXPECT_EQ(rows[i].at("P"), std::to_string(P));
      EXPECT_EQ(rows[i].at("B"), "kn");
      EXPECT_EQ(rows[i].at("post"), "comm-first");
      EXPECT_EQ(rows[i].at("#wrong"), "0") << "#wrong of " << op << " " << kAlgos[i];
      // steps: the plan's step count; stages: the option (0, the default, where pipelined takes it).
      const std::string algo = kAlgos[i];
      if (algo == "sequential" || algo == "ring") {  // gemm_ar's ring: P steps, then the all-gather
        const int ring = std::string(op) == "gemm_ar" ? P + 1 : P;
        EXPECT_EQ(rows[i].at("steps"), algo == "ring" ? std::to_string(ring) : "1");
      }
      EXPECT_EQ(rows[i].at("stages"), "0");
      EXPECT_EQ(rows[i].at("waves"), "0");
    }
  }
  EXPECT_NE(result_.output.find("# Out of bounds values : 0 OK"), std::string::npos) << result_.output;
}

TEST_F(BenchRun, JsonHasTheKeysOfTheIssue) {
  ASSERT_EQ(result_.rc, 0) << result_.output;
  const json j = json::parse(read_file(dir_ + "/r.json"));
  EXPECT_EQ(j.at("backend"), "cpu");
  EXPECT_EQ(j.at("world_size"), P);
  EXPECT_TRUE(j.at("collmm_version").is_string());
  std::set<std::string> keys{"dtype", "steps", "time_us", "tflops", "t_gemm_us", "t_comm_us", "speedup_vs_sequential",
                             "overlap_efficiency", "wrong", "max_rel_err",
                             // (no --profile here, so no "predicted_us")
                             "label", "options", "overlap_hidden_fraction", "overlap_hidden_fraction_min",
                             "overlap_hidden_fraction_per_rank"};
  // Every field of the problem and of the plan options is a key of its own (their field lists).
  for (const char* key : {"op", "m", "n", "k", "world_size", "b_layout", "algo", "stages", "waves", "post",
                          "gemm_lanes", "merge", "pieces", "piece_sizes"})
    keys.insert(key);
  ASSERT_EQ(j.at("results").size(), 12u);
  std::set<std::string> cases;
  for (const json& r : j.at("results")) {
    std::set<std::string> got;
    for (auto it = r.begin(); it != r.end(); ++it) got.insert(it.key());
    EXPECT_EQ(got, keys);
    EXPECT_EQ(r.at("options").at("post"), "comm-first");
    EXPECT_EQ(r.at("options").at("algo"), r.at("algo"));
    EXPECT_EQ(r.at("post"), "comm-first");
    cases.insert(r.at("op").get<std::string>() + " " + r.at("algo").get<std::string>());
    EXPECT_EQ(r.at("m"), M);
    EXPECT_EQ(r.at("world_size"), P);
    EXPECT_EQ(r.at("dtype"), "f32");
    EXPECT_EQ(r.at("wrong"), 0);
    EXPECT_GT(r.at("time_us").get<double>(), 0);
    EXPECT_GT(r.at("t_gemm_us").get<double>(), 0);
    EXPECT_GT(r.at("t_comm_us").get<double>(), 0);
    EXPECT_LT(r.at("max_rel_err").get<double>(), 1e-4);
    if (r.at("algo") == "sequential") {
      EXPECT_DOUBLE_EQ(r.at("speedup_vs_sequential").get<double>(), 1.0);
    }
    if (r.at("algo") == "ring") {  // the ring's plan has P steps (gemm_ar: and the all-gather); stages 0 (unused)
      EXPECT_EQ(r.at("steps"), r.at("op") == "gemm_ar" ? P + 1 : P);
      EXPECT_EQ(r.at("stages"), 0);
    }
  }
  EXPECT_EQ(cases.size(), 12u);
}

TEST_F(BenchRun, TraceHasEveryRankAndBothLanes) {
  ASSERT_EQ(result_.rc, 0) << result_.output;
  const json t = json::parse(read_file(dir_ + "/trace.json"));
  std::map<int, std::set<std::string>> kinds_of_rank;  // rank -> {"comm", "gemm"} seen on their lanes
  std::map<std::pair<int, int>, std::string> thread_names;
  int ring_gemms = 0;
  for (const json& e : t.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      thread_names[{e.at("pid").get<int>(), e.at("tid").get<int>()}] = e.at("args").at("name");
    if (e.at("ph") != "X") continue;
    EXPECT_GE(e.at("dur").get<double>(), 0);
    // A box is on its lane's thread; its category is its kind's (the ring's own-chunk copy runs on
    // the GEMM lane and is comm); no GEMM runs on the comm lane.
    const int tid = e.at("tid").get<int>();
    const bool gemm = e.at("args").at("kind") == "gemm";
    EXPECT_EQ(tid, e.at("args").at("lane").get<int>()) << e.dump();
    EXPECT_EQ(e.at("cat"), gemm ? "gemm" : "comm") << e.dump();
    if (gemm) {
      EXPECT_NE(tid, 0) << e.dump();
    }
    kinds_of_rank[e.at("pid").get<int>()].insert(tid == 0 ? "comm" : "gemm");
    const std::string name = e.at("name");
    if (name.rfind("ag_gemm ring step ", 0) == 0 && name.find(" chunk ") != std::string::npos && name.size() > 5 &&
        name.compare(name.size() - 5, 5, " gemm") == 0)
      ++ring_gemms;
  }
  ASSERT_EQ(kinds_of_rank.size(), static_cast<size_t>(P));
  for (const auto& [rank, kinds] : kinds_of_rank) {
    EXPECT_EQ(kinds, (std::set<std::string>{"comm", "gemm"})) << "rank " << rank;
    EXPECT_EQ(thread_names[std::make_pair(rank, 0)], "comm");
    EXPECT_EQ(thread_names[std::make_pair(rank, 1)], "gemm");
  }
  EXPECT_EQ(ring_gemms, P * P);  // every rank computes every chunk once
}

// The saved files: headers, sizes, and C recomputed in f64 from the saved A and B (and gathered A).
TEST_F(BenchRun, SavedNpyFilesHoldInputsAndOutputs) {
  ASSERT_EQ(result_.rc, 0) << result_.output;
  for (const char* op : kOps)
    for (const char* algo : kAlgos) {
      std::vector<Npy> a, b, c, g;
      for (int r = 0; r < P; ++r) {
        const std::string prefix = dir_ + "/npy/" + op + "-" + algo + "-rank" + std::to_string(r) + "-";
        a.push_back(read_npy(prefix + "A.npy"));
        b.push_back(read_npy(prefix + "B.npy"));
        c.push_back(read_npy(prefix + "C.npy"));
        if (std::string(op) == "ag_gemm") g.push_back(read_npy(prefix + "gathered.npy"));
        for (const Npy* n : {&a.back(), &b.back(), &c.back()}) {
          EXPECT_EQ(n->descr, "<f4");
          EXPECT_EQ(n->header_bytes % 64, 0u);
          EXPECT_EQ(n->file_bytes, n->header_bytes + static_cast<size_t>(n->rows * n->cols) * 4) << prefix;
        }
      }
      const bool ar = std::string(op) == "gemm_ar";
      int64_t row0 = 0;  // first global row of C_r (gemm_rs; gemm_ar's C is all M rows on every rank)
      for (int r = 0; r < P; ++r) {
        const std::string where = std::string(op) + " " + algo + " rank " + std::to_string(r);
        int64_t wrong = 0;
        if (std::string(op) == "ag_gemm") {  // C_r [M, N_r] = gathered [M, K] @ B_r [K, N_r]
          ASSERT_EQ(c[r].rows, M) << where;
          ASSERT_EQ(g[r].rows, M) << where;
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < c[r].cols; ++j) {
              double want = 0;
              for (int64_t kk = 0; kk < K; ++kk) want += g[r].at(i, kk) * b[r].at(kk, j);
              wrong += std::abs(c[r].at(i, j) - want) > 1e-4 * (std::abs(want) + 1);
            }
        } else {  // C_r [M_r, N] = rows block r of sum over q of A_q [M, K_q] @ B_q [K_q, N]; gemm_ar: all M
          ASSERT_EQ(c[r].cols, N) << where;
          if (ar) {
            ASSERT_EQ(c[r].rows, M) << where;
          }
          for (int64_t i = 0; i < c[r].rows; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double want = 0;
              for (int q = 0; q < P; ++q)
                for (int64_t kk = 0; kk < a[q].cols; ++kk) want += a[q].at(row0 + i, kk) * b[q].at(kk, j);
              wrong += std::abs(c[r].at(i, j) - want) > 1e-4 * (std::abs(want) + 1);
            }
          if (!ar) row0 += c[r].rows;
        }
        EXPECT_EQ(wrong, 0) << where;
      }
      if (std::string(op) == "gemm_rs") {
        EXPECT_EQ(row0, M);
      }
    }
}

// bf16 with B as [N_r, K] on 3 ranks: checked, and saved as float32 (bf16 has no NumPy type).
TEST(BenchDtypes, Bf16TransposedBOnThreeRanks) {
  const std::string dir = fresh_dir("bench_bf16");
  const CommandResult r = run_command(mpirun(3) + " " + bench() +
                                          " --op all --algo ring --dtype bf16 --b-layout nk --check -m 10 -n 7 -k 5"
                                          " -w 1 -i 2 --save " +
                                          dir,
                                      60);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(table_rows(r.output, "ag_gemm").at(0).at("#wrong"), "0");
  EXPECT_EQ(table_rows(r.output, "gemm_rs").at(0).at("#wrong"), "0");
  EXPECT_EQ(table_rows(r.output, "gemm_ar").at(0).at("#wrong"), "0");
  EXPECT_EQ(table_rows(r.output, "gemm_rs").at(0).at("B"), "nk");
  const Npy b = read_npy(dir + "/ag_gemm-ring-rank0-B.npy");
  EXPECT_EQ(b.descr, "<f4");
  EXPECT_EQ(b.rows, 3);  // N_0 = 3 of N = 7: B_0 is [N_0, K] in the nk layout
  EXPECT_EQ(b.cols, 5);
}

TEST(BenchDtypes, F64OnTwoRanks) {
  const std::string dir = fresh_dir("bench_f64");
  const CommandResult r = run_command(mpirun(2) + " " + bench() +
                                          " --op gemm_rs --algo bidir --dtype f64 --check -m 5 -n 7 -k 3 -w 1 -i 2"
                                          " --save " +
                                          dir,
                                      60);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(table_rows(r.output, "gemm_rs").size(), 1u) << r.output;
  const Npy c = read_npy(dir + "/gemm_rs-bidir-rank1-C.npy");
  EXPECT_EQ(c.descr, "<f8");
  EXPECT_EQ(c.rows, 2);
  EXPECT_EQ(c.cols, 7);
}

// gemm_ar in f64 on 2 ranks, every algorithm: checked, and every rank's saved C is all M rows.
TEST(BenchDtypes, GemmArF64OnTwoRanks) {
  const std::string dir = fresh_dir("bench_ar_f64");
  const CommandResult r = run_command(mpirun(2) + " " + bench() +
                                          " --op gemm_ar --algo all --dtype f64 --check -m 5 -n 7 -k 3 -w 1 -i 2"
                                          " --save " +
                                          dir,
                                      60);
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto rows = table_rows(r.output, "gemm_ar");
  ASSERT_EQ(rows.size(), 4u) << r.output;
  for (const auto& row : rows) EXPECT_EQ(row.at("#wrong"), "0") << row.at("algo");
  for (int rank = 0; rank < 2; ++rank) {
    const Npy c = read_npy(dir + "/gemm_ar-bidir-rank" + std::to_string(rank) + "-C.npy");
    EXPECT_EQ(c.descr, "<f8");
    EXPECT_EQ(c.rows, 5);
    EXPECT_EQ(c.cols, 7);
  }
}

// --pieces S on 5..8 ranks (the cpu gtests cover 1..4 with S = 1..4): --op all --algo all,
// checked; ring and bidir run with their edge in S pieces, equal or of halving size (label and
// options say so), sequential and pipelined as without it.
TEST(BenchPieces, EveryOpAndAlgorithmOnFiveToEightRanks) {
  for (const auto& [np, pieces, sizes] : {std::tuple{5, 2, "equal"}, std::tuple{6, 3, "halving"},
                                          std::tuple{7, 4, "equal"}, std::tuple{8, 4, "halving"}}) {
    const std::string dir = fresh_dir("bench_pieces");
    const bool halving = std::string(sizes) == "halving";
    const CommandResult r = run_command(
        mpirun(np) + " " + bench() + " --op all --algo all --check -w 0 -i 1 --threads 1 -m " +
            std::to_string(17 * np + 2) + " -n " + std::to_string(2 * np + 1) + " -k " + std::to_string(3 * np + 1) +
            " --pieces " + std::to_string(pieces) + " --piece-sizes " + sizes + " --json " + dir + "/r.json",
        120);
    ASSERT_EQ(r.rc, 0) << r.output;
    const json rows = json::parse(read_file(dir + "/r.json")).at("results");
    ASSERT_EQ(rows.size(), 12u) << r.output;
    for (const json& row : rows) {
      EXPECT_EQ(row.at("wrong"), 0) << row.dump();
      const bool cut = row.at("algo") == "ring" || row.at("algo") == "bidir";
      EXPECT_EQ(row.at("options").at("pieces"), cut ? pieces : 1) << row.dump();
      EXPECT_EQ(row.at("options").at("piece_sizes"), cut && halving ? "halving" : "equal") << row.dump();
      if (cut) {
        EXPECT_EQ(row.at("label"),
                  row.at("algo").get<std::string>() + ":pieces" + std::to_string(pieces) + (halving ? "h" : ""));
      }
    }
  }
}

// --algo with configurations and auto, --rounds 2, checked, on 3 ranks of an uneven shape: every
// row once, the configurations with their own options, each row's time the median of its two rounds
// (round_us, printed per round), nothing wrong in any round.
TEST(BenchRounds, ConfigurationsAndAutoSideBySideInRounds) {
  const std::string dir = fresh_dir("bench_rounds");
  const CommandResult r = run_command(
      mpirun(3) + " " + bench() +
          " --op all --algo ring,ring:pieces2h,bidir:pieces3,auto --rounds 2 --check -m 61 -n 20 -k 23 -w 0 -i 2"
          " --threads 1 --json " +
          dir + "/r.json --save " + dir + "/npy",
      120);
  ASSERT_EQ(r.rc, 0) << r.output;
  for (const char* line : {"# round 1/2 of ag_gemm, us: sequential ", "# round 2/2 of gemm_rs, us: sequential "})
    EXPECT_NE(r.output.find(line), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", ring:pieces2h "), std::string::npos) << r.output;
  const json rows = json::parse(read_file(dir + "/r.json")).at("results");
  std::map<std::string, int> seen;
  for (const json& row : rows) {
    const std::string label = row.at("label");
    ++seen[row.at("op").get<std::string>() + " " + label.substr(0, label.find("auto:") == 0 ? 5 : std::string::npos)];
    EXPECT_EQ(row.at("wrong"), 0) << row.dump();
    const std::vector<double> rounds = row.at("round_us");
    ASSERT_EQ(rounds.size(), 2u) << row.dump();
    EXPECT_DOUBLE_EQ(row.at("time_us").get<double>(), 0.5 * (rounds[0] + rounds[1])) << row.dump();
    if (label == "ring:pieces2h") {
      EXPECT_EQ(row.at("options").at("pieces"), 2);
      EXPECT_EQ(row.at("options").at("piece_sizes"), "halving");
    }
    if (label == "bidir:pieces3") {
      EXPECT_EQ(row.at("algo"), "bidir");
      EXPECT_EQ(row.at("options").at("pieces"), 3);
      EXPECT_EQ(row.at("options").at("piece_sizes"), "equal");
    }
    if (label == "ring") {
      EXPECT_EQ(row.at("options").at("pieces"), 1);
    }
  }
  const std::map<std::string, int> expected{
      {"ag_gemm ring", 1}, {"ag_gemm ring:pieces2h", 1}, {"ag_gemm bidir:pieces3", 1}, {"ag_gemm auto:", 1},
      {"gemm_rs ring", 1}, {"gemm_rs ring:pieces2h", 1}, {"gemm_rs bidir:pieces3", 1}, {"gemm_rs auto:", 1},
      {"gemm_ar ring", 1}, {"gemm_ar ring:pieces2h", 1}, {"gemm_ar bidir:pieces3", 1}, {"gemm_ar auto:", 1}};
  EXPECT_EQ(seen, expected) << r.output;
  // --save: every row its own files, named by its label (':' as '-').
  for (const char* row : {"ring", "ring-pieces2h", "bidir-pieces3"})
    for (int rank = 0; rank < 3; ++rank)
      EXPECT_TRUE(std::filesystem::exists(dir + "/npy/gemm_rs-" + row + "-rank" + std::to_string(rank) + "-C.npy"))
          << row << " rank " << rank;
}

// --gemm-rate: every row has the GEMMs' rate beside the comm, in the table and the JSON, and it is
// the ratio of the two times it is made of.
TEST(BenchGemmRate, PrintedAndInTheJson) {
  const std::string dir = fresh_dir("bench_gemm_rate");
  const CommandResult r = run_command(mpirun(2) + " " + bench() +
                                          " --op all --algo all -m 64 -n 32 -k 48 -w 1 -i 2 --threads 1 --gemm-rate"
                                          " --json " +
                                          dir + "/r.json",
                                      90);
  ASSERT_EQ(r.rc, 0) << r.output;
  size_t lines = 0;
  for (size_t at = r.output.find("GEMM rate beside the comm"); at != std::string::npos;
       at = r.output.find("GEMM rate beside the comm", at + 1))
    ++lines;
  EXPECT_EQ(lines, 12u) << r.output;
  const json j = json::parse(read_file(dir + "/r.json"));
  ASSERT_EQ(j.at("results").size(), 12u);
  for (const json& row : j.at("results")) {
    const double alone = row.at("t_gemm_plan_us"), busy = row.at("gemm_busy_us"),
                 rate = row.at("gemm_rate_beside_comm");
    EXPECT_GT(alone, 0) << row;
    EXPECT_GT(busy, 0) << row;
    EXPECT_NEAR(rate, alone / busy, 1e-9 * rate) << row;
  }
}

}  // namespace
