// test_tuning.cpp: --algo auto from the model, the measured cache overriding it, and the cache's
// JSON round trip.
#include <gtest/gtest.h>

#include <cstdio>

#include "collmm/tuning.hpp"
#include "sim_test_util.hpp"

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
  cache.record({p.op, p.m, p.n, p.k, p.world, Dtype::f32, {Algo::sequential, 0, Post::comm_first, 1, 1}, 10.0});
  cache.record({p.op, p.m, p.n, p.k, p.world, Dtype::f32, {Algo::ring, 0, Post::comm_first, 1, 1}, 20.0});
  cache.record(
      {p.op, p.m, p.n, p.k, 8, Dtype::f32, {Algo::bidir, 0, Post::comm_first, 1, 1}, 1.0});  // another P: ignored
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
  TuningCache cache;
  cache.record({Op::gemm_rs, 1024, 2048, 4096, 8, Dtype::bf16, {Algo::pipelined, 4, Post::comm_first, 2, 1}, 123.5});
  cache.record({Op::gemm_rs,
                1024,
                2048,
                4096,
                8,
                Dtype::bf16,
                {Algo::pipelined, 4, Post::comm_first, 2, 1},
                120.0});  // replaces
  ASSERT_EQ(cache.entries.size(), 1u);
  const std::string path = testing::TempDir() + "collmm_tuning_cache.json";
  save_tuning_cache(cache, path);
  const TuningCache back = load_tuning_cache(path);
  std::remove(path.c_str());
  ASSERT_EQ(back.entries.size(), 1u);
  const TuningEntry& e = back.entries[0];
  EXPECT_EQ(e.op, Op::gemm_rs);
  EXPECT_EQ(e.world, 8);
  EXPECT_EQ(e.options.algo, Algo::pipelined);
  EXPECT_EQ(e.options.stages, 4);
  EXPECT_EQ(e.options.gemm_lanes, 2);
  EXPECT_EQ(e.time_us, 120.0);
  EXPECT_THROW(load_tuning_cache(path), UsageError);
}

TEST(Tuning, MergedRingIsACandidateAndRoundTrips) {
  const Problem p = shape(8);  // ag_gemm
  const Choice model = choose(p, Dtype::f32, balanced(), nullptr);
  int merged = 0;
  for (const Alternative& a : model.alternatives) merged += a.options.merge > 1 ? 1 : 0;
  EXPECT_EQ(merged, 2);  // ring with merge 2 and 4 at P = 8
  // A measurement of a merged ring that beats the rest is picked, and its merge comes back.
  TuningCache cache;
  cache.record({p.op, p.m, p.n, p.k, p.world, Dtype::f32, {Algo::ring, 0, Post::comm_first, 1, 1}, 20.0});
  cache.record({p.op, p.m, p.n, p.k, p.world, Dtype::f32, {Algo::ring, 0, Post::comm_first, 1, 4}, 15.0});
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

}  // namespace
}  // namespace collmm
