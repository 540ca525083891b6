// test_measured_choice.cpp: auto's measured choice (src/sim/measured_choice.hpp) with faked
// timings: which candidates are timed, the pick agreed across processes (threads joined by an
// in-memory HostComm) when their timings differ, and the decision kept per process and in a tuning
// cache (source "auto", read back as measured on the next process's first call).
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "collmm/plan.hpp"
#include "measured_choice.hpp"

using namespace collmm;

namespace {

// P processes as threads: every allgather waits for all P and returns what each sent.
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), strings_(static_cast<size_t>(n)), numbers_(static_cast<size_t>(n)) {}
  template <class T>
  std::vector<T> exchange(int me, const T& mine, std::vector<T>& slots, std::vector<T>& result) {
    std::unique_lock<std::mutex> lock(mutex_);
    const long generation = generation_;
    slots[static_cast<size_t>(me)] = mine;
    if (++arrived_ == n_) {
      result = slots;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
    return result;
  }
  int n_;
  std::vector<std::string> strings_, strings_out_;
  std::vector<std::vector<double>> numbers_, numbers_out_;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  long generation_ = 0;
};

class ThreadHost : public HostComm {
 public:
  ThreadHost(ThreadGroup& g, int me) : g_(g), me_(me) {}
  int proc() const override { return me_; }
  int procs() const override { return g_.n_; }
  void barrier() override { allgather(std::string()); }
  std::vector<std::string> allgather(const std::string& mine) override {
    return g_.exchange(me_, mine, g_.strings_, g_.strings_out_);
  }
  std::vector<double> allgather(const std::vector<double>& mine) override {
    std::vector<double> all;
    for (const auto& v : g_.exchange(me_, mine, g_.numbers_, g_.numbers_out_))
      all.insert(all.end(), v.begin(), v.end());
    return all;
  }
  [[noreturn]] void abort(int) override { throw std::logic_error("abort"); }

 private:
  ThreadGroup& g_;
  int me_;
};

// Runs fn(host) on P threads; returns each one's result.
template <class R, class F>
std::vector<R> on_processes(int p, F fn) {
  ThreadGroup group(p);
  std::vector<R> results(static_cast<size_t>(p));
  std::vector<std::thread> threads;
  for (int q = 0; q < p; ++q)
    threads.emplace_back([&, q] {
      ThreadHost host(group, q);
      results[static_cast<size_t>(q)] = fn(host);
    });
  for (std::thread& t : threads) t.join();
  return results;
}

PlanOptions opts(Algo a, int stages = 0, int lanes = 1) {
  return PlanOptions{.algo = a, .stages = stages, .post = Post::comm_first, .gemm_lanes = lanes};
}

// A tuning cache's path in a directory of its own, with no file there yet.
std::string fresh_cache_path(const std::string& name) {
  const std::string dir = testing::TempDir() + "/" + name;
  std::filesystem::create_directories(dir);
  const std::string cache = dir + "/tune.json";
  std::filesystem::remove(cache);
  return cache;
}

Choice choice_of(const std::vector<std::pair<PlanOptions, double>>& predicted) {
  Choice c;
  for (const auto& [o, us] : predicted) c.alternatives.push_back({o, us, -1});
  c.options = c.alternatives.front().options;
  c.predicted_us = c.alternatives.front().predicted_us;
  c.source = "model";
  return c;
}

TEST(MeasuredChoice, CandidatesWithinTheMarginBoundedWithSequentialAmongThem) {
  const Choice c = choice_of({{opts(Algo::ring), 100},
                              {opts(Algo::bidir), 104},
                              {opts(Algo::ring, 0, 2), 110},
                              {opts(Algo::pipelined, 4), 115},
                              {opts(Algo::bidir, 0, 2), 118},
                              {opts(Algo::sequential), 190}});
  MeasureSettings s;
  s.margin = 0.25;
  s.max_candidates = 4;
  const std::vector<Alternative> t = candidates_to_time(c, s);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].options, opts(Algo::ring));
  EXPECT_EQ(t[1].options, opts(Algo::bidir));
  EXPECT_EQ(t[2].options, opts(Algo::ring, 0, 2));
  EXPECT_EQ(t[3].options, opts(Algo::sequential));  // in place of the 4th within the margin
  s.margin = 0.05;
  const std::vector<Alternative> near = candidates_to_time(c, s);
  ASSERT_EQ(near.size(), 3u);
  EXPECT_EQ(near[2].options, opts(Algo::sequential));
  EXPECT_TRUE(needs_measuring(c, s));
  s.measure = AutoMeasure::off;
  EXPECT_FALSE(needs_measuring(c, s));
  // One candidate (one rank): nothing to time.
  EXPECT_FALSE(needs_measuring(choice_of({{opts(Algo::ring), 10}}), MeasureSettings{}));
}

TEST(MeasuredChoice, TheChoicesOwnPickIsAlwaysTimed) {
  // A tuning cache's fastest measured (the pick, source "measured") that the model ranks far off.
  Choice c = choice_of({{opts(Algo::pipelined, 8), 100},
                        {opts(Algo::pipelined, 4), 101},
                        {opts(Algo::pipelined, 8, 2), 102},
                        {opts(Algo::bidir), 103},
                        {opts(Algo::sequential), 110},
                        {opts(Algo::ring), 180}});
  c.alternatives.back().measured_us = 60;
  c.options = opts(Algo::ring);
  c.source = "measured";
  MeasureSettings s;
  s.max_candidates = 4;
  const std::vector<Alternative> t = candidates_to_time(c, s);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].options, opts(Algo::pipelined, 8));
  EXPECT_EQ(t[1].options, opts(Algo::pipelined, 4));
  EXPECT_EQ(t[2].options, opts(Algo::sequential));  // fastest predicted first
  EXPECT_EQ(t[3].options, opts(Algo::ring));
  // A bound of two: the pick and sequential.
  s.max_candidates = 2;
  const std::vector<Alternative> two = candidates_to_time(c, s);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].options, opts(Algo::sequential));
  EXPECT_EQ(two[1].options, opts(Algo::ring));
  // The pick is sequential itself: no candidate twice.
  c.options = opts(Algo::sequential);
  const std::vector<Alternative> seq = candidates_to_time(c, s);
  ASSERT_EQ(seq.size(), 2u);
  EXPECT_EQ(seq[0].options, opts(Algo::pipelined, 8));
  EXPECT_EQ(seq[1].options, opts(Algo::sequential));
}

TEST(MeasuredChoice, ACachedFastestFarFromTheModelStaysTheCandidateToBeat) {
  // The model's worst-ranked algorithm measured fastest in a tuning cache (collmm-bench --algo all
  // ran it), and fastest again in auto's timing: auto keeps it. Before, auto timed only the
  // model's best few, so it ran a slower plan than the cache's.
  const std::string cache = fresh_cache_path("measured_choice_far");
  const Problem p{.op = Op::gemm_rs, .m = 512, .n = 512, .k = 512, .world = 2, .b_layout = BLayout::kn};
  const Profile profile = builtin_profile("cpu-2core");
  MeasureSettings s;
  const Choice model = choose(p, Dtype::f32, profile);
  ASSERT_GE(model.alternatives.size(), 3u);
  const PlanOptions far = model.alternatives.back().options;
  ASSERT_NE(far.algo, Algo::sequential);
  ASSERT_GT(model.alternatives.back().predicted_us, model.alternatives.front().predicted_us * (1 + s.margin));
  update_tuning_cache(cache, {TuningEntry{p, Dtype::f32, far, 40.0, "bench"},
                              TuningEntry{p, Dtype::f32, opts(Algo::sequential), 45.0, "bench"}});
  const auto decided = on_processes<std::pair<AutoChooser::Decision, std::vector<PlanOptions>>>(2, [&](HostComm& host) {
    AutoChooser chooser;
    std::vector<PlanOptions> timed;
    const AutoChooser::Decision d =
        chooser.decide(host, p, Dtype::f32, profile, cache, s, [&](const PlanOptions& o, int, int) {
          timed.push_back(o);
          return o == far ? 41.0 : o.algo == Algo::sequential ? 46.0 : 80.0;
        });
    return std::make_pair(d, timed);
  });
  for (const auto& [d, timed] : decided) {
    EXPECT_EQ(d.options, far) << d.printed;
    EXPECT_NE(std::find(timed.begin(), timed.end(), far), timed.end()) << d.printed;
  }
}

TEST(MeasuredChoice, EveryProcessPicksTheSameFromTheSlowestTimes) {
  // Process 0 alone would pick ring (its fastest); process 2's ring is slow, so ring's agreed time
  // is 300 and bidir (slowest rank 130) wins on every process.
  const std::vector<std::vector<double>> times{{100, 120, 150}, {110, 125, 150}, {300, 130, 151}};
  const std::vector<Alternative> candidates{
      {opts(Algo::ring), 90, -1}, {opts(Algo::bidir), 95, -1}, {opts(Algo::sequential), 140, -1}};
  MeasureSettings s;
  const auto picks = on_processes<MeasuredChoice>(3, [&](HostComm& host) {
    size_t i = 0;
    auto time = [&](const PlanOptions& o, int warmup, int iters) {
      EXPECT_EQ(o, candidates[i].options);
      EXPECT_EQ(warmup, 1);
      EXPECT_EQ(iters, 3);
      return times[static_cast<size_t>(host.proc())][i++];
    };
    return measure_choice(candidates, time, host, s);
  });
  for (const MeasuredChoice& m : picks) {
    EXPECT_EQ(m.options, opts(Algo::bidir));
    EXPECT_EQ(m.time_us, 130);
    ASSERT_EQ(m.timed.size(), 3u);
    EXPECT_EQ(m.timed[0].time_us, 300);
    EXPECT_EQ(m.timed[0].proc_us, (std::vector<double>{100, 110, 300}));
    EXPECT_EQ(m.timed[2].time_us, 151);
  }
  const std::string printed = print(picks[0], s);
  EXPECT_NE(printed.find("3 candidates, 1 warm-up + 3 timed runs each"), std::string::npos) << printed;
  EXPECT_NE(printed.find("measured      130.0 us  <- pick"), std::string::npos) << printed;
}

// The runoff: ring's first pass is an outlier (109 against bidir's 105, within 5%), so both are
// timed again, in the other order and then in order; ring's median over its three passes (101)
// beats bidir's (105). Process 2 is 1 us slower in every run, so its times are the agreed ones; every
// process times the same candidates in the same order. Without the runoff bidir would be picked.
TEST(MeasuredChoice, CloseCandidatesAreTimedAgainAndTheMedianPassDecides) {
  const std::vector<Alternative> candidates{
      {opts(Algo::ring), 90, -1}, {opts(Algo::bidir), 95, -1}, {opts(Algo::sequential), 140, -1}};
  const std::map<Algo, std::vector<double>> passes{
      {Algo::ring, {109, 100, 101}}, {Algo::bidir, {105, 106, 104}}, {Algo::sequential, {200}}};
  auto run = [&](const MeasureSettings& s) {
    return on_processes<std::pair<MeasuredChoice, std::vector<Algo>>>(3, [&](HostComm& host) {
      std::map<Algo, size_t> calls;
      std::vector<Algo> order;
      auto time = [&](const PlanOptions& o, int, int) {
        order.push_back(o.algo);
        return passes.at(o.algo).at(calls[o.algo]++) + (host.proc() == 2 ? 1.0 : 0.0);
      };
      return std::make_pair(measure_choice(candidates, time, host, s), order);
    });
  };
  const auto with_runoff = run(MeasureSettings{});
  for (const auto& [m, order] : with_runoff) {
    EXPECT_EQ(m.options, opts(Algo::ring));
    EXPECT_EQ(m.time_us, 102);
    EXPECT_EQ(order, (std::vector<Algo>{Algo::ring, Algo::bidir, Algo::sequential, Algo::bidir, Algo::ring, Algo::ring,
                                        Algo::bidir}));
    EXPECT_EQ(m.timed[0].pass_us, (std::vector<double>{110, 101, 102}));
    EXPECT_EQ(m.timed[0].proc_us, (std::vector<double>{101, 101, 102}));
    EXPECT_EQ(m.timed[1].time_us, 106);
    EXPECT_EQ(m.timed[2].pass_us, (std::vector<double>{201}));
  }
  const std::string printed = print(with_runoff[0].first, MeasureSettings{});
  EXPECT_NE(printed.find("those within 5% of the fastest again, up to 2 more passes"), std::string::npos) << printed;
  EXPECT_NE(printed.find("measured      102.0 us  <- pick  (passes 110.0 101.0 102.0)"), std::string::npos) << printed;
  MeasureSettings one_pass;
  one_pass.runoff_passes = 0;
  for (const auto& [m, order] : run(one_pass)) {
    EXPECT_EQ(m.options, opts(Algo::bidir));
    EXPECT_EQ(order.size(), 3u);
  }
  // Far apart after the first pass: no runoff.
  MeasureSettings narrow;
  narrow.runoff_margin = 0.01;
  for (const auto& [m, order] : run(narrow)) {
    EXPECT_EQ(m.options, opts(Algo::bidir));
    EXPECT_EQ(order.size(), 3u);
  }
}

TEST(MeasuredChoice, CandidatesThatDifferAcrossProcessesAreRefusedBeforeAnyRun) {
  const auto errors = on_processes<std::string>(2, [&](HostComm& host) -> std::string {
    std::vector<Alternative> c{{opts(Algo::ring), 1, -1}, {opts(Algo::sequential), 2, -1}};
    if (host.proc() == 1) c[0].options = opts(Algo::bidir);
    bool ran = false;
    try {
      measure_choice(
          c, [&](const PlanOptions&, int, int) { return ran = true, 1.0; }, host, MeasureSettings{});
    } catch (const UsageError& e) {
      return ran ? "ran" : e.what();
    }
    return "no error";
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("ranks disagree on auto candidate 0"), std::string::npos) << e;
}

TEST(MeasuredChoice, RunoffSettingsThatDifferAcrossProcessesAreRefused) {
  const auto errors = on_processes<std::string>(2, [&](HostComm& host) -> std::string {
    const std::vector<Alternative> c{{opts(Algo::ring), 1, -1}, {opts(Algo::sequential), 2, -1}};
    MeasureSettings s;
    if (host.proc() == 1) s.runoff_passes = 1;
    try {
      measure_choice(
          c, [](const PlanOptions&, int, int) { return 1.0; }, host, s);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("ranks disagree on auto runoff passes"), std::string::npos) << e;
}

TEST(MeasuredChoice, DecisionKeptPerProcessAndInTheTuningCache) {
  const std::string cache = fresh_cache_path("measured_choice");
  const Problem p{.op = Op::ag_gemm, .m = 512, .n = 4096, .k = 4096, .world = 2, .b_layout = BLayout::nk};
  const Profile profile = builtin_profile("h200-nvlink");
  MeasureSettings s;
  // Faked: sequential is the fastest on every process (small M), 2 us slower on process 1.
  auto faked = [](HostComm& host, int& calls) {
    return [&host, &calls](const PlanOptions& o, int, int) {
      ++calls;
      return (o.algo == Algo::sequential ? 50.0 : 80.0) + 2.0 * host.proc();
    };
  };
  const auto first = on_processes<std::pair<AutoChooser::Decision, int>>(2, [&](HostComm& host) {
    AutoChooser chooser;
    int calls = 0;
    const AutoChooser::Decision d = chooser.decide(host, p, Dtype::bf16, profile, cache, s, faked(host, calls));
    const int after_first = calls;
    chooser.decide(host, p, Dtype::bf16, profile, cache, s, faked(host, calls));  // kept: not timed again
    EXPECT_EQ(calls, after_first);
    return std::make_pair(d, calls);
  });
  for (const auto& [d, calls] : first) {
    EXPECT_EQ(d.source, "measured");
    EXPECT_EQ(d.options.algo, Algo::sequential);
    EXPECT_GE(calls, 2);
    EXPECT_LE(calls, s.max_candidates);
    EXPECT_NE(d.printed.find("# auto measured: "), std::string::npos) << d.printed;
  }
  // The cache holds every timed candidate (the slowest process's time), source "auto", B layout nk.
  const TuningCache written = load_tuning_cache(cache);
  ASSERT_EQ(written.entries.size(), static_cast<size_t>(first[0].second));
  for (const TuningEntry& e : written.entries) {
    EXPECT_EQ(e.source, "auto");
    EXPECT_EQ(e.problem.b_layout, BLayout::nk);
    EXPECT_EQ(e.time_us, e.options.algo == Algo::sequential ? 52.0 : 82.0);
  }
  EXPECT_TRUE(written
                  .find(Problem{.op = Op::ag_gemm, .m = 512, .n = 4096, .k = 4096, .world = 2, .b_layout = BLayout::kn},
                        Dtype::bf16)
                  .empty());

  // A new process (a fresh chooser) with the cache: the measured pick, nothing timed.
  const auto next = on_processes<std::pair<AutoChooser::Decision, int>>(2, [&](HostComm& host) {
    AutoChooser chooser;
    int calls = 0;
    const AutoChooser::Decision d = chooser.decide(host, p, Dtype::bf16, profile, cache, s, faked(host, calls));
    return std::make_pair(d, calls);
  });
  for (const auto& [d, calls] : next) {
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(d.source, "measured");
    EXPECT_EQ(d.options.algo, Algo::sequential);
    EXPECT_NE(d.printed.find("(from the measured;"), std::string::npos) << d.printed;
  }
}

TEST(MeasuredChoice, OffKeepsTheModelsPick) {
  const Problem p{.op = Op::gemm_rs, .m = 8192, .n = 8192, .k = 8192, .world = 2, .b_layout = BLayout::kn};
  const Profile profile = builtin_profile("h200-nvlink");
  MeasureSettings s;
  s.measure = AutoMeasure::off;
  const auto d = on_processes<AutoChooser::Decision>(2, [&](HostComm& host) {
    AutoChooser chooser;
    return chooser.decide(host, p, Dtype::bf16, profile, "", s, [](const PlanOptions&, int, int) -> double {
      throw std::logic_error("timed with measuring off");
    });
  });
  EXPECT_EQ(d[0].source, "model");
  EXPECT_EQ(d[0].options, choose(p, Dtype::bf16, profile).options);
  EXPECT_EQ(d[1].options, d[0].options);
  EXPECT_EQ(parse_auto_measure("off"), AutoMeasure::off);
  EXPECT_THROW(parse_auto_measure("maybe"), UsageError);
}

TEST(MeasuredChoice, CacheEntriesKeepSourceAndLayoutAndOlderFilesRead) {
  const std::string entry =
      R"({"op": "gemm_rs", "m": 64, "n": 32, "k": 16, "world_size": 2, "dtype": "f32", "algo": "ring", "time_us": 5)";
  const TuningCache old = parse_tuning_cache(R"({"entries": [)" + entry + "}]}", "old.json");
  EXPECT_EQ(old.entries.at(0).source, "bench");
  EXPECT_EQ(old.entries.at(0).problem.b_layout, BLayout::kn);
  const TuningCache both =
      parse_tuning_cache(R"({"entries": [)" + entry + R"(, "b_layout": "nk", "source": "auto"}]})", "new.json");
  EXPECT_EQ(both.entries.at(0).source, "auto");
  EXPECT_EQ(both.entries.at(0).problem.b_layout, BLayout::nk);
  try {
    parse_tuning_cache(R"({"entries": [)" + entry + R"(, "source": "guess"}]})", "bad.json");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 0: source must be bench or auto"), std::string::npos) << e.what();
  }
}

TEST(MeasuredChoice, ChoiceRoundTripsThroughJson) {
  const Choice c =
      choose(Problem{.op = Op::ag_gemm, .m = 4096, .n = 4096, .k = 4096, .world = 8, .b_layout = BLayout::kn},
             Dtype::bf16, builtin_profile("h200-nvlink"));
  const Choice back = choice_from_json(nlohmann::json::parse(to_json(c).dump()));
  EXPECT_EQ(print(back), print(c));
}

}  // namespace

// A tie (within 1% of the fastest, on the agreed times) goes to the plan of fewest host steps: pipelined
// with 8 stages measured 0.5% faster than the ring loses to it. Apart by more than the tie (ring
// 203 against 200 on process 0's clock), pipelined wins on every process, though process 1 alone
// timed the ring at 198, faster: the agreed (slowest) times decide.
TEST(MeasuredChoice, ATieGoesToTheFewestSteps) {
  auto run = [](double ring_us, double pipelined_us) {
    const std::vector<Alternative> candidates{
        {opts(Algo::pipelined, 8), 90, -1, 24}, {opts(Algo::ring), 95, -1, 4}, {opts(Algo::sequential), 140, -1, 2}};
    return on_processes<MeasuredChoice>(2, [&](HostComm& host) {
      auto time = [&](const PlanOptions& o, int, int) {
        if (o.algo == Algo::sequential) return 300.0;
        if (o.algo == Algo::ring) return host.proc() == 0 ? ring_us : ring_us - 5;
        return pipelined_us;
      };
      return measure_choice(candidates, time, host, MeasureSettings{});
    });
  };
  for (const MeasuredChoice& m : run(201.0, 200.0)) {
    EXPECT_EQ(m.options, opts(Algo::ring));
    EXPECT_EQ(m.time_us, 201.0);
    EXPECT_EQ(m.timed[1].steps, 4);
  }
  for (const MeasuredChoice& m : run(203.0, 200.0)) EXPECT_EQ(m.options, opts(Algo::pipelined, 8));
  const std::string printed = print(run(201.0, 200.0)[0], MeasureSettings{});
  EXPECT_NE(printed.find("within 1% a tie, to the fewest host steps"), std::string::npos) << printed;
  EXPECT_NE(printed.find("  4 host steps  predicted       95.0 us  measured      201.0 us  <- pick"), std::string::npos)
      << printed;
}

// choose() gives every alternative the steps the host issues per call: its plan's (h200-nvlink: NCCL
// runs a collective as one call), its lowered plan's where the profile's transport lowers
// collectives into rings (h200-host: sequential's one allgather is P-1 sendrecvs and a copy). They
// travel through the JSON that process 0 sends the others.
TEST(MeasuredChoice, AlternativesCarryTheirHostSteps) {
  Problem p;
  p.op = Op::ag_gemm, p.m = 1024, p.n = 1024, p.k = 1024, p.world = 4;
  for (const char* name : {"h200-nvlink", "h200-host"}) {
    const bool lowered = std::string(name) == "h200-host";
    const Choice c = choose(p, Dtype::bf16, builtin_profile(name));
    for (const Alternative& a : c.alternatives) {
      const Plan plan = make_plan(p, a.options, 0);
      EXPECT_EQ(a.steps, static_cast<int>((lowered ? lower_collectives(plan).plan : plan).steps.size()))
          << name << " " << to_string(a.options);
      if (a.options.algo == Algo::sequential) {
        EXPECT_EQ(a.steps, lowered ? 5 : 2) << name;
      }
    }
    const Choice back = choice_from_json(to_json(c));
    for (size_t i = 0; i < c.alternatives.size(); ++i) EXPECT_EQ(back.alternatives[i].steps, c.alternatives[i].steps);
  }
}
