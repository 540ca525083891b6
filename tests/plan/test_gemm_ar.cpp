// test_gemm_ar.cpp: golden gemm_ar plans (the reduce-scatter then the in-place all-gather of C's
// blocks; pipelined's stages; the gemm_rs ring followed by the all-gather; the ring in waves) and the checker
// refusing a gemm_ar plan that leaves some rank without the whole sum.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan_check.hpp"

namespace collmm {
namespace {

const Problem kP{.op = Op::gemm_ar, .m = 10, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};

TEST(GemmAr, SequentialReducesThenGathersInPlace) {
  const Plan plan = make_plan(kP, {.algo = Algo::sequential}, 1);
  EXPECT_EQ(describe(plan),
            "gemm_ar sequential rank 1/4 M=10 N=8 K=8 lanes=2\n"
            "  buf0 A [10, 2]\n  buf1 B [2, 8]\n  buf2 C [10, 8]\n  buf3 work [10, 8]\n"
            "  0: lane 1 gemm step 0: buf3[0:10] = buf0[0:10] @ B\n"
            "  1: lane 0 reduce_scatter step 0 chunk 1: buf3[0:3] buf3[3:6] buf3[6:8] buf3[8:10] into buf2[3:6] "
            "(waits 0)\n"
            "  2: lane 0 allgather step 0 chunk 1: buf2[3:6] into buf2[0:3] buf2[3:6] buf2[6:8] buf2[8:10]\n");
}

// Stage s: rows block s of M in one GEMM, its reduce-scatter and all-gather on the comm lane; the
// GEMM of stage s + 2 waits for stage s's reduce-scatter (its stage buffer). gemm-first posts the
// next stage's GEMM before this stage's collectives.
TEST(GemmAr, PipelinedStagesRotateTwoBuffers) {
  const Problem p{.op = Op::gemm_ar, .m = 24, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  auto kinds = [](const Plan& plan) {
    std::string s;
    for (const Step& step : plan.steps) s += to_string(step.kind) + std::to_string(step.index) + " ";
    return s;
  };
  const Plan comm_first = make_plan(p, {.algo = Algo::pipelined, .stages = 3}, 2);
  EXPECT_EQ(kinds(comm_first),
            "gemm0 reduce_scatter0 allgather0 gemm1 reduce_scatter1 allgather1 gemm2 reduce_scatter2 allgather2 ");
  EXPECT_EQ(comm_first.steps[6].waits, std::vector<int>{1});
  EXPECT_EQ(comm_first.steps[6].out.buf, comm_first.steps[0].out.buf);
  EXPECT_NE(comm_first.steps[3].out.buf, comm_first.steps[0].out.buf);
  const Step& ag = comm_first.steps[8];  // stage 2: rows 16..23, rank 2's are 20..21
  EXPECT_EQ(ag.a.row, 20);
  EXPECT_EQ(ag.parts.front().row, 16);
  EXPECT_EQ(ag.parts.back().row + ag.parts.back().rows, 24);
  const Plan gemm_first = make_plan(p, {.algo = Algo::pipelined, .stages = 3, .post = Post::gemm_first}, 2);
  EXPECT_EQ(kinds(gemm_first),
            "gemm0 gemm1 reduce_scatter0 allgather0 gemm2 reduce_scatter1 allgather1 reduce_scatter2 allgather2 ");
}

// ring and bidir: gemm_rs's ring with every C row moved to this rank's block, then one all-gather
// of the blocks waiting for the last step of every GEMM lane.
TEST(GemmAr, RingsAreGemmRsRingsThenTheAllGather) {
  for (Algo algo : {Algo::ring, Algo::bidir})
    for (int r = 0; r < 4; ++r) {
      Problem rs = kP;
      rs.op = Op::gemm_rs;
      const PlanOptions o{.algo = algo, .gemm_lanes = 2};
      const Plan reduce = make_plan(rs, o, r), all = make_plan(kP, o, r);
      ASSERT_EQ(all.steps.size(), reduce.steps.size() + 1) << describe(all);
      const int64_t c0 = block_offset(kP.m, 4, r);
      for (size_t i = 0; i < reduce.steps.size(); ++i) {
        Step want = reduce.steps[i];
        for (Slice* s : {&want.out, &want.a})
          if (s->buf == kBufC) s->row += c0;
        EXPECT_EQ(describe(all.steps[i]), describe(want));
      }
      const Step& ag = all.steps.back();
      EXPECT_EQ(ag.kind, StepKind::allgather);
      EXPECT_EQ(ag.a.row, c0);
      EXPECT_EQ(ag.a.rows, block_size(kP.m, 4, r));
      std::vector<int> lanes;
      for (int w : ag.waits) lanes.push_back(all.steps[static_cast<size_t>(w)].lane);
      EXPECT_EQ(lanes, (std::vector<int>{1, 2})) << describe(all);
    }
}

// The ring in 2 waves (M = 16: rows 0..7, 8..15; blocks of 2 rows): wave 1's sendrecv of step j
// also sends wave 0's block r - j of C on to r + 1 and receives block r - j - 1 (step 0 waits for
// wave 0's last GEMM); only wave 1's all-gather is a step of its own.
TEST(GemmAr, RingInWavesGathersTheLastWaveBesideTheNext) {
  const Problem p{.op = Op::gemm_ar, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  const int r = 1;
  const Plan plan = make_plan(p, {.algo = Algo::ring, .waves = 2}, r);
  std::vector<const Step*> comms;
  for (const Step& s : plan.steps)
    if (s.kind == StepKind::sendrecv) comms.push_back(&s);
  ASSERT_EQ(comms.size(), 6u) << describe(plan);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(comms[j]->sends.size(), 1u) << describe(*comms[j]);  // wave 0: its reduce-scatter alone
    const Step& s = *comms[3 + j];
    ASSERT_EQ(s.sends.size(), 2u) << describe(s);
    ASSERT_EQ(s.recvs.size(), 2u) << describe(s);
    EXPECT_EQ(s.sends[1].slice.buf, kBufC);
    EXPECT_EQ(s.sends[1].slice.row, 2 * ((r - j + 4) % 4)) << describe(s);
    EXPECT_EQ(s.recvs[1].slice.row, 2 * ((r - j - 1 + 4) % 4)) << describe(s);
    EXPECT_EQ(s.sends[1].peer, 2);
    EXPECT_EQ(s.recvs[1].peer, 0);
  }
  const Step& ag = plan.steps.back();
  EXPECT_EQ(ag.kind, StepKind::allgather);
  EXPECT_EQ(ag.parts.front().row, 8);
  EXPECT_EQ(ag.a.row, 8 + 2 * r);
  // Waves apply to gemm_ar's ring only; at most M / P of them.
  EXPECT_EQ(options_for(Op::gemm_rs, Algo::ring, {.waves = 2}).waves, 0);
  EXPECT_EQ(options_for(Op::gemm_ar, Algo::bidir, {.waves = 2}).waves, 0);
  EXPECT_EQ(options_for(Op::gemm_ar, Algo::ring, {.waves = 2}).waves, 2);
  EXPECT_EQ(options_for(Op::gemm_ar, Algo::ring, {.stages = 2}).stages, 0);  // the ring has no stages
  EXPECT_THROW(make_plan(p, {.algo = Algo::ring, .waves = 5}, 0), UsageError);
}

// Waves are bounded by their field's range (each wave adds P steps' fixed costs: 32768 of them took
// 49 s a call), refused before a plan is made; the ring's stages are refused with the waves' name.
TEST(GemmAr, WavesAreBoundedAndNamed) {
  const Problem p{.op = Op::gemm_ar, .m = 4096, .n = 4, .k = 4, .world = 2};
  auto refusal = [&](const PlanOptions& o) {
    try {
      validate(p, o);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal({.algo = Algo::ring, .waves = kMaxWaves}), "accepted");
  EXPECT_EQ(refusal({.algo = Algo::ring, .waves = kMaxWaves + 1}), "waves 65 is not 0..64.");
  EXPECT_EQ(refusal({.algo = Algo::ring, .stages = 4}),
            "stages 4: gemm_ar's ring has no stages; its waves are the option waves (ring:waves4).");
  EXPECT_EQ(refusal({.algo = Algo::bidir, .waves = 2}), "waves 2 apply to gemm_ar ring only (got gemm_ar bidir).");
  EXPECT_EQ(field_of(&PlanOptions::waves).hi, kMaxWaves);
}

// A gemm_ar plan without its last all-gather leaves every rank with its own block only: the
// checker names the rows of the other blocks (each holds one rank's partial, or nothing).
TEST(GemmAr, CheckerWantsTheWholeSumOnEveryRank) {
  for (Algo algo : all_algos()) {
    std::vector<Plan> plans;
    for (int r = 0; r < 4; ++r) plans.push_back(make_plan(kP, {.algo = algo}, r));
    ASSERT_TRUE(check_plans(plans).ok()) << to_string(algo);
    for (Plan& plan : plans) plan.steps.pop_back();
    const CheckReport report = check_plans(plans);
    EXPECT_FALSE(report.ok()) << to_string(algo);
    EXPECT_NE(report.text().find("data: rank 0 C row"), std::string::npos) << report.text();
  }
}

TEST(GemmAr, LocalShapes) {
  const LocalShape s =
      local_shape({.op = Op::gemm_ar, .m = 10, .n = 6, .k = 9, .world = 4, .b_layout = BLayout::nk}, 3);
  EXPECT_EQ(std::vector<int64_t>({s.a_rows, s.a_cols, s.b_rows, s.b_cols, s.c_rows, s.c_cols}),
            std::vector<int64_t>({10, 2, 6, 2, 10, 6}));
  EXPECT_THROW(make_plan({.op = Op::gemm_ar, .m = 10, .n = 6, .k = 3, .world = 4}, {}, 0), UsageError);
}

}  // namespace
}  // namespace collmm
