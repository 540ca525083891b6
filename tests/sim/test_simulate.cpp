// test_simulate.cpp: the simulator against times worked out by hand from the plans (see the
// derivations beside each test), the SM contention rules, P = 1 and P = 1024, and plan mismatches.
#include <gtest/gtest.h>

#include "collmm/sim.hpp"
#include "sim_test_util.hpp"

namespace collmm {
namespace {

using test::analytic_profile;

constexpr double kTflops = 1.0;  // 1e6 flop per us

Problem ag(int P, int64_t m_chunk, int64_t n_r, int64_t k) {
  Problem p;
  p.op = Op::ag_gemm;
  p.m = m_chunk * P, p.n = n_r * P, p.k = k, p.world = P;
  return p;
}

Problem rs(int P, int64_t m_block, int64_t n, int64_t k_r) {
  Problem p;
  p.op = Op::gemm_rs;
  p.m = m_block * P, p.n = n, p.k = k_r * P, p.world = P;
  return p;
}

PlanOptions algo(Algo a, Post post = Post::comm_first) {
  PlanOptions o;
  o.algo = a;
  o.post = post;
  return o;
}

double sim_us(const Problem& p, const PlanOptions& o, const Profile& prof, StepFilter f = StepFilter::all) {
  return simulate(p, o, Dtype::f32, prof, f, false).time_us;
}

// ag_gemm ring, chunk GEMM g, chunk transfer c: comm j runs [j c, (j+1) c]; GEMM j starts at
// max(end of GEMM j-1, j c). Total g + (P-1) max(g, c) (the last copy is free here).
TEST(Simulate, AgGemmRingIsGPlusPMinus1TimesMax) {
  const int64_t mc = 256, nr = 256, k = 512;
  const double g = test::gemm_us(mc, nr, k, kTflops), bytes = mc * k * 4.0;
  for (int P : {2, 3, 4, 7})
    for (double ratio : {0.25, 1.0, 3.0}) {  // c / g
      const double c = ratio * g, gbps = bytes / (c * 1e3);
      const double t = sim_us(ag(P, mc, nr, k), algo(Algo::ring), analytic_profile(kTflops, gbps));
      EXPECT_NEAR(t, g + (P - 1) * std::max(g, c), 1e-6 * t) << "P=" << P << " c/g=" << ratio;
    }
}

// sequential: the allgather ((P-1) ring steps of one chunk) then one GEMM of all P chunks.
TEST(Simulate, SequentialIsCommPlusGemm) {
  const int P = 4;
  const int64_t mc = 256, nr = 256, k = 512;
  const double g = test::gemm_us(mc, nr, k, kTflops), c = 2 * g, gbps = mc * k * 4.0 / (c * 1e3);
  const Profile prof = analytic_profile(kTflops, gbps);
  const Prediction p = predict(ag(P, mc, nr, k), algo(Algo::sequential), Dtype::f32, prof);
  EXPECT_NEAR(p.t_comm_us, (P - 1) * c, 1e-6 * p.t_comm_us);
  EXPECT_NEAR(p.t_gemm_us, P * g, 1e-6 * p.t_gemm_us);
  EXPECT_NEAR(p.time_us, p.t_comm_us + p.t_gemm_us, 1e-6 * p.time_us);
  EXPECT_NEAR(p.speedup, 1.0, 1e-12);
  EXPECT_NEAR(p.hidden_comm_mean, 0.0, 1e-12);

  // And the ring's row against it: speedup and efficiency from the formulas.
  const Prediction r = predict(ag(P, mc, nr, k), algo(Algo::ring), Dtype::f32, prof);
  const double ring = g + (P - 1) * c;
  EXPECT_NEAR(r.time_us, ring, 1e-6 * ring);
  EXPECT_NEAR(r.t_sequential_us, p.time_us, 1e-6 * ring);
  EXPECT_NEAR(r.speedup, p.time_us / ring, 1e-6);
  EXPECT_NEAR(r.overlap_efficiency, (p.time_us - ring) / (P * g), 1e-6);
  // Each transfer (c = 2g) runs beside one GEMM (g): half of it hidden. (The own chunk's copy, ~0
  // here, runs on the GEMM lane.)
  EXPECT_NEAR(r.hidden_comm_mean, 0.5, 1e-6);
}

// gemm_rs ring, from src/plan/gemm_rs.cpp: GEMM 0 and GEMM 1 run back to back (no add between);
// comm j-1 follows GEMM j-1, add j waits for GEMM j and comm j-1, GEMM j+1 waits for add j.
// With E_j the end of add j: E_1 = max(g + c, 2g) + a and E_j = E_{j-1} + max(g, c) + a, so the
// total is g + (P-1) (max(g, c) + a).
TEST(Simulate, GemmRsRingWithAdds) {
  const int64_t mb = 256, n = 256, kr = 512;
  const double g = test::gemm_us(mb, n, kr, kTflops), block_bytes = mb * n * 4.0;
  for (int P : {2, 3, 5})
    for (double ratio : {0.5, 2.0}) {
      const double c = ratio * g, a = 0.1 * g;
      const double gbps = block_bytes / (c * 1e3), mem = 3 * block_bytes / (a * 1e3);
      const Profile prof = analytic_profile(kTflops, gbps, mem);
      // The GEMM's own memory time (A, B, C bytes over `mem`) stays below g here.
      ASSERT_LT(gemm_time_us(prof, mb, n, kr, Dtype::f32), g * (1 + 1e-12));
      const double t = sim_us(rs(P, mb, n, kr), algo(Algo::ring), prof);
      EXPECT_NEAR(t, g + (P - 1) * (std::max(g, c) + a), 1e-6 * t) << "P=" << P << " c/g=" << ratio;
      // sequential: one GEMM of P blocks, then (P-1) reduce-scatter steps of max(c, a).
      const double s = sim_us(rs(P, mb, n, kr), algo(Algo::sequential), prof);
      EXPECT_NEAR(s, P * g + (P - 1) * std::max(c, a), 1e-6 * s);
    }
}

// A measured library collective (Profile::reduce_scatter / allgather) sets the sequential plans'
// comm: (P-1) steps of latency + largest part / its bandwidth, whatever the link and memory say.
TEST(Simulate, SequentialFollowsTheMeasuredCollective) {
  const int P = 4;
  const int64_t mb = 256, n = 256, kr = 512;
  const double g = test::gemm_us(mb, n, kr, kTflops), block_bytes = mb * n * 4.0;
  Profile prof = analytic_profile(kTflops, block_bytes / (g * 1e3));  // link: one block in g
  const double ring = sim_us(rs(P, mb, n, kr), algo(Algo::sequential), prof);
  EXPECT_NEAR(ring, P * g + (P - 1) * g, 1e-6 * ring);
  prof.reduce_scatter = {block_bytes / (3 * g * 1e3), 0.5 * g, {}};  // a block in 3g, 0.5g latency per step
  const double own = sim_us(rs(P, mb, n, kr), algo(Algo::sequential), prof);
  EXPECT_NEAR(own, P * g + (P - 1) * 3.5 * g, 1e-6 * own);
  // The ring plan has no collective: unchanged.
  EXPECT_NEAR(sim_us(rs(P, mb, n, kr), algo(Algo::ring), prof), g + (P - 1) * g, 1e-6 * own);
  // ag_gemm's allgather: its own figures, the reduce-scatter's do not apply.
  const int64_t mc = 256, nr = 256, k = 512;
  const double a_bytes = mc * k * 4.0, ga = test::gemm_us(mc, nr, k, kTflops);
  const double before = sim_us(ag(P, mc, nr, k), algo(Algo::sequential), prof, StepFilter::comm_only);
  EXPECT_NEAR(before, (P - 1) * a_bytes / (prof.links.intra_gbps * 1e3), 1e-6 * before);
  prof.allgather = {a_bytes / (2 * ga * 1e3), 0, {}};
  const double after = sim_us(ag(P, mc, nr, k), algo(Algo::sequential), prof, StepFilter::comm_only);
  EXPECT_NEAR(after, (P - 1) * 2 * ga, 1e-6 * after);
}

// gemm_ar sequential: the GEMM of all M rows, then the all-reduce, priced as the library runs it: the
// measured reduce-scatter of the P blocks, then the measured all-gather of the summed blocks.
TEST(Simulate, GemmArAllReduceIsTheMeasuredReduceScatterThenAllGather) {
  const int P = 4;
  const int64_t mb = 256, n = 256, kr = 512;
  const double g = test::gemm_us(mb, n, kr, kTflops), block_bytes = mb * n * 4.0;
  Profile prof = analytic_profile(kTflops, block_bytes / (g * 1e3));
  prof.reduce_scatter = {block_bytes / (3 * g * 1e3), 0.5 * g, {}};  // a block in 3g, 0.5g latency per step
  prof.allgather = {block_bytes / (2 * g * 1e3), 0.25 * g, {}};      // a block in 2g, 0.25g latency per step
  Problem p = rs(P, mb, n, kr);
  p.op = Op::gemm_ar;
  const double all_reduce = (P - 1) * (3.5 * g + 2.25 * g);
  EXPECT_NEAR(sim_us(p, algo(Algo::sequential), prof, StepFilter::comm_only), all_reduce, 1e-6 * all_reduce);
  const double t = sim_us(p, algo(Algo::sequential), prof);
  EXPECT_NEAR(t, P * g + all_reduce, 1e-6 * t);
  // The ring: its transfers are the link's, then the all-gather (the same measured figures).
  const double ring = sim_us(p, algo(Algo::ring), prof);
  EXPECT_NEAR(ring, g + (P - 1) * g + (P - 1) * 2.25 * g, 1e-6 * ring);
}

TEST(Simulate, OneRankIsOneGemm) {
  const Profile prof = analytic_profile(kTflops, 10);
  for (Op op : all_ops())
    for (Algo a : all_algos()) {
      Problem p = op == Op::ag_gemm ? ag(1, 512, 256, 128) : rs(1, 512, 256, 128);
      const SimResult r = simulate(p, algo(a), Dtype::f32, prof);
      EXPECT_NEAR(r.time_us, test::gemm_us(512, 256, 128, kTflops), 1e-3) << to_string(op) << " " << to_string(a);
      ASSERT_EQ(r.runs.size(), 1u);
    }
}

// Contention: with both slowdowns 2 and c = g, step 0's GEMM and transfer each run at half speed
// and end at 2g; step 1's GEMM runs alone: 3g in all (instead of 2g).
TEST(Simulate, SmContentionSlowsBoth) {
  const int64_t mc = 256, nr = 256, k = 512;
  const double g = test::gemm_us(mc, nr, k, kTflops), gbps = mc * k * 4.0 / (g * 1e3);
  Profile prof = analytic_profile(kTflops, gbps);
  prof.contention = {true, 2.0, 2.0, false};
  EXPECT_NEAR(sim_us(ag(2, mc, nr, k), algo(Algo::ring), prof), 3 * g, 1e-5 * g);
}

// Launch order: posted GEMM-first, the GEMM takes every SM and step 0's transfer waits for it:
// g + c + g. Posted comm-first, they overlap: g + max(g, c).
TEST(Simulate, LaunchOrderSerializesGemmFirst) {
  const int64_t mc = 256, nr = 256, k = 512;
  const double g = test::gemm_us(mc, nr, k, kTflops), c = 0.5 * g, gbps = mc * k * 4.0 / (c * 1e3);
  Profile prof = analytic_profile(kTflops, gbps);
  prof.contention = {true, 1.0, 1.0, true};
  EXPECT_NEAR(sim_us(ag(2, mc, nr, k), algo(Algo::ring, Post::gemm_first), prof), 2 * g + c, 1e-5 * g);
  EXPECT_NEAR(sim_us(ag(2, mc, nr, k), algo(Algo::ring, Post::comm_first), prof), 2 * g, 1e-5 * g);
}

// Two GEMM lanes share one rank's compute: no gain from lanes on a GEMM-bound ring.
TEST(Simulate, GemmLanesShareTheRank) {
  const int64_t mc = 256, nr = 256, k = 512;
  const double g = test::gemm_us(mc, nr, k, kTflops), gbps = mc * k * 4.0 / (0.1 * g * 1e3);
  PlanOptions o = algo(Algo::ring);
  o.gemm_lanes = 2;
  EXPECT_NEAR(sim_us(ag(4, mc, nr, k), o, analytic_profile(kTflops, gbps)), 4 * g, 1e-3 * g);
}

TEST(Simulate, FiltersRunOnlyTheirSteps) {
  const Problem p = ag(3, 64, 64, 64);
  const SimResult r = simulate(p, algo(Algo::ring), Dtype::f32, analytic_profile(kTflops, 1), StepFilter::gemm_only);
  for (const TimelineEvent& e : r.timeline.events) EXPECT_EQ(e.kind, StepKind::gemm);
  EXPECT_EQ(r.timeline.events.size(), 9u);
  const Plan plan = make_plan(p, algo(Algo::ring), 0);
  for (size_t s = 0; s < plan.steps.size(); ++s)
    EXPECT_EQ(r.runs[0].steps[s].start_us < 0, plan.steps[s].kind != StepKind::gemm);
}

TEST(Simulate, PlansAndProblemGiveTheSameRuns) {
  const Problem p = rs(3, 40, 64, 30);
  std::vector<Plan> plans;
  for (int r = 0; r < 3; ++r) plans.push_back(make_plan(p, algo(Algo::bidir), r));
  const Profile prof = builtin_profile("h200-nvlink");
  const std::vector<RankRun> a = simulate(plans, Dtype::bf16, prof);
  const SimResult b = simulate(p, algo(Algo::bidir), Dtype::bf16, prof);
  ASSERT_EQ(a.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(a[r].total_us, b.runs[r].total_us);
    ASSERT_EQ(a[r].steps.size(), plans[r].steps.size());
    for (const StepTime& s : a[r].steps) EXPECT_GE(s.start_us, 0);
  }
  EXPECT_EQ(make_timeline(plans, a).events.size(), b.timeline.events.size());
}

TEST(Simulate, MismatchedPlansAreRefused) {
  std::vector<Plan> plans = {make_plan(ag(2, 64, 64, 64), algo(Algo::ring), 0),
                             make_plan(ag(2, 32, 64, 64), algo(Algo::ring), 1)};
  plans[1].problem.m = plans[0].problem.m;  // same P and M on paper, other chunk sizes in the steps
  EXPECT_THROW(simulate(plans, Dtype::f32, analytic_profile(kTflops, 1)), std::runtime_error);
  std::vector<Plan> mixed = {make_plan(ag(2, 64, 64, 64), algo(Algo::ring), 0),
                             make_plan(ag(2, 64, 64, 64), algo(Algo::sequential), 1)};
  EXPECT_THROW(simulate(mixed, Dtype::f32, analytic_profile(kTflops, 1)), std::runtime_error);
}

// Every algorithm of both ops finishes (no deadlock, every step timed) for uneven shapes.
TEST(Simulate, EveryAlgorithmRunsToTheEnd) {
  const Profile prof = builtin_profile("h200-ib");
  for (Op op : all_ops())
    for (Algo a : all_algos())
      for (int P : {2, 5, 9}) {
        Problem p;
        p.op = op, p.m = 97, p.n = 61, p.k = 45, p.world = P;
        const SimResult r = simulate(p, algo(a), Dtype::bf16, prof);
        EXPECT_GT(r.time_us, 0);
        for (const RankRun& run : r.runs)
          for (const StepTime& s : run.steps) EXPECT_GE(s.end_us, s.start_us);
      }
}

// P = 1024: the ring's O(P^2) steps run, and the formula still holds.
TEST(Simulate, RingAt1024Ranks) {
  const int P = 1024;
  const int64_t mc = 8, nr = 8, k = 256;
  const double g = test::gemm_us(mc, nr, k, kTflops), c = 1.5 * g, gbps = mc * k * 4.0 / (c * 1e3);
  const double t = sim_us(ag(P, mc, nr, k), algo(Algo::ring), analytic_profile(kTflops, gbps));
  EXPECT_NEAR(t, g + (P - 1) * c, 1e-6 * t);
}

}  // namespace
}  // namespace collmm
