// test_frontend_units.cpp: the pieces of collmm_frontend that need no MPI job: the .npy writer, the
// agreement messages (over a fake HostComm standing in for several processes), Chrome trace events,
// the median and the derived figures, and make_executor's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "agreement.hpp"
#include "backends.hpp"
#include "bench_case.hpp"
#include "bench_model.hpp"
#include "chrome_trace.hpp"
#include "collmm/sim.hpp"
#include "data.hpp"
#include "harness.hpp"
#include "npy.hpp"
#include "report.hpp"

using namespace collmm;

namespace {

// A job of several processes as seen by process `me`: allgather returns the others' canned strings,
// and the others' canned numbers (none canned: every process sent what this one sends). `sent`
// keeps the numbers this process sent last; `rounds`, if set, the others' strings per exchange.
class FakeHost : public HostComm {
 public:
  FakeHost(int me, std::vector<std::string> others, std::vector<std::vector<double>> numbers = {})
      : me_(me), others_(std::move(others)), numbers_(std::move(numbers)) {}
  int proc() const override { return me_; }
  int procs() const override { return static_cast<int>(others_.size()); }
  void barrier() override {}
  std::vector<std::string> allgather(const std::string& mine) override {
    std::vector<std::string> all = others_;
    if (!rounds.empty()) all = rounds.front(), rounds.erase(rounds.begin());
    all[static_cast<size_t>(me_)] = mine;
    return all;
  }
  std::vector<std::vector<std::string>> rounds;  // the others' strings per exchange, when they vary
  std::vector<double> allgather(const std::vector<double>& mine) override {
    sent = mine;
    std::vector<double> all;
    for (int q = 0; q < procs(); ++q) {
      const auto& v = numbers_.empty() || q == me_ ? mine : numbers_[static_cast<size_t>(q)];
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
  [[noreturn]] void abort(int) override { throw std::logic_error("abort"); }
  std::vector<double> sent;

 private:
  int me_;
  std::vector<std::string> others_;
  std::vector<std::vector<double>> numbers_;
};

std::string serialized(const BenchOptions& o) {
  std::string s;
  for (const auto& [k, v] : agreement_keys(o)) s += k + "=" + v + "\n";
  return s;
}

TEST(Agreement, NamesEveryDifferingKeyAndRank) {
  BenchOptions a, b, c;
  a.m = 64;
  b.m = 64;
  c.m = 48;
  c.dtype = Dtype::bf16;
  FakeHost host(0, {"", serialized(b), serialized(c)});
  try {
    check_processes_agree(host, agreement_keys(a));
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "ranks disagree on M: rank 0 has 64, rank 2 has 48; dtype: rank 0 has f32, rank 2 has bf16");
  }
}

TEST(Agreement, EqualOptionsPass) {
  BenchOptions a;
  FakeHost host(1, {serialized(a), "", serialized(a)});
  EXPECT_NO_THROW(check_processes_agree(host, agreement_keys(a)));
}

TEST(Agreement, OutputPathsNeedNotAgreeButTracingMust) {
  BenchOptions a, b;
  a.json_path = "x.json";
  b.save_dir = "elsewhere";
  FakeHost same(0, {"", serialized(b)});
  EXPECT_NO_THROW(check_processes_agree(same, agreement_keys(a)));
  b.trace_path = "t.json";
  FakeHost traced(0, {"", serialized(b)});
  EXPECT_THROW(check_processes_agree(traced, agreement_keys(a)), UsageError);
}

TEST(Agreement, AnotherProcessErrorIsRaisedEverywhere) {
  FakeHost host(0, {"", "", "M=2 is too small"});
  try {
    raise_if_any_process_failed(host, "");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "rank 2: M=2 is too small");
  }
  FakeHost fine(0, {"", ""});
  EXPECT_NO_THROW(raise_if_any_process_failed(fine, ""));
}

using Keys = std::vector<std::pair<std::string, std::string>>;

// What process `me` of `procs` sends in agree_and_gather's one exchange.
std::vector<double> sent_by(int me, int procs, const std::string& error, const Keys& keys, std::vector<double> mine) {
  FakeHost job(me, std::vector<std::string>(static_cast<size_t>(procs)));
  try {
    agree_and_gather(job, error, keys, mine);
  } catch (const UsageError&) {  // its own error: what it sent is recorded all the same
  }
  return job.sent;
}

TEST(Agreement, OneExchangeGathersEveryRanksNumbers) {
  const Keys keys{{"M", "64"}, {"dtype", "bf16"}};
  FakeHost host(0, {"", ""}, {{}, sent_by(1, 2, "", keys, {5, 7})});
  const auto all = agree_and_gather(host, "", keys, {6, 7});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], (std::vector<double>{6, 7}));
  EXPECT_EQ(all[1], (std::vector<double>{5, 7}));
  FakeHost alone(0, {""});  // one process: nothing exchanged
  EXPECT_EQ(agree_and_gather(alone, "", keys, {3}), (std::vector<std::vector<double>>{{3}}));
  EXPECT_TRUE(alone.sent.empty());
  EXPECT_THROW(agree_and_gather(alone, "bad input", keys, {3}), UsageError);
}

TEST(Agreement, OneExchangeFallsBackToTheMessagesOfTheFullChecks) {
  const Keys keys{{"M", "64"}, {"dtype", "bf16"}}, other{{"M", "48"}, {"dtype", "bf16"}};
  // Rank 1's keys differ: every rank learns it from the numbers, then the strings name the key.
  FakeHost differs(0, {"", ""}, {{}, sent_by(1, 2, "", other, {5})});
  differs.rounds = {{"", ""}, {"", "M=48\ndtype=bf16\n"}};  // no error, then its keys
  try {
    agree_and_gather(differs, "", keys, {6});
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "ranks disagree on M: rank 0 has 64, rank 1 has 48");
  }
  // Rank 1 found an error in its own input: raised on rank 0 too, with rank 1's words.
  FakeHost failed(0, {"", "A is on cpu"}, {{}, sent_by(1, 2, "A is on cpu", keys, {5})});
  try {
    agree_and_gather(failed, "", keys, {6});
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "rank 1: A is on cpu");
  }
}

TEST(Npy, HeaderIsVersion1PaddedTo64) {
  const std::string h = npy_header("<f4", 3, 5);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.compare(0, 6, "\x93NUMPY"), 0);
  EXPECT_EQ(h[6], 1);
  EXPECT_EQ(h[7], 0);
  EXPECT_EQ(static_cast<size_t>(static_cast<unsigned char>(h[8])) + 10, h.size());
  EXPECT_NE(h.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }"), std::string::npos);
  EXPECT_EQ(h.back(), '\n');
}

TEST(Npy, Bf16IsSavedAsFloat32Values) {
  const std::vector<double> v{0.5, -1.25, 3.0078125, 100.5, -0.1, 7};
  std::vector<double> rounded;
  for (double x : v) rounded.push_back(round_to(Dtype::bf16, x));
  const std::string path = std::string(COLLMM_TEST_OUT) + "/units_bf16.npy";
  write_npy(path, Dtype::bf16, 2, 3, encode(v, Dtype::bf16));
  const collmm_cli_test::Npy n = collmm_cli_test::read_npy(path);
  EXPECT_EQ(n.descr, "<f4");
  EXPECT_EQ(n.rows, 2);
  EXPECT_EQ(n.cols, 3);
  EXPECT_EQ(n.v, rounded);
}

TEST(Npy, WrongByteCountThrows) {
  EXPECT_THROW(
      write_npy(std::string(COLLMM_TEST_OUT) + "/units_bad.npy", Dtype::f32, 2, 2, std::vector<unsigned char>(12)),
      std::runtime_error);
}

TEST(ChromeTrace, EventsAreNamedAndCasesLaidEndToEnd) {
  Timeline ring;
  ring.op = Op::ag_gemm;
  ring.algo = Algo::ring;
  ring.events = {{0, 1, StepKind::gemm, 2, 3, 10, 30}, {1, 0, StepKind::sendrecv, 0, 1, 0, 100}};
  Timeline seq;
  seq.op = Op::gemm_rs;
  seq.algo = Algo::sequential;
  seq.events = {{0, 0, StepKind::reduce_scatter, 0, -1, 5, 15}};
  const nlohmann::json t = chrome_trace({ring, seq});
  std::vector<nlohmann::json> x, names;
  for (const auto& e : t.at("traceEvents")) (e.at("ph") == "X" ? x : names).push_back(e);
  ASSERT_EQ(x.size(), 3u);
  EXPECT_EQ(x[0].at("name"), "ag_gemm ring step 2 chunk 3 gemm");
  EXPECT_EQ(x[0].at("pid"), 0);
  EXPECT_EQ(x[0].at("tid"), 1);
  EXPECT_DOUBLE_EQ(x[0].at("ts").get<double>(), 10);
  EXPECT_DOUBLE_EQ(x[0].at("dur").get<double>(), 20);
  EXPECT_EQ(x[1].at("name"), "ag_gemm ring step 0 chunk 1 sendrecv");
  EXPECT_EQ(x[1].at("cat"), "comm");
  EXPECT_EQ(x[2].at("name"), "gemm_rs sequential step 0 reduce_scatter");
  EXPECT_DOUBLE_EQ(x[2].at("ts").get<double>(), 100 * 1.1 + 5);  // after the first case
  int thread_names = 0;
  for (const auto& e : names) thread_names += e.at("name") == "thread_name";
  EXPECT_EQ(thread_names, 3);  // rank 0: comm, gemm; rank 1: comm
}

TEST(Figures, MedianAndDerived) {
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  CaseResult seq, ring;
  seq.time_us = ring.time_us = 0;
  seq.problem = ring.problem =
      Problem{.op = Op::ag_gemm, .m = 100, .n = 200, .k = 300, .world = 4, .b_layout = BLayout::kn};
  seq.time_us = 150;
  seq.t_gemm_us = 100;
  seq.t_comm_us = 50;
  ring.time_us = 110;
  derive_figures(ring, seq);
  EXPECT_DOUBLE_EQ(ring.speedup, 150.0 / 110.0);
  EXPECT_DOUBLE_EQ(ring.efficiency, (150.0 - 110.0) / 50.0);
  EXPECT_DOUBLE_EQ(ring.tflops, 2.0 * 100 * 200 * 300 / 4 / 110e-6 / 1e12);
  EXPECT_DOUBLE_EQ(ring.t_gemm_us, 100);
  seq.t_comm_us = 0;  // nothing to hide: E is undefined
  derive_figures(ring, seq);
  EXPECT_TRUE(std::isnan(ring.efficiency));
  seq.t_comm_us = 50;
  ring.problem.world = seq.problem.world = 1;  // one rank: no communication at all
  derive_figures(ring, seq);
  EXPECT_TRUE(std::isnan(ring.efficiency));
  EXPECT_DOUBLE_EQ(ring.speedup, 150.0 / 110.0);
}

// --rounds: the median round's time (and its timeline), the medians of t_gemm and t_comm, every
// round's wrong elements counted; one round comes back as it was.
TEST(Figures, RoundsMergeIntoTheMedianRound) {
  std::vector<CaseResult> rounds(3);
  const double times[] = {130, 100, 120}, gemm[] = {90, 80, 85};
  for (size_t i = 0; i < rounds.size(); ++i) {
    rounds[i].time_us = times[i];
    rounds[i].t_gemm_us = gemm[i];
    rounds[i].t_comm_us = 40 + static_cast<double>(i);
    rounds[i].checked = true;
    rounds[i].wrong = static_cast<int64_t>(i);
    rounds[i].max_rel_err = 1e-7 * static_cast<double>(3 - i);
    rounds[i].timeline.events.push_back(TimelineEvent{.rank = static_cast<int>(i)});
  }
  const CaseResult m = merge_rounds(rounds);
  EXPECT_DOUBLE_EQ(m.time_us, 120);
  EXPECT_EQ(m.timeline.events.at(0).rank, 2);  // the round of 120 us
  EXPECT_DOUBLE_EQ(m.t_gemm_us, 85);
  EXPECT_DOUBLE_EQ(m.t_comm_us, 41);
  EXPECT_EQ(m.wrong, 0 + 1 + 2);
  EXPECT_DOUBLE_EQ(m.max_rel_err, 3e-7);
  EXPECT_EQ(m.round_us, (std::vector<double>{130, 100, 120}));
  const CaseResult one = merge_rounds({rounds[0]});
  EXPECT_DOUBLE_EQ(one.time_us, 130);
  EXPECT_TRUE(one.round_us.empty());
}

// Where the backend enqueues its steps (cuda), each case carries its host issue time and the
// operations it issued: --rounds keeps their median, the JSON has them per row and, over the rows,
// the host cost per operation the cost model takes (fit_issue); a backend without it (cpu) adds
// nothing.
TEST(Figures, HostIssueTimesReachTheJson) {
  std::vector<CaseResult> rounds(3);
  const double issue[] = {300, 280, 310};
  for (size_t i = 0; i < rounds.size(); ++i) {
    rounds[i].time_us = 320 + static_cast<double>(i);
    rounds[i].issue_us = issue[i];
    rounds[i].issue_gemms = 8, rounds[i].issue_others = 7;
  }
  EXPECT_DOUBLE_EQ(merge_rounds(rounds).issue_us, 300);
  const Problem p{.op = Op::ag_gemm, .m = 512, .n = 1024, .k = 256, .world = 8, .b_layout = BLayout::kn};
  std::vector<CaseResult> cases(4);
  const double gemms[] = {1, 8, 64, 8}, others[] = {7, 7, 16, 7};
  for (size_t i = 0; i < cases.size(); ++i) {
    cases[i].problem = p;
    cases[i].time_us = 100;
    cases[i].issue_gemms = gemms[i], cases[i].issue_others = others[i];
    cases[i].issue_us = 30 * gemms[i] + 3 * others[i];
  }
  cases[3].chosen_by = "model", cases[3].issue_us = 5000;  // auto's row, a twin of a case: not in the fit
  RunInfo info;
  info.backend = "cuda", info.world = 8;
  const nlohmann::json j = results_json(info, cases);
  EXPECT_DOUBLE_EQ(j.at("results").at(1).at("issue_us").get<double>(), 30 * 8 + 3 * 7);
  EXPECT_EQ(j.at("results").at(1).at("issue_ops").at("gemms"), 8);
  EXPECT_EQ(j.at("results").at(1).at("issue_ops").at("others"), 7);
  EXPECT_NEAR(j.at("host_issue").at("gemm_issue_us").get<double>(), 30, 1e-9);
  EXPECT_NEAR(j.at("host_issue").at("issue_us").get<double>(), 3, 1e-9);
  EXPECT_EQ(j.at("host_issue").at("cases"), 3);
  EXPECT_EQ(j.at("host_issue").at("shared"), false);
  CaseResult cpu;  // no issue time
  cpu.problem = p;
  info.backend = "cpu";
  const nlohmann::json none = results_json(info, {cpu});
  EXPECT_FALSE(none.at("results").at(0).contains("issue_us"));
  EXPECT_FALSE(none.contains("host_issue"));
  // The table's summary names the cases the host paced: here the one whose issue took 0.9 of its time.
  cases.pop_back();
  cases[1].label = "ring", cases[0].label = "sequential", cases[2].label = "pipelined";
  cases[1].time_us = cases[1].issue_us / 0.95;
  cases[2].time_us = 10 * cases[2].issue_us;
  std::ostringstream out;
  print_table_summary(out, cases);
  EXPECT_NE(out.str().find("# Paced by the host's issue (issue_us >= 0.9 x time_us): ag_gemm ring (261.0 of 274.7)\n"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("Faster than sequential's GEMMs"), std::string::npos) << out.str();
  std::ostringstream quiet;
  print_table_summary(quiet, {cpu});
  EXPECT_EQ(quiet.str().find("Paced"), std::string::npos) << quiet.str();
}

// A row faster than the sequential plan's GEMMs alone cannot be an overlap figure: the summary names it.
TEST(Figures, RowsBelowTheBaselinesGemmsAreNamed) {
  CaseResult seq, ring, bidir;
  seq.problem = ring.problem = bidir.problem =
      Problem{.op = Op::ag_gemm, .m = 64, .n = 64, .k = 64, .world = 2, .b_layout = BLayout::kn};
  seq.plan.algo = Algo::sequential, ring.plan.algo = Algo::ring, bidir.plan.algo = Algo::bidir;
  seq.label = "sequential", ring.label = "ring", bidir.label = "bidir";
  seq.time_us = 200, ring.time_us = 94, bidir.time_us = 180;
  for (CaseResult* r : {&seq, &ring, &bidir}) r->t_gemm_us = 171, r->t_comm_us = 20;
  std::ostringstream out;
  print_table_summary(out, {seq, ring, bidir});
  EXPECT_NE(out.str().find("(--rounds R spreads the load over every row): ag_gemm ring (94.0 < 171.0)\n"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("bidir ("), std::string::npos) << out.str();
}

// --algo's configured entries: every label algo_label writes for an algorithm with waves, merge,
// pieces and piece sizes reads back into the same options; other spellings are refused with the
// right one; the old spelling of waves (stagesW) is read with a deprecation message.
TEST(ListedConfig, EveryLabelReadsBackAndOtherSpellingsAreRefused) {
  int labels = 0;
  for (Algo algo : all_algos())
    for (int waves : {0, 2, 7})
      for (int merge : {1, 2, 8})
        for (int pieces : {1, 2, 5, 64})
          for (PieceSizes sizes : {PieceSizes::equal, PieceSizes::halving}) {
            PlanOptions p;
            p.algo = algo;
            p.waves = waves;
            p.merge = merge;
            p.pieces = pieces;
            p.piece_sizes = pieces > 1 ? sizes : PieceSizes::equal;
            const std::string label = algo_label(p);
            const ListedConfig c = parse_listed_config(label);
            EXPECT_EQ(c.label, label);
            EXPECT_EQ(c.options.algo, algo) << label;
            EXPECT_EQ(c.options.waves, p.waves) << label;
            EXPECT_EQ(c.deprecation, "") << label;
            EXPECT_EQ(c.options.merge, merge) << label;
            EXPECT_EQ(c.options.pieces, pieces) << label;
            EXPECT_EQ(c.options.piece_sizes, p.piece_sizes) << label;
            ++labels;
          }
  EXPECT_EQ(labels, 4 * 3 * 3 * 4 * 2);
  auto refusal = [](const std::string& text) {
    try {
      parse_listed_config(text);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal("ring:pieces4:merge2").find("write it as 'ring:merge2:pieces4'"), std::string::npos);
  EXPECT_NE(refusal("ring:pieces1").find("write it as 'ring'"), std::string::npos);
  EXPECT_NE(refusal("ring:merge2h").find("write it as 'ring:merge2'"), std::string::npos);
  EXPECT_NE(refusal("ring:pieces0").find("pieces takes a count 1..64"), std::string::npos);
  EXPECT_NE(refusal("ring:pieces65").find("pieces takes a count 1..64"), std::string::npos);
  EXPECT_NE(refusal("ring:pieces").find("pieces takes a count"), std::string::npos);
  EXPECT_NE(refusal("ring:pieces-2").find("pieces takes a count"), std::string::npos);
  EXPECT_NE(refusal("ring:pieces2:waves2").find("write it as 'ring:waves2:pieces2'"), std::string::npos);
  EXPECT_NE(refusal("ring:waves1").find("write it as 'ring'"), std::string::npos);
  EXPECT_NE(refusal("ring:waves0").find("waves takes a count 1..64"), std::string::npos);
  EXPECT_NE(refusal("ring:waves65").find("waves takes a count 1..64"), std::string::npos);
  EXPECT_NE(refusal("ring:stages0").find("stages takes a count 1..64"), std::string::npos);
  EXPECT_NE(refusal("ring:stages99999").find("stages takes a count 1..64"), std::string::npos);
  EXPECT_NE(refusal("pipelined:stages4").find("pipelined's stages are not an entry's option (give --stages)"),
            std::string::npos);
  const ListedConfig old = parse_listed_config("ring:stages2:pieces2");
  EXPECT_EQ(old.label, "ring:waves2:pieces2");
  EXPECT_EQ(old.options.waves, 2);
  EXPECT_EQ(old.deprecation,
            "'ring:stages2:pieces2' is deprecated: the ring's waves are written 'ring:waves2:pieces2'");
  EXPECT_NE(refusal("ring:").find("unknown option ''"), std::string::npos);
  EXPECT_NE(refusal("rings:pieces2").find("'rings:pieces2': unknown algorithm 'rings'"), std::string::npos);
  // Per op: gemm_rs takes no merge, sequential no pieces; the ring's options are kept.
  BenchOptions o;
  o.plan.stages = 3;
  EXPECT_THROW(plan_options_of(o, Op::gemm_rs, parse_listed_config("ring:merge2")), UsageError);
  EXPECT_THROW(plan_options_of(o, Op::ag_gemm, parse_listed_config("sequential:pieces2")), UsageError);
  const PlanOptions p = plan_options_of(o, Op::gemm_rs, parse_listed_config("ring:pieces4h"));
  EXPECT_EQ(p.algo, Algo::ring);
  EXPECT_EQ(p.pieces, 4);
  EXPECT_EQ(p.piece_sizes, PieceSizes::halving);
  EXPECT_EQ(p.stages, 0);  // ring takes no stages
  EXPECT_EQ(plan_options_of(o, Op::ag_gemm, parse_listed_config("pipelined")).stages, 3);
  // gemm_ar's ring in waves: its label (as --waves 2 runs it) is an entry, which no other op takes;
  // an entry's waves replace --waves.
  const PlanOptions waves = options_for(Op::gemm_ar, Algo::ring, {.algo = Algo::ring, .waves = 2});
  EXPECT_EQ(algo_label(waves), "ring:waves2");
  o.plan.waves = 3;
  EXPECT_EQ(plan_options_of(o, Op::gemm_ar, parse_listed_config("ring:waves2")), waves);
  EXPECT_EQ(plan_options_of(o, Op::gemm_ar, parse_listed_config("ring:stages2")), waves);
  EXPECT_EQ(plan_options_of(o, Op::gemm_ar, parse_listed_config("ring:pieces2")).waves, 0);
  EXPECT_THROW(plan_options_of(o, Op::gemm_rs, parse_listed_config("ring:waves2")), UsageError);
  EXPECT_EQ(algo_label(options_for(Op::ag_gemm, Algo::pipelined, {.algo = Algo::pipelined, .stages = 4})),
            "pipelined");  // its stages column tells them
}

// The PyTorch ops' algo: one entry for one op, the rest at defaults; refused where the op's algorithm
// does not take it, named as typed (no --algo: the ops have none).
TEST(ListedConfig, EntryOptionsForTheOps) {
  EXPECT_EQ(entry_options(Op::ag_gemm, "ring"), PlanOptions{.algo = Algo::ring});
  EXPECT_EQ(entry_options(Op::gemm_rs, "bidir:pieces4h"),
            (PlanOptions{.algo = Algo::bidir, .pieces = 4, .piece_sizes = PieceSizes::halving}));
  EXPECT_EQ(entry_options(Op::gemm_ar, "ring:waves2").waves, 2);
  EXPECT_EQ(entry_options(Op::gemm_ar, "ring:stages2").waves, 2);  // the old spelling
  EXPECT_EQ(entry_options(Op::ag_gemm, "pipelined").stages, 0);
  auto refusal = [](Op op, const std::string& text) {
    try {
      entry_options(op, text);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal(Op::gemm_rs, "ring:merge2"),
            "'ring:merge2': gemm_rs's ring does not take these options (it would run as ring)");
  EXPECT_EQ(refusal(Op::ag_gemm, "ring:stages2"),
            "'ring:stages2': ag_gemm's ring does not take these options (it would run as ring)");
  EXPECT_NE(refusal(Op::ag_gemm, "auto").find("unknown algorithm 'auto'"), std::string::npos);
  EXPECT_NE(refusal(Op::ag_gemm, "ring:pieces4:merge2").find("write it as 'ring:merge2:pieces4'"), std::string::npos);
}

// An executor of one rank whose run() does nothing: the outputs keep whatever poison() left.
class IdleExecutor : public Executor {
 public:
  std::string backend() const override { return "idle"; }
  int world_size() const override { return 1; }
  std::vector<int> local_ranks() const override { return {0}; }
  HostComm& host() override { return *host_; }
  bool supports(Dtype d) const override { return d == Dtype::f32; }
  GemmLibrary gemm_library() const override { return GemmLibrary::cublaslt; }
  void check_memory(const MemoryNeed&) const override {}
  void prepare(const std::vector<Plan>& plans, Dtype) override {
    buffers_.clear();
    for (const BufferSpec& b : plans.at(0).buffers) buffers_.emplace_back(static_cast<size_t>(b.rows * b.cols), 0.f);
  }
  void write(int, int buffer, const void* bytes, size_t n) override {
    std::memcpy(buffers_.at(buffer).data(), bytes, n);
  }
  void read(int, int buffer, void* bytes, size_t n) override { std::memcpy(bytes, buffers_.at(buffer).data(), n); }
  void poison() override {
    for (size_t b = kBufC; b < buffers_.size(); ++b) std::fill(buffers_[b].begin(), buffers_[b].end(), NAN);
  }
  std::vector<RankRun> run(StepFilter, bool) override { return {RankRun{0, 1.0, {}}}; }

 private:
  std::unique_ptr<HostComm> host_ = make_single_process_comm();
  std::vector<std::vector<float>> buffers_;
};

TEST(RunCase, OutputsNeverWrittenCountAsWrong) {
  IdleExecutor ex;
  BenchOptions o;
  o.m = 6, o.n = 5, o.k = 4;
  o.warmup = 0, o.iters = 1;
  const Problem p = problem_of(o, Op::ag_gemm, 1);
  const Reference ref = make_reference(p, {0}, o.seed, o.dtype);
  CaseWork work;
  work.check = &ref;
  const CaseResult r = run_case(ex, o, Op::ag_gemm, plan_options_of(o, Algo::ring), work);
  EXPECT_TRUE(r.checked);
  EXPECT_EQ(r.wrong, 6 * 5 + 6 * 4);  // all of C and all of the gathered A
  EXPECT_DOUBLE_EQ(r.time_us, 1.0);
}

// Whatever profile is given, the model sizes C and the forwarded sums with the GEMM library of the
// executor that runs (a cpu bf16 run moves f32 sums, also under a GPU profile or an older file).
TEST(ProfileFor, TakesTheExecutorsGemmLibrary) {
  BenchOptions o;
  for (const std::string name : {"", "h200-nvlink", "cpu-2core"}) {
    o.profile = name;
    for (GemmLibrary lib : {GemmLibrary::openblas, GemmLibrary::cublaslt, GemmLibrary::aten})
      EXPECT_EQ(profile_for(o, lib).gemm.library, lib) << name << " " << to_string(lib);
  }
  const Problem p{.op = Op::gemm_rs, .m = 64, .n = 48, .k = 32, .world = 4, .b_layout = BLayout::kn};
  PlanOptions ring;
  ring.algo = Algo::ring;
  o.profile = "h200-nvlink";
  auto comm_us = [&](Dtype d, GemmLibrary lib) {
    return simulate(p, ring, d, profile_for(o, lib), StepFilter::comm_only, false).time_us;
  };
  // The ring's comm alone: bf16 on openblas (f32 sums) moves what f32 does; on cuBLASLt half of it.
  EXPECT_DOUBLE_EQ(comm_us(Dtype::bf16, GemmLibrary::openblas), comm_us(Dtype::f32, GemmLibrary::openblas));
  EXPECT_LT(comm_us(Dtype::bf16, GemmLibrary::cublaslt), comm_us(Dtype::f32, GemmLibrary::cublaslt));
}

TEST(MakeExecutor, UnknownBackendIsAUsageError) {
  EXPECT_THROW(parse_backend("tpu"), UsageError);
  BackendOptions o;
  if (!have_cuda_backend()) {
    o.backend = Backend::cuda;
    EXPECT_THROW(make_executor(o, 0, nullptr), UsageError);
  }
}

TEST(BackendOptions, EveryNameReadsBackAndOthersAreUsageErrors) {
  for (Backend v : {Backend::cpu, Backend::cuda}) EXPECT_EQ(parse_backend(to_string(v)), v);
  for (CudaTransport v : {CudaTransport::nccl, CudaTransport::local, CudaTransport::host})
    EXPECT_EQ(parse_cuda_transport(to_string(v)), v);
  for (LinkCopy v : {LinkCopy::engine, LinkCopy::sm}) EXPECT_EQ(parse_link_copy(to_string(v)), v);
  for (GemmAlgo v : {GemmAlgo::heuristic, GemmAlgo::timed}) EXPECT_EQ(parse_gemm_algo(to_string(v)), v);
  EXPECT_EQ(to_string(CudaTransport::host), "host");
  EXPECT_THROW(parse_cuda_transport("mpi"), UsageError);
  EXPECT_THROW(parse_link_copy("dma"), UsageError);
  EXPECT_THROW(parse_gemm_algo("fastest"), UsageError);
}

}  // namespace
