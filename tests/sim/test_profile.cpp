// test_profile.cpp: the cost model's formulas, profiles through JSON and back, and calibration
// recovering known inputs from synthetic timers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "calibrate.hpp"
#include "collmm/sim.hpp"
#include "cost_model.hpp"
#include "profile_json.hpp"

namespace collmm {
namespace {

// Synthetic timers for the calibration tests: GEMMs at 1 TFLOP/s, messages 3 us + bytes / 5 GB/s.
double linear_gemm(int64_t m, int64_t n, int64_t k) { return 2.0 * m * n * k / 1e6; }
double linear_comm(double bytes) { return 3 + bytes / 5e3; }

// A spec of 512-sized GEMM shapes over the named base profile, for `dtype`.
CalibrationSpec spec_over(const char* base, Dtype dtype) {
  CalibrationSpec spec;
  spec.dtype = dtype;
  spec.gemm_shapes = calibration_shapes(512);
  spec.base = builtin_profile(base);
  return spec;
}

TEST(CostModel, TableIsExactAtItsPointsAndBetweenThem) {
  const Profile h = builtin_profile("h200-nvlink");
  EXPECT_DOUBLE_EQ(gemm_rate_tflops(h, 8192, 8192, 8192, Dtype::bf16), 796);
  EXPECT_DOUBLE_EQ(gemm_rate_tflops(h, 1024, 8192, 8192, Dtype::bf16), 727);
  const double mid = gemm_rate_tflops(h, 3000, 8192, 8192, Dtype::bf16);
  EXPECT_GT(mid, 700);
  EXPECT_LT(mid, 796);
  // 8192^3 bf16: 2 * 8192^3 / 796e12 s + 1 us overhead.
  EXPECT_NEAR(gemm_time_us(h, 8192, 8192, 8192, Dtype::bf16), 2.0 * 8192 * 8192 * 8192 / 796e6 + 1.0, 1e-9);
  // fp8 is not in the table: the roofline peak.
  EXPECT_DOUBLE_EQ(gemm_rate_tflops(h, 4096, 4096, 4096, Dtype::fp8_e4m3), 1400);
  EXPECT_THROW(gemm_time_us(builtin_profile("cpu-2core"), 64, 64, 64, Dtype::fp8_e4m3), UsageError);
}

TEST(CostModel, LinksAndCollectives) {
  Profile p = builtin_profile("h200-ib");  // 8 per node, 370 GB/s / 5 us inside, 45 GB/s / 10 us between
  EXPECT_TRUE(same_node(p, 0, 7));
  EXPECT_FALSE(same_node(p, 7, 8));
  EXPECT_DOUBLE_EQ(message_time_us(p, 0, 1, 370e3, 1), 5 + 1);
  EXPECT_DOUBLE_EQ(message_time_us(p, 0, 1, 370e3, 2), 5 + 2);
  EXPECT_DOUBLE_EQ(message_time_us(p, 7, 8, 45e3, 1), 10 + 1);
  EXPECT_DOUBLE_EQ(collective_time_us(p, 8, 370e3, false), 7 * (5 + 1));
  EXPECT_DOUBLE_EQ(collective_time_us(p, 16, 45e3, false), 15 * (10 + 1));
  EXPECT_DOUBLE_EQ(collective_time_us(p, 1, 1e9, true), copy_time_us(p, 1e9));  // one rank: a local copy
  EXPECT_DOUBLE_EQ(copy_time_us(p, 4300e3), 2);
  EXPECT_DOUBLE_EQ(add_time_us(p, 4300e3), 3);
}

// A transport that lowers collectives (the host bed): a reduce-scatter's step pays the hop from its
// receive to its add, which then runs after the transfer; an allgather's step has no add and pays
// none.
TEST(CostModel, LoweredReduceScatterStepsPayTheHopAllgatherStepsNone) {
  Profile p = builtin_profile("h200-host");  // 48 GB/s, 10 us; 8 us an add after a receive
  EXPECT_DOUBLE_EQ(p.links.collective_step_us, 8);
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 48e3, false), 3 * (10 + 1));
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 48e3, true), 3 * (10 + 1 + add_time_us(p, 48e3) + 8));
  EXPECT_DOUBLE_EQ(add_after_receive_us(p, 48e3), add_time_us(p, 48e3) + 8);
  p.links.collective_step_us = 0;  // not lowered: the add hides under the transfer
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 48e3, true), 3 * (10 + 1));
}

// Messages of one step that go the same way: at once, they pay the latency once (NCCL's grouped
// sends); queued on one copy stream (the host bed), each pays it.
TEST(CostModel, SerialMessagesPayTheLatencyEach) {
  Profile p = builtin_profile("h200-host");
  EXPECT_TRUE(p.links.serial_messages);
  EXPECT_DOUBLE_EQ(message_time_us(p, 0, 1, 48e3, 1), 10 + 1);
  EXPECT_DOUBLE_EQ(message_time_us(p, 0, 1, 48e3, 2), 2 * 10 + 2);
  p.links.serial_messages = false;
  EXPECT_DOUBLE_EQ(message_time_us(p, 0, 1, 48e3, 2), 10 + 2);
  EXPECT_FALSE(builtin_profile("h200-nvlink").links.serial_messages);
  // Saved and read back.
  EXPECT_TRUE(profile_from_json(to_json(builtin_profile("h200-host"))).links.serial_messages);
}

// In gemm_rs's rings every step's sum is received, added, then sent on: with a link this slow
// beside small GEMMs, the adds lie on the critical path, and the first add after each receive pays
// the hop (bidir's second add of a step follows the first, not the receive): P-1 hops either way.
TEST(CostModel, TheRingsAddsAfterAReceivePayTheHop) {
  Problem p;
  p.op = Op::gemm_rs, p.m = 256, p.n = 256, p.k = 1024, p.world = 4;
  for (Algo algo : {Algo::ring, Algo::bidir}) {
    PlanOptions o;
    o.algo = algo;
    Profile prof = builtin_profile("h200-host");
    const double with_hop = simulate(p, o, Dtype::bf16, prof, StepFilter::all, false).time_us;
    prof.links.collective_step_us = 0;
    const double without = simulate(p, o, Dtype::bf16, prof, StepFilter::all, false).time_us;
    EXPECT_NEAR(with_hop - without, 3 * 8, 1e-6) << to_string(algo);
  }
}

TEST(CostModel, MeasuredCollectiveReplacesTheRing) {
  Profile p = builtin_profile("cpu-2core");  // links 4 GB/s, 2 us
  const double ring = collective_time_us(p, 4, 4e6, false);
  EXPECT_DOUBLE_EQ(ring, 3 * (2 + 1000));
  p.reduce_scatter = {1, 50, {}};  // 1 GB/s, 50 us per ring step
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 4e6, true), 3 * (50 + 4000));
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 4e6, false), ring);  // allgather not measured: the ring
  p.allgather = {8, 0, {}};
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 4e6, false), 3 * 500);
  EXPECT_DOUBLE_EQ(collective_time_us(p, 1, 4e6, true), copy_time_us(p, 4e6));
}

// A collective with measured points: a ring step interpolates between them, holds the first
// point's time below it and adds the extra bytes at gbps above the last.
TEST(CostModel, MeasuredCollectivePointsAreInterpolated) {
  Profile p = builtin_profile("cpu-2core");
  p.reduce_scatter = {1, 50, {{1e6, 100}, {4e6, 400}}};
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 2e6, true), 3 * 200.0);
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 1e6, true), 3 * 100.0);
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 0.25e6, true), 3 * 100.0);
  EXPECT_DOUBLE_EQ(collective_time_us(p, 4, 8e6, true), 3 * (400 + 4000.0));
  // JSON keeps them; points out of order or not positive are refused.
  EXPECT_EQ(profile_from_json(to_json(p)).reduce_scatter.points, p.reduce_scatter.points);
  nlohmann::json j = to_json(p);
  j["collectives"]["reduce_scatter"]["points"] = {{4e6, 400}, {1e6, 100}};
  EXPECT_THROW(profile_from_json(j), UsageError);
  j["collectives"]["reduce_scatter"]["points"] = {{1e6, 0}};
  EXPECT_THROW(profile_from_json(j), UsageError);
}

// Calibration keeps what it measured: a reduce-scatter whose small parts are far cheaper than the
// line through the large ones is predicted at each measured size as measured.
TEST(Calibrate, CollectivePointsAreKept) {
  const int P = 4;
  auto gemm = linear_gemm;
  auto comm = linear_comm;
  auto step = [](double part) { return part < 2e6 ? 5 + part / 20e3 : 200 + part / 1e3; };
  auto coll = [&](StepKind, double part) { return (P - 1) * step(part); };
  CalibrationSpec spec = spec_over("cpu-2core", Dtype::f32);
  spec.comm_bytes = calibration_sizes(16e6);
  spec.world = P;
  spec.collective_bytes = {65536, 1048576, 16777216};
  const Profile p = calibrate(spec, gemm, comm, coll);
  ASSERT_EQ(p.reduce_scatter.points.size(), 3u);
  for (double b : spec.collective_bytes)
    EXPECT_NEAR(collective_time_us(p, P, b, true), coll(StepKind::reduce_scatter, b), 1e-9);
  // The line through all three would put 64 KiB far off (its intercept is ~hundreds of us).
  const double line = (P - 1) * (p.reduce_scatter.latency_us + 65536 / (p.reduce_scatter.gbps * 1e3));
  EXPECT_GT(std::abs(line - coll(StepKind::reduce_scatter, 65536)), 50.0);
  // A small size slower than a larger one (noise) is capped by the larger one's time.
  auto noisy = [&](StepKind, double part) { return (P - 1) * (part < 1e5 ? 4000.0 : step(part)); };
  const Profile q = calibrate(spec, gemm, comm, noisy);
  EXPECT_DOUBLE_EQ(q.reduce_scatter.points[0].second, step(1048576));
  EXPECT_DOUBLE_EQ(q.reduce_scatter.points[1].second, step(1048576));
}

TEST(Profile, JsonRoundTripAndFiles) {
  for (const std::string& name : builtin_profile_names()) {
    const Profile a = builtin_profile(name);
    const std::string path = testing::TempDir() + "collmm_profile_" + name + ".json";
    save_profile(a, path);
    const Profile b = load_profile(path);
    std::remove(path.c_str());
    EXPECT_EQ(to_json(a), to_json(b)) << name;
    EXPECT_EQ(b.name, name);
  }
  // The measured collectives go through JSON too; a profile without them is refused (every field
  // the model reads is required).
  Profile c = builtin_profile("cpu-2core");
  c.allgather = {3.5, 12, {}};
  c.reduce_scatter = {0.75, 40, {}};
  const Profile c2 = profile_from_json(to_json(c));
  EXPECT_DOUBLE_EQ(c2.allgather.gbps, 3.5);
  EXPECT_DOUBLE_EQ(c2.allgather.latency_us, 12);
  EXPECT_DOUBLE_EQ(c2.reduce_scatter.gbps, 0.75);
  EXPECT_DOUBLE_EQ(c2.reduce_scatter.latency_us, 40);
  nlohmann::json old = to_json(c);
  old.erase("collectives");
  EXPECT_THROW(profile_from_json(old), UsageError);
  const nlohmann::json good = to_json(c);
  auto with = [&](const char* pointer, const nlohmann::json& v) {
    nlohmann::json j = good;
    j[nlohmann::json::json_pointer(pointer)] = v;
    return j;
  };
  EXPECT_THROW(profile_from_json(with("/collectives/allgather/gbps", -1)), UsageError);
  EXPECT_THROW(load_profile("no-such-profile"), UsageError);
  EXPECT_THROW(profile_from_json(with("/gemm/model", "magic")), UsageError);
  EXPECT_THROW(profile_from_json(with("/contention/gemm_slowdown", 0.5)), UsageError);
}

// A profile file that is not JSON, or holds a value of the wrong type: the path, the place of the
// first error, nlohmann's words without their code.
TEST(Profile, ABadFileIsNamedWithThePlaceOfItsError) {
  const std::string path = testing::TempDir() + "collmm_profile_bad.json";
  auto message = [&](const std::string& text) {
    std::ofstream(path) << text;
    try {
      load_profile(path);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("{\"name\":\n"), "profile '" + path + "'" +
                                         " is not valid JSON: parse error at line 2, column 1: syntax error while "
                                         "parsing value - unexpected end of input; expected '[', '{', or a literal");
  const std::string wrong_type = message(R"({"name": 3})");
  EXPECT_EQ(wrong_type.rfind("profile '" + path + "': name: ", 0), 0u) << wrong_type;
  EXPECT_EQ(wrong_type.find("json.exception"), std::string::npos) << wrong_type;
  std::remove(path.c_str());
}

// The host section goes through JSON; a profile without it, or without one of its fields, is refused.
TEST(Profile, HostIssueRoundTrip) {
  for (const std::string& name : builtin_profile_names()) {
    EXPECT_EQ(builtin_profile(name).host.issue_us, 0) << name;
    EXPECT_FALSE(builtin_profile(name).host.shared) << name;
  }
  Profile a = builtin_profile("h200-nvlink");
  a.host = {6.25, true};
  const nlohmann::json j = to_json(a);
  EXPECT_EQ(j.at("host").at("issue_us").get<double>(), 6.25);
  EXPECT_TRUE(j.at("host").at("shared").get<bool>());
  const std::string path = testing::TempDir() + "collmm_profile_host.json";
  save_profile(a, path);
  const Profile b = load_profile(path);
  std::remove(path.c_str());
  EXPECT_DOUBLE_EQ(b.host.issue_us, 6.25);
  EXPECT_TRUE(b.host.shared);
  EXPECT_EQ(to_json(b), j);
  nlohmann::json old = j;
  old.erase("host");
  EXPECT_THROW(profile_from_json(old), UsageError);  // required, as every field the model reads
  nlohmann::json half = j;
  half["host"].erase("shared");
  EXPECT_THROW(profile_from_json(half), UsageError);
  nlohmann::json bad = j;
  bad["host"]["issue_us"] = -1;
  EXPECT_THROW(profile_from_json(bad), UsageError);
}

// A profile calibrated before the model dropped the shared device rate holds "device": {"ranks": R}
// and per-point "device_tflops": the model does not read them, so they are refused as unknown
// fields rather than taken silently; so is any misspelt key, naming where it is.
TEST(Profile, UnknownFieldsAreRefused) {
  const nlohmann::json good = to_json(builtin_profile("h200-nvlink"));
  auto refusal = [](const nlohmann::json& j) {
    try {
      profile_from_json(j);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json j = good;
  j["device"] = {{"ranks", 8}};
  EXPECT_NE(refusal(j).find("unknown field 'device'"), std::string::npos) << refusal(j);
  j = good;
  j["gemm"]["table"][0]["device_tflops"] = 900;
  EXPECT_NE(refusal(j).find("unknown field 'gemm.table[0].device_tflops'"), std::string::npos) << refusal(j);
  j = good;
  j["links"]["intra_gpbs"] = 100;
  EXPECT_NE(refusal(j).find("unknown field 'links.intra_gpbs'"), std::string::npos) << refusal(j);
}

// Every field the model reads is required: each one taken out of a whole profile is refused, naming
// it; only name and notes (not read by the model) may be left out.
TEST(Profile, EveryFieldTheModelReadsIsRequired) {
  const nlohmann::json good = to_json(builtin_profile("h200-host"));
  int tried = 0;
  const nlohmann::json fields = good.flatten();
  for (const auto& [pointer, value] : fields.items()) {
    if (pointer.find("/table/") != std::string::npos || pointer.find("/peak_tflops/") != std::string::npos ||
        pointer.find("/points") != std::string::npos)
      continue;  // list items and a map of dtypes: their own tests
    nlohmann::json j = good;
    const nlohmann::json::json_pointer at(pointer);
    const std::string key = at.back();
    j.at(at.parent_pointer()).get_ref<nlohmann::json::object_t&>().erase(key);
    std::string field = pointer.substr(1);
    std::replace(field.begin(), field.end(), '/', '.');
    ++tried;
    if (field == "name" || field == "notes") {
      EXPECT_NO_THROW(profile_from_json(j)) << field;
      continue;
    }
    try {
      profile_from_json(j);
      ADD_FAILURE() << field << " left out was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("missing field " + field), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(tried, 20);
  // A run's dtype needs its GEMM rate: a peak, or with the table model a table point.
  Profile p = profile_from_json(good);
  EXPECT_NO_THROW(check_gemm_rate(p, Dtype::bf16));
  p.gemm.peak_tflops.erase(std::remove_if(p.gemm.peak_tflops.begin(), p.gemm.peak_tflops.end(),
                                          [](const auto& x) { return x.first == Dtype::f32; }),
                           p.gemm.peak_tflops.end());
  EXPECT_THROW(check_gemm_rate(p, Dtype::f32), UsageError);
  p.gemm.model = GemmModel::table;
  p.gemm.table.push_back({Dtype::f32, 64, 64, 64, 1.0});
  EXPECT_NO_THROW(check_gemm_rate(p, Dtype::f32));
}

// A key given twice in one object is refused, naming it (nlohmann alone would keep the last one).
TEST(Profile, ADuplicateKeyIsRefused) {
  const std::string path = testing::TempDir() + "collmm_profile_twice.json";
  std::string text = to_json(builtin_profile("cpu-2core")).dump(2);
  const size_t at = text.find("\"intra_gbps\"");
  text.insert(at, "\"intra_gbps\": 400.0,\n    ");
  { std::ofstream(path) << text; }
  try {
    load_profile(path);
    ADD_FAILURE() << "a duplicate key was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "profile '" + path + "': 'links.intra_gbps' is given twice");
  }
  std::remove(path.c_str());
}

// The host issue fit: iterations of different mixes give the GEMM launch's and the other
// operations' costs apart; one mix (or figures <= 0) gives one figure, the mean per operation.
TEST(Calibrate, IssueFitTellsGemmsFromTheRest) {
  const HostCost h =
      fit_issue({{8, 32, 8 * 12.0 + 32 * 5.0}, {64, 16, 64 * 12.0 + 16 * 5.0}, {4, 4, 4 * 12.0 + 4 * 5.0}});
  EXPECT_NEAR(h.gemm_issue_us, 12, 1e-9);
  EXPECT_NEAR(h.issue_us, 5, 1e-9);
  const HostCost one = fit_issue({{8, 32, 400}, {16, 64, 800}});  // the same mix twice
  EXPECT_NEAR(one.issue_us, 1200.0 / 120, 1e-9);
  EXPECT_EQ(one.gemm_issue_us, 0);
  EXPECT_EQ(fit_issue({}).issue_us, 0);
  // Nearly proportional mixes (one algorithm with a piece more) give one figure, not an unstable pair.
  const HostCost near = fit_issue({{8, 7, 8 * 30.0 + 7 * 3.0 + 1}, {9, 8, 9 * 30.0 + 8 * 3.0 - 1}});
  EXPECT_EQ(near.gemm_issue_us, 0);
  EXPECT_NEAR(near.issue_us, (8 * 30.0 + 7 * 3.0 + 9 * 30.0 + 8 * 3.0) / 32, 1e-9);
}

// The operations the host issues per iteration: a GEMM is one, a sendrecv one per receive, a
// collective P; summed over the ranks one thread issues, else the busiest rank's.
TEST(Calibrate, IssueCountsFollowTheIssuer) {
  const Problem p{.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  std::vector<Plan> ring, seq;
  for (int r = 0; r < 2; ++r) {
    ring.push_back(make_plan(p, {.algo = Algo::ring}, r));
    seq.push_back(make_plan(p, {.algo = Algo::sequential}, r));
  }
  const IssueSample one = issue_counts(ring, 4, false);
  EXPECT_EQ(one.gemms, 4);   // one GEMM per chunk
  EXPECT_EQ(one.others, 4);  // 3 sendrecvs of one receive, the own chunk's copy
  const IssueSample both = issue_counts(ring, 4, true);
  EXPECT_EQ(both.gemms, 8);
  EXPECT_EQ(both.others, 8);
  const IssueSample s = issue_counts(seq, 4, false);
  EXPECT_EQ(s.gemms, 1);
  EXPECT_EQ(s.others, 4);  // the allgather: P operations
  EXPECT_EQ(s.us, 0);
}

// The contention fit finds the factor at which the simulated ring takes the measured time, and
// gives 1 where the model without contention is already as slow.
TEST(Calibrate, ContentionFitMatchesTheRing) {
  Problem p;
  p.op = Op::ag_gemm, p.m = 1024, p.n = 1024, p.k = 1024, p.world = 2;
  PlanOptions ring;
  ring.algo = Algo::ring;
  Profile prof = builtin_profile("cpu-2core");
  prof.contention = {true, 2.5, 2.5, false};
  const double measured = simulate(p, ring, Dtype::f32, prof, StepFilter::all, false).time_us;
  prof.contention = {false, 1, 1, false};
  EXPECT_NEAR(fit_contention(prof, p, ring, Dtype::f32, measured), 2.5, 1e-4);
  EXPECT_EQ(fit_contention(prof, p, ring, Dtype::f32, 1.0), 1);
}

TEST(Calibrate, RecoversRatesLatencyAndBandwidth) {
  // A machine whose GEMMs run at 2 TFLOP/s at m = 512 and 4 TFLOP/s otherwise, whose link moves
  // 50 GB/s after 3 us.
  auto gemm = [](int64_t m, int64_t n, int64_t k) { return 2.0 * m * n * k / ((m == 512 ? 2 : 4) * 1e6); };
  auto comm = [](double bytes) { return 3 + bytes / 50e3; };
  CalibrationSpec spec;
  spec.dtype = Dtype::bf16;
  spec.gemm_shapes = calibration_shapes(4096);
  spec.comm_bytes = calibration_sizes(256e6);
  spec.base = builtin_profile("h200-nvlink");
  ASSERT_EQ(spec.gemm_shapes.size(), 6u);
  ASSERT_GE(spec.comm_bytes.size(), 3u);
  const std::string path = testing::TempDir() + "collmm_calibrated.json";
  const Profile p = calibrate_to_file(spec, gemm, comm, path);
  const Profile back = load_profile(path);
  std::remove(path.c_str());
  EXPECT_EQ(to_json(p), to_json(back));
  EXPECT_NEAR(p.links.intra_gbps, 50, 1e-9);
  EXPECT_NEAR(p.links.intra_latency_us, 3, 1e-6);
  EXPECT_NEAR(p.links.inter_gbps, 50, 1e-9);
  EXPECT_NEAR(gemm_rate_tflops(p, 512, 4096, 4096, Dtype::bf16), 2, 1e-12);
  EXPECT_NEAR(gemm_rate_tflops(p, 4096, 2048, 4096, Dtype::bf16), 4, 1e-12);
  EXPECT_NEAR(gemm_time_us(p, 2048, 4096, 4096, Dtype::bf16), gemm(2048, 4096, 4096), 1e-9);
  EXPECT_DOUBLE_EQ(p.memory_gbps, spec.base.memory_gbps);  // not measured: kept
  // The bf16 rows of the base table are replaced, not kept beside the new ones.
  for (const GemmPoint& g : p.gemm.table) EXPECT_LT(g.tflops, 5);

  spec.comm_bytes = {1e6};
  EXPECT_THROW(calibrate(spec, gemm, comm), UsageError);
  spec.comm_bytes = {};  // one rank: the GEMM table is measured, the links are the base's
  const Profile one = calibrate(spec, gemm, [](double) -> double { throw std::logic_error("comm timed"); });
  EXPECT_DOUBLE_EQ(one.links.intra_gbps, spec.base.links.intra_gbps);
  EXPECT_NEAR(gemm_time_us(one, 2048, 4096, 4096, Dtype::bf16), gemm(2048, 4096, 4096), 1e-9);
  spec.comm_bytes = {1e6, 2e6};
  EXPECT_THROW(calibrate(spec, gemm, [](double) { return 5.0; }), std::runtime_error);
}

TEST(Calibrate, RecoversCollectivesAndMemory) {
  // A 4-rank job whose library allgather takes 20 us + part / 6 GB/s per ring step, whose
  // reduce-scatter 70 us + part / 1.5 GB/s, and whose adds move 3 x bytes at 12 GB/s.
  const int P = 4;
  auto gemm = linear_gemm;
  auto comm = linear_comm;
  auto coll = [&](StepKind kind, double part) {
    return kind == StepKind::allgather ? (P - 1) * (20 + part / 6e3) : (P - 1) * (70 + part / 1.5e3);
  };
  auto add = [](double bytes) { return 3 * bytes / 12e3; };
  CalibrationSpec spec = spec_over("cpu-2core", Dtype::f32);
  spec.comm_bytes = calibration_sizes(16e6);
  spec.world = P;
  spec.collective_bytes = spec.comm_bytes;
  spec.add_bytes = {1e6, 16e6};
  const std::string path = testing::TempDir() + "collmm_calibrated_colls.json";
  const Profile p = calibrate_to_file(spec, gemm, comm, path, coll, add);
  const Profile back = load_profile(path);
  std::remove(path.c_str());
  EXPECT_EQ(to_json(p), to_json(back));
  EXPECT_NEAR(p.allgather.gbps, 6, 1e-9);
  EXPECT_NEAR(p.allgather.latency_us, 20, 1e-6);
  EXPECT_NEAR(p.reduce_scatter.gbps, 1.5, 1e-9);
  EXPECT_NEAR(p.reduce_scatter.latency_us, 70, 1e-6);
  EXPECT_NEAR(p.memory_gbps, 12, 1e-9);
  EXPECT_NEAR(add_time_us(p, 8e6), add(8e6), 1e-6);
  EXPECT_NEAR(collective_time_us(p, P, 8e6, true), coll(StepKind::reduce_scatter, 8e6), 1e-6);
  EXPECT_NEAR(collective_time_us(p, P, 8e6, false), coll(StepKind::allgather, 8e6), 1e-6);
  EXPECT_NEAR(p.links.intra_gbps, 5, 1e-9);  // the link fit is its own

  // Without the timers (or sizes) nothing of that is measured: the base's figures stay.
  const Profile plain = calibrate(spec, gemm, comm);
  EXPECT_EQ(plain.reduce_scatter.gbps, 0);
  EXPECT_DOUBLE_EQ(plain.memory_gbps, spec.base.memory_gbps);
  spec.collective_bytes = {1e6};
  EXPECT_THROW(calibrate(spec, gemm, comm, coll, add), UsageError);
}

// The issue timer's figure becomes Profile::host with the spec's issuer; 0 (a backend that does not
// enqueue its steps) keeps the base's host figures; a negative one is refused.
TEST(Calibrate, HostIssueFromItsTimer) {
  auto gemm = linear_gemm;
  auto comm = linear_comm;
  CalibrationSpec spec = spec_over("h200-nvlink", Dtype::bf16);
  spec.shared_issuer = true;
  const Profile p = calibrate(spec, gemm, comm, {}, {}, [] { return HostCost{7.5, false, 12.0}; });
  EXPECT_DOUBLE_EQ(p.host.issue_us, 7.5);
  EXPECT_DOUBLE_EQ(p.host.gemm_issue_us, 12.0);
  EXPECT_TRUE(p.host.shared);  // the spec's, not the timer's
  spec.shared_issuer = false;
  spec.comm_bytes = calibration_sizes(16e6);  // with a link too: the host figure is set either way
  const Profile q = calibrate(spec, gemm, comm, {}, {}, [] { return HostCost{3.0}; });
  EXPECT_DOUBLE_EQ(q.host.issue_us, 3.0);
  EXPECT_FALSE(q.host.shared);
  spec.base.host = {1.5, true};
  const Profile kept = calibrate(spec, gemm, comm, {}, {}, [] { return HostCost{}; });
  EXPECT_DOUBLE_EQ(kept.host.issue_us, 1.5);
  EXPECT_TRUE(kept.host.shared);
  EXPECT_DOUBLE_EQ(calibrate(spec, gemm, comm).host.issue_us, 1.5);  // no timer: the base's
  EXPECT_THROW(calibrate(spec, gemm, comm, {}, {}, [] { return HostCost{-1.0}; }), std::runtime_error);
}

// Transfers the host paced: once its issue cost is off, the device's share does not grow with the
// size. With an issue figure that is a flat line (latency = the mean, size costs nothing); without
// one it stays an error (a timer that is broken).
TEST(Calibrate, FlatTransfersAfterTheIssueCostAreALatency) {
  auto gemm = linear_gemm;
  int call = 0;
  auto flat = [&](double) { return ++call % 2 ? 5.0 : 4.0; };  // 5, 4, 5, ...: no growth
  CalibrationSpec spec = spec_over("h200-nvlink", Dtype::bf16);
  spec.comm_bytes = {65536, 1048576};
  const Profile p = calibrate(spec, gemm, flat, {}, {}, [] { return HostCost{10.0}; });
  EXPECT_DOUBLE_EQ(p.links.intra_latency_us, 4.5);
  EXPECT_GT(p.links.intra_gbps, 1e5);
  EXPECT_THROW(calibrate(spec, gemm, flat), std::runtime_error);
}

// Load on the machine only adds time: a series whose first round does not grow with the size (its
// small parts each waited a scheduler slice) is timed again and each size keeps its least time, so
// the fit is the machine's. A series that never grows is refused after kCalibrationRounds rounds,
// naming its times; where flat times are a latency (a host issue cost measured) nothing is retimed.
TEST(Calibrate, ASeriesSlowedByLoadIsTimedAgainAndABadOneRefused) {
  const int P = 2;
  CalibrationSpec spec = spec_over("cpu-2core", Dtype::f32);
  spec.comm_bytes = calibration_sizes(16e6);
  spec.world = P;
  spec.collective_bytes = {3456, 65536, 1048576};
  auto line = [&](StepKind kind, double part) {
    return kind == StepKind::allgather ? (P - 1) * (20 + part / 6e3) : (P - 1) * (70 + part / 1.5e3);
  };
  std::map<double, int> allgather_calls;
  auto loaded = [&](StepKind kind, double part) {  // the allgather's first round: 8, 4, 4.1 ms
    if (kind == StepKind::allgather && allgather_calls[part]++ == 0)
      return part < 1e4 ? 8000.0 : part < 1e5 ? 4000.0 : 4100.0;
    return line(kind, part);
  };
  std::vector<std::pair<std::string, int>> rounds;
  auto note = [&](const char* what, int round) { rounds.push_back({what, round}); };
  const CalibrationTimes t = measure(spec, linear_gemm, linear_comm, loaded, {}, {}, note);
  const std::vector<std::pair<std::string, int>> expected{
      {"message", 1}, {"allgather", 1}, {"allgather", 2}, {"reduce_scatter", 1}};
  EXPECT_EQ(rounds, expected);
  const Profile p = fit_profile(spec, t);
  EXPECT_NEAR(p.allgather.gbps, 6, 1e-9);
  EXPECT_NEAR(p.allgather.latency_us, 20, 1e-6);
  EXPECT_NEAR(p.reduce_scatter.gbps, 1.5, 1e-9);

  int flat_calls = 0;
  auto flat = [&](StepKind kind, double part) {
    if (kind != StepKind::allgather) return line(kind, part);
    ++flat_calls;
    return 4000.0;
  };
  try {
    calibrate(spec, linear_gemm, linear_comm, flat);
    ADD_FAILURE() << "a collective whose times never grow was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("allgather (per ring step) times do not grow with the size (3456 bytes "
                                         "4000.0 us, 65536 bytes 4000.0 us, 1048576 bytes 4000.0 us"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(flat_calls, kCalibrationRounds * 3);
  flat_calls = 0;
  const Profile issued = calibrate(spec, linear_gemm, linear_comm, flat, {}, [] { return HostCost{10.0}; });
  EXPECT_EQ(flat_calls, 3);
  EXPECT_DOUBLE_EQ(issued.allgather.latency_us, 4000.0);
}

// Every number a profile file holds has its range, checked when it is read: each set to -1 (below
// every range), and each floating-point figure but a measured point set to 1e10 (above every
// range: 1e9 GB/s, TFLOP/s or us, a slowdown of 100), is refused naming its field.
TEST(Profile, EveryFigureOutOfRangeIsRefused) {
  for (const char* name : {"h200-nvlink", "cpu-2core"}) {
    nlohmann::json good = to_json(builtin_profile(name));
    good["collectives"]["allgather"]["points"] = {{65536, 10}, {1048576, 50}};
    ASSERT_NO_THROW(profile_from_json(good)) << name;
    int tried = 0;
    const nlohmann::json fields = good.flatten();
    for (const auto& [pointer, value] : fields.items()) {
      if (!value.is_number()) continue;
      const bool point = pointer.find("/points/") != std::string::npos;
      std::vector<double> bad{-1.0};
      if (value.is_number_float() && !point) bad.push_back(1e10);
      std::string field = pointer.substr(pointer.rfind('/') + 1);
      if (point) field = "points";
      for (double v : bad) {
        nlohmann::json j = good;
        j[nlohmann::json::json_pointer(pointer)] = v;
        ++tried;
        try {
          profile_from_json(j);
          ADD_FAILURE() << name << ": " << pointer << " = " << v << " was accepted";
        } catch (const UsageError& e) {
          EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << pointer << " = " << v << ": " << e.what();
        }
      }
    }
    EXPECT_GT(tried, 20) << name;
  }
}

}  // namespace
}  // namespace collmm
