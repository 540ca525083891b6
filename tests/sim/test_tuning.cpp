// test_tuning.cpp: --algo auto from the model, the measured cache overriding it, and the cache's
// JSON round trip.
#include <gtest/gtest.h>

#include <cstdio>

#include "sim_test_util.hpp"
#include "tuning.hpp"

namespace collmm {
namespace {

Problem shape(int P) {
  Problem p;
  p.op = Op::ag_gemm;
  p.m = 256 * P, p.n = 256 * P, p.k = 512, p.world = P;
  return p;
}

// comm == gemm per chunk, a per-call overhead: the ring hides all comm with the fewest GEMM calls.
Profile balanced() {
  const double g = test::gemm_us(256, 256, 512, 1.0);
  Profile prof = test::analytic_profile(1.0, 256 * 512 * 4.0 / (g * 1e3));
  prof.gemm.overhead_us = 0.05 * g;
  return prof;
}

TEST(Tuning, PicksTheRingWhenCommMatchesGemm) {
  const Choice c = choose(shape(4), Dtype::f32, balanced(), nullptr);
  EXPECT_EQ(c.options.algo, Algo::ring);
  EXPECT_EQ(c.source, "model");
  ASSERT_FALSE(c.alternatives.empty());
  EXPECT_EQ(c.predicted_us, c.alternatives.front().predicted_us);
  double sequential = 0;
  for (const Alternative& a : c.alternatives) {
    EXPECT_GE(a.predicted_us, c.predicted_us);
    if (a.options.algo == Algo::sequential) sequential = a.predicted_us;
  }
  EXPECT_LT(c.predicted_us, 0.65 * sequential);  // ~(g + 3g) vs (3g + 4g)
  const std::string text = print(c);
  EXPECT_NE(text.find("auto: ring"), std::string::npos);
  EXPECT_NE(text.find("sequential"), std::string::npos);
}

TEST(Tuning, OneRankNeedsNoOverlap) {
  const Choice c = choose(shape(1), Dtype::f32, balanced(), nullptr);
  const double one_gemm = test::gemm_us(256, 256, 512, 1.0) + balanced().gemm.overhead_us;
  EXPECT_NEAR(c.predicted_us, one_gemm, 1e-3 * one_gemm);
  for (const Alternative& a : c.alternatives) EXPECT_NE(a.options.algo, Algo::pipelined);  // nothing to pipeline
}

TEST(Tuning, MeasuredCacheOverridesTheModel) {
  TuningCache cache;
  const Problem p = shape(4);
  Problem at_p8 = p;
  at_p8.world = 8;
  cache.record(
      {.problem = p,
       .dtype = Dtype::f32,
       .options = {.algo = Algo::sequential, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 1},
       .time_us = 10.0});
  cache.record({.problem = p,
                .dtype = Dtype::f32,
                .options = {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 1},
                .time_us = 20.0});
  cache.record({.problem = at_p8,
                .dtype = Dtype::f32,
                .options = {.algo = Algo::bidir, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 1},
                .time_us = 1.0});  // another P: ignored
  const Choice c = choose(p, Dtype::f32, balanced(), &cache);
  EXPECT_EQ(c.options.algo, Algo::sequential);
  EXPECT_EQ(c.source, "measured");
  EXPECT_EQ(c.measured_us, 10.0);
  EXPECT_NE(print(c).find("measured"), std::string::npos);
  // No measurement of this dtype: the model again.
  EXPECT_EQ(choose(
                p, Dtype::f64,
                [] {
                  Profile q = balanced();
                  q.gemm.peak_tflops.push_back({Dtype::f64, 1.0});
                  return q;
                }(),
                &cache)
                .source,
            "model");
}

TEST(Tuning, CacheRoundTrip) {
  const Problem rs8{.op = Op::gemm_rs, .m = 1024, .n = 2048, .k = 4096, .world = 8};
  TuningCache cache;
  cache.record(
      {.problem = rs8,
       .dtype = Dtype::bf16,
       .options = {.algo = Algo::pipelined, .stages = 4, .post = Post::comm_first, .gemm_lanes = 2, .merge = 1},
       .time_us = 123.5});
  cache.record(
      {.problem = rs8,
       .dtype = Dtype::bf16,
       .options = {.algo = Algo::pipelined, .stages = 4, .post = Post::comm_first, .gemm_lanes = 2, .merge = 1},
       .time_us = 120.0});  // replaces
  ASSERT_EQ(cache.entries.size(), 1u);
  const std::string path = testing::TempDir() + "collmm_tuning_cache.json";
  save_tuning_cache(cache, path);
  const TuningCache back = load_tuning_cache(path);
  std::remove(path.c_str());
  ASSERT_EQ(back.entries.size(), 1u);
  const TuningEntry& e = back.entries[0];
  EXPECT_EQ(e.problem, rs8);
  EXPECT_EQ(e.options.algo, Algo::pipelined);
  EXPECT_EQ(e.options.stages, 4);
  EXPECT_EQ(e.options.gemm_lanes, 2);
  EXPECT_EQ(e.time_us, 120.0);
  EXPECT_THROW(load_tuning_cache(path), UsageError);
}

// The cache tells B layouts apart: a measurement with B as [N, K] (nk) is not one of [K, N] (kn),
// and the layout survives the file.
TEST(Tuning, CacheTellsBLayoutsApart) {
  const Problem kn = shape(4);
  Problem nk = kn;
  nk.b_layout = BLayout::nk;
  TuningCache cache;
  cache.record({.problem = kn, .dtype = Dtype::f32, .options = {.algo = Algo::sequential}, .time_us = 10.0});
  cache.record({.problem = nk, .dtype = Dtype::f32, .options = {.algo = Algo::bidir}, .time_us = 10.0});
  ASSERT_EQ(cache.entries.size(), 2u);
  const std::string path = testing::TempDir() + "collmm_tuning_layouts.json";
  save_tuning_cache(cache, path);
  const TuningCache back = load_tuning_cache(path);
  std::remove(path.c_str());
  for (const TuningCache* c : std::initializer_list<const TuningCache*>{&cache, &back}) {
    ASSERT_EQ(c->find(kn, Dtype::f32).size(), 1u);
    ASSERT_EQ(c->find(nk, Dtype::f32).size(), 1u);
    EXPECT_EQ(c->find(kn, Dtype::f32)[0].options.algo, Algo::sequential);
    EXPECT_EQ(c->find(nk, Dtype::f32)[0].options.algo, Algo::bidir);
    EXPECT_EQ(choose(kn, Dtype::f32, balanced(), c).options.algo, Algo::sequential);
    EXPECT_EQ(choose(nk, Dtype::f32, balanced(), c).options.algo, Algo::bidir);
  }
}

TEST(Tuning, MergedRingIsACandidateAndRoundTrips) {
  const Problem p = shape(8);  // ag_gemm
  const Choice model = choose(p, Dtype::f32, balanced(), nullptr);
  int merged = 0;
  for (const Alternative& a : model.alternatives) merged += a.options.merge > 1 ? 1 : 0;
  EXPECT_EQ(merged, 2);  // ring with merge 2 and 4 at P = 8
  // A measurement of a merged ring that beats the rest is picked, and its merge comes back.
  TuningCache cache;
  cache.record({.problem = p,
                .dtype = Dtype::f32,
                .options = {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 1},
                .time_us = 20.0});
  cache.record({.problem = p,
                .dtype = Dtype::f32,
                .options = {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 4},
                .time_us = 15.0});
  const Choice c = choose(p, Dtype::f32, balanced(), &cache);
  EXPECT_EQ(c.options.algo, Algo::ring);
  EXPECT_EQ(c.options.merge, 4);
  EXPECT_NE(print(c).find("merge=4"), std::string::npos);
  const std::string path = testing::TempDir() + "collmm_tuning_merge.json";
  save_tuning_cache(cache, path);
  const TuningCache back = load_tuning_cache(path);
  std::remove(path.c_str());
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[1].options.merge, 4);
  // gemm_rs has no merged candidate.
  Problem rs = p;
  rs.op = Op::gemm_rs;
  for (const Alternative& a : choose(rs, Dtype::f32, balanced(), nullptr).alternatives) EXPECT_EQ(a.options.merge, 1);
}

// A tuning cache's entries are picked by the rule auto's runoff uses (pick_measured): the fastest,
// but a time within 1% of it goes to the plan of fewer steps. So a process that reads the cache a
// runoff wrote takes the plan that runoff took.
TEST(Tuning, MeasuredTiesGoToTheFewestSteps) {
  EXPECT_EQ(pick_measured({100, 100.5, 120}, {8, 2, 1}), 1u);  // a tie: 2 steps
  EXPECT_EQ(pick_measured({100, 102, 120}, {8, 2, 1}), 0u);    // 2% apart: the fastest
  EXPECT_EQ(pick_measured({100, 100.5}, {0, 2}), 0u);          // steps not known: the fastest
  EXPECT_EQ(pick_measured({100.8, 100, 100.9}, {4, 8, 2}), 2u);
  TuningCache cache;
  const Problem p = shape(4);
  auto entry = [&](Algo algo, int stages, double us) {
    cache.record({.problem = p,
                  .dtype = Dtype::f32,
                  .options = {.algo = algo, .stages = stages, .post = Post::comm_first, .gemm_lanes = 1, .merge = 1},
                  .time_us = us});
  };
  entry(Algo::pipelined, 4, 100.0);
  entry(Algo::sequential, 0, 100.6);
  entry(Algo::ring, 0, 110.0);
  const Choice c = choose(p, Dtype::f32, balanced(), &cache);
  EXPECT_EQ(c.options.algo, Algo::sequential);
  EXPECT_EQ(c.measured_us, 100.6);
}

}  // namespace
}  // namespace collmm
