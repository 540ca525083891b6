// test_schedule_rules.cpp: rules of the schedules that the checker does not prove (it proves data
// safety, not speed), each one measured on the H200 (docs/perf.md), and only_fills_output.
#include <gtest/gtest.h>

#include "collmm/plan.hpp"
#include "plan_edit.hpp"

namespace collmm {
namespace {

// Posted comm-first, every ag_gemm GEMM of step or stage s comes after that step's transfer (where
// it has one): a transfer that becomes ready while a GEMM that fills the GPU already runs barely
// moves until that GEMM ends (the host bed's pipelined plan at P = 2: 14% of a stage's bytes in
// 569 us), so no GEMM may start ahead of the transfer it hides.
TEST(ScheduleRules, NoAgGemmGemmIsPostedAheadOfItsStepsTransfer) {
  for (int P = 2; P <= 8; ++P)
    for (Algo algo : {Algo::pipelined, Algo::ring, Algo::bidir})
      for (int stages : {0, 2, 3}) {
        if (algo != Algo::pipelined && stages != 0) continue;
        const Problem p{.op = Op::ag_gemm, .m = 8 * P + 3, .n = 16, .k = 16, .world = P, .b_layout = BLayout::kn};
        for (int r = 0; r < P; ++r) {
          const Plan plan =
              make_plan(p, {.algo = algo, .stages = stages, .post = Post::comm_first, .gemm_lanes = 1}, r);
          for (size_t i = 0; i < plan.steps.size(); ++i) {
            const Step& g = plan.steps[i];
            if (g.kind != StepKind::gemm) continue;
            const int comm =
                test::find_step(plan, algo == Algo::pipelined ? StepKind::allgather : StepKind::sendrecv, g.index);
            if (comm < 0) continue;  // the last step: no transfer
            EXPECT_LT(comm, static_cast<int>(i))
                << to_string(algo) << " stages " << stages << " P=" << P << " rank " << r << ": gemm step " << i
                << " (index " << g.index << ") is posted before its transfer, step " << comm;
          }
        }
      }
}

// The pipelined plan cuts this rank's own chunk per stage too: one GEMM per rank and stage, each
// over that stage's rows, and none of the own ones waits for a later stage's transfer.
TEST(ScheduleRules, PipelinedCutsTheOwnChunkPerStage) {
  const Problem p{.op = Op::ag_gemm, .m = 4 * 13 + 2, .n = 16, .k = 16, .world = 4, .b_layout = BLayout::kn};
  const int S = 3, r = 1;
  const Plan plan = make_plan(p, {.algo = Algo::pipelined, .stages = S, .post = Post::comm_first, .gemm_lanes = 1}, r);
  int own = 0, others = 0;
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::gemm) continue;
    if (s.chunk == r) {
      ++own;
      EXPECT_EQ(s.a.buf, kBufA);
      EXPECT_EQ(s.a.rows, block_size(block_size(p.m, 4, r), S, s.index));
      for (int w : s.waits) EXPECT_LT(plan.steps[w].index, s.index);
    } else {
      ++others;
    }
  }
  EXPECT_EQ(own, S);
  EXPECT_EQ(others, 3 * S);
}

TEST(OnlyFillsOutput, TheRingsOwnChunkCopyAndACopyThatIsRead) {
  const Problem p{.op = Op::ag_gemm, .m = 12, .n = 6, .k = 8, .world = 3, .b_layout = BLayout::kn};
  const Plan ring = make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1}, 1);
  const int copy = test::find_step(ring, StepKind::copy);
  ASSERT_GE(copy, 0);
  EXPECT_TRUE(only_fills_output(ring, copy));                                    // its GEMM read the chunk from A
  EXPECT_FALSE(only_fills_output(ring, test::find_step(ring, StepKind::gemm)));  // not a copy

  Plan read = ring;  // a later GEMM reads the copied rows
  read.push(local_step(StepKind::gemm, 1, {kBufC, 0, 4}, read.steps[copy].out, 9, 1, {copy}));
  EXPECT_FALSE(only_fills_output(read, copy));
  Plan sent = ring;  // a later send forwards them
  Step send;
  send.kind = StepKind::sendrecv;
  send.sends = {{2, sent.steps[copy].out}};
  sent.push(send);
  EXPECT_FALSE(only_fills_output(sent, copy));
}

}  // namespace
}  // namespace collmm
