// test_mutations.cpp: the plan checker catches each class of error. Each test takes a schedule the
// checker accepts, breaks it in one way, and expects the matching error.
#include <gtest/gtest.h>

#include "plan_edit.hpp"

namespace collmm {
namespace {

using test::all_plans;
using test::find_step;

const PlanOptions kRing{.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1};

// True when some error contains `what`.
bool has_error(const CheckReport& r, const std::string& what) {
  for (const std::string& e : r.errors)
    if (e.find(what) != std::string::npos) return true;
  return false;
}

#define EXPECT_ERROR(report, what) \
  EXPECT_TRUE(has_error(report, what)) << "expected '" << what << "' in\n" << (report).text()

TEST(Mutations, UnchangedPlansPass) {
  for (Op op : all_ops()) {
    const CheckReport r =
        check_plans(all_plans({.op = op, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing));
    EXPECT_TRUE(r.ok()) << r.text();
  }
}

TEST(Mutations, DroppedReceiveIsUnmatchedAndDeadlocks) {
  std::vector<Plan> plans =
      all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[2].steps[find_step(plans[2], StepKind::sendrecv)].recvs.clear();
  const CheckReport r = check_plans(plans);
  // Rank 2's receives from rank 1 shift by one: rank 1's last send is the one left over.
  EXPECT_ERROR(r, "send #2 to rank 2 has no matching receive on rank 2");
  EXPECT_ERROR(r, "deadlock:");
  EXPECT_ERROR(r, "deadlock: rank 1 step");
}

TEST(Mutations, ReceiveOfWrongSizeIsReported) {
  std::vector<Plan> plans =
      all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[3].steps[find_step(plans[3], StepKind::sendrecv)].recvs[0].slice.rows = 3;
  EXPECT_ERROR(check_plans(plans), "receiving 3x8");
}

TEST(Mutations, SwappedStepsMakeACycleAcrossRanks) {
  // P = 2: rank 0 sends, then receives; rank 1 receives, then sends. Safe.
  std::vector<Plan> plans =
      all_plans({.op = Op::ag_gemm, .m = 8, .n = 4, .k = 4, .world = 2, .b_layout = BLayout::kn}, kRing);
  const int c0 = find_step(plans[0], StepKind::sendrecv), c1 = find_step(plans[1], StepKind::sendrecv);
  test::split_sendrecv(plans[0], c0);
  test::split_sendrecv(plans[1], c1);
  test::swap_steps(plans[1], c1);
  const CheckReport safe = check_plans(plans);
  ASSERT_TRUE(safe.ok()) << safe.text();
  // Rank 0 now receives first too: each waits for the other's send, posted after its receive.
  test::swap_steps(plans[0], c0);
  const CheckReport r = check_plans(plans);
  EXPECT_ERROR(r, "deadlock: rank 0 step " + std::to_string(c0));
  EXPECT_ERROR(r, "deadlock: rank 1 step " + std::to_string(c1));
  EXPECT_ERROR(r, "receive from 1 waits for its partner, step " + std::to_string(c1 + 1) + " of rank 1");
}

TEST(Mutations, CollectivesInDifferentOrderDisagree) {
  std::vector<Plan> plans =
      all_plans({.op = Op::gemm_rs, .m = 8, .n = 8, .k = 8, .world = 2, .b_layout = BLayout::kn},
                {.algo = Algo::sequential, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1});
  Step& rs = plans[1].steps[find_step(plans[1], StepKind::reduce_scatter)];
  rs.kind = StepKind::allgather;  // in place: contributes its own part
  rs.a = rs.parts[1];
  EXPECT_ERROR(check_plans(plans), "collective #0 is allgather here and reduce_scatter on rank 0");
  plans = all_plans({.op = Op::ag_gemm, .m = 7, .n = 8, .k = 8, .world = 2, .b_layout = BLayout::kn},
                    {.algo = Algo::pipelined, .stages = 2, .post = Post::comm_first, .gemm_lanes = 1});
  // Rank 1 posts stage 1's allgather first: the sizes no longer agree (4 rows split 2+2, 3 split 2+1).
  const int s0 = find_step(plans[1], StepKind::allgather, 0);
  for (int s1 = find_step(plans[1], StepKind::allgather, 1); s1 > s0; --s1) test::swap_steps(plans[1], s1 - 1);
  ASSERT_EQ(plans[1].steps[s0].index, 1);
  EXPECT_ERROR(check_plans(plans), "collective #0 gives rank 1");
}

TEST(Mutations, DuplicatedGemmWritesTwice) {
  std::vector<Plan> plans =
      all_plans({.op = Op::ag_gemm, .m = 12, .n = 6, .k = 8, .world = 3, .b_layout = BLayout::kn}, kRing);
  const int g = find_step(plans[1], StepKind::gemm, 1);
  test::insert_step(plans[1], g + 1, plans[1].steps[g]);
  EXPECT_ERROR(check_plans(plans), "written 2 times, not once");
}

TEST(Mutations, RowsComputedWithAnotherRanksBAreWrong) {
  // Rank 0 skips its GEMM of chunk 1 and takes those C rows from rank 1, which used B_1.
  std::vector<Plan> plans =
      all_plans({.op = Op::ag_gemm, .m = 8, .n = 4, .k = 8, .world = 2, .b_layout = BLayout::kn}, kRing);
  test::erase_step(plans[0], find_step(plans[0], StepKind::gemm, 1));
  Step recv;
  recv.kind = StepKind::sendrecv;
  recv.recvs = {{1, {kBufC, 4, 4}}};
  plans[0].push(recv);
  Step send;
  send.kind = StepKind::sendrecv;
  send.sends = {{0, {kBufC, 4, 4}}};
  send.waits = {find_step(plans[1], StepKind::gemm, 0)};
  plans[1].push(send);
  const CheckReport r = check_plans(plans);
  EXPECT_ERROR(r, "data: rank 0 C row 4 (global row 4) holds {A row 4 @ B_1}, missing {A row 4 @ B_0}");
}

TEST(Mutations, DuplicatedAddSumsAPartialTwice) {
  std::vector<Plan> plans =
      all_plans({.op = Op::gemm_rs, .m = 12, .n = 6, .k = 8, .world = 3, .b_layout = BLayout::kn}, kRing);
  const int a = find_step(plans[0], StepKind::add, 1);
  test::insert_step(plans[0], a + 1, plans[0].steps[a]);
  EXPECT_ERROR(check_plans(plans), "extra {rank ");
}

TEST(Mutations, RemovedAddLosesAPartial) {
  for (Algo algo : {Algo::ring, Algo::bidir}) {
    std::vector<Plan> plans =
        all_plans({.op = Op::gemm_rs, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn},
                  {.algo = algo, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1});
    test::erase_step(plans[2], find_step(plans[2], StepKind::add, 1));
    const CheckReport r = check_plans(plans);
    EXPECT_ERROR(r, "missing {rank ");
    EXPECT_ERROR(r, "'s partial of row");
  }
}

TEST(Mutations, RemovedWaitIsARace) {
  // ag_gemm ring: the GEMM of step 1 reads the chunk the step-0 receive writes.
  std::vector<Plan> plans =
      all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[1].steps[find_step(plans[1], StepKind::gemm, 1)].waits.clear();
  EXPECT_ERROR(check_plans(plans), "race: rank 1 step");

  // gemm_rs pipelined: stage 2's GEMMs overwrite the stage buffer stage 0's reduce-scatter reads.
  plans = all_plans({.op = Op::gemm_rs, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn},
                    {.algo = Algo::pipelined, .stages = 4, .post = Post::comm_first, .gemm_lanes = 1});
  plans[0].steps[find_step(plans[0], StepKind::gemm, 2)].waits.clear();
  CheckReport r = check_plans(plans);
  EXPECT_ERROR(r, "reduce_scatter step 0");
  EXPECT_ERROR(r, "race: rank 0 step");

  // gemm_rs ring: the step-0 send reads the partial its GEMM writes.
  plans = all_plans({.op = Op::gemm_rs, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[3].steps[find_step(plans[3], StepKind::sendrecv, 0)].waits.clear();
  EXPECT_ERROR(check_plans(plans), "race: rank 3 step");

  // gemm_rs ring: the GEMM of step 2 overwrites G while the add of step 1 still reads it.
  plans = all_plans({.op = Op::gemm_rs, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn},
                    {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 2});
  plans[1].steps[find_step(plans[1], StepKind::gemm, 2)].waits.clear();
  EXPECT_ERROR(check_plans(plans), "race: rank 1 step");
}

TEST(Mutations, WrongRowOffsetIsCaught) {
  // A GEMM writing the C rows of the neighbouring chunk: one chunk twice, one never.
  std::vector<Plan> plans =
      all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[1].steps[find_step(plans[1], StepKind::gemm, 1)].out.row += 4;  // chunk 0 -> rows of chunk 1
  CheckReport r = check_plans(plans);
  EXPECT_ERROR(r, "is never written");
  EXPECT_ERROR(r, "written 2 times");

  // A receive landing one row low: the gathered A and C hold the wrong rows.
  plans = all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[2].steps[find_step(plans[2], StepKind::sendrecv, 1)].recvs[0].slice.row += 1;
  r = check_plans(plans);
  EXPECT_ERROR(r, "data: rank 2 gathered row");
  EXPECT_ERROR(r, "data: rank 2 C row");

  // gemm_rs: an add of the wrong rows of G into the sum.
  plans = all_plans({.op = Op::gemm_rs, .m = 15, .n = 8, .k = 8, .world = 3, .b_layout = BLayout::kn}, kRing);
  const int a = find_step(plans[0], StepKind::add, 1);
  plans[0].steps[a].a.row += 1;
  plans[0].steps[a].a.rows -= 1;
  plans[0].steps[a].out.rows -= 1;
  EXPECT_ERROR(check_plans(plans), "missing {rank ");

  // Past the end of the buffer: a structural error, and the later passes do not run.
  plans = all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[0].steps[find_step(plans[0], StepKind::gemm, 3)].out.row = 14;
  r = check_plans(plans);
  EXPECT_ERROR(r, "lies outside its buffer of 16 rows");
}

TEST(Mutations, StructureErrors) {
  std::vector<Plan> plans =
      all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[0].steps[find_step(plans[0], StepKind::gemm, 1)].lane = 7;
  EXPECT_ERROR(check_plans(plans), "lane 7 outside [0, 2)");

  plans = all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[0].steps[find_step(plans[0], StepKind::sendrecv, 1)].lane = 1;
  EXPECT_ERROR(check_plans(plans), "comm step on lane 1, not lane 0");

  plans = all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[0].steps[1].waits = {5};
  EXPECT_ERROR(check_plans(plans), "waits for step 5, which is not an earlier step");

  plans = all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[2].steps[find_step(plans[2], StepKind::gemm, 1)].a.rows = 3;
  EXPECT_ERROR(check_plans(plans), "multiplies 3 rows into 4");

  plans = all_plans({.op = Op::gemm_rs, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  Step copy;
  copy.kind = StepKind::copy;
  copy.out = {kBufC, 0, 2};
  copy.a = {kBufA, 0, 2};  // A [16, 2] rows into C [4, 8] rows: other widths, other types
  test::insert_step(plans[1], 0, copy);
  CheckReport r = check_plans(plans);
  EXPECT_ERROR(r, "has 4 elements, buf2[0:2] has 16");
  EXPECT_ERROR(r, "hold different element types");

  plans = all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[3].steps[find_step(plans[3], StepKind::gemm, 0)].out = {kBufA, 0, 4};
  EXPECT_ERROR(check_plans(plans), "writes A");

  plans = all_plans({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, kRing);
  plans[1].problem.m = 20;
  EXPECT_ERROR(check_plans(plans), "rank 1 plans ag_gemm M=20");
}

}  // namespace
}  // namespace collmm
