// test_peer_traffic.cpp: what the host transport stages for one rank (check::peer_traffic) is what
// that rank's real peers send it. For every op x algorithm (with the ag_gemm ring's merges,
// pipelined stage counts, the rings' edge in 2 and 3 pieces, equal and halving, and two GEMM lanes) on P = 1..8 and
// uneven shapes, every rank r, with collectives lowered to rings:
//  - rank r replayed alone, its receives filled from the staged rows, sends what its successors
//    need and ends with exactly the outputs the job must have (replay_alone);
//  - the lockstep rule the host transport times receives by holds: each receive is sent by the
//    peer at the same algorithm step and the same ring sub-step of a lowered collective, so "when
//    this rank's own step starts" is when the peer could send it;
//  - ag_gemm receives carry other ranks' rows of A; gemm_rs receives never carry r's own partials.
// And a staged row changed makes the replay fail (the check can fail).
#include <gtest/gtest.h>

#include <map>

#include "collmm/plan.hpp"
#include "peer_traffic.hpp"

namespace collmm {
namespace {

std::vector<Plan> lowered_plans(const Problem& p, const PlanOptions& o) {
  std::vector<Plan> plans;
  for (int r = 0; r < p.world; ++r) plans.push_back(lower_collectives(make_plan(p, o, r)).plan);
  return plans;
}

std::vector<PlanOptions> options_for(Op op) {
  std::vector<PlanOptions> list;
  for (Algo algo : all_algos())
    for (int merge : (op == Op::ag_gemm && algo == Algo::ring) ? std::vector<int>{1, 2, 3} : std::vector<int>{1})
      for (int stages : algo == Algo::pipelined ? std::vector<int>{0, 1, 2, 5}
                        : takes_waves(op, algo) ? std::vector<int>{0, 2}  // gemm_ar's ring in waves
                                                : std::vector<int>{0})
        for (int pieces : (algo == Algo::ring || algo == Algo::bidir) ? std::vector<int>{1, 2, 3} : std::vector<int>{1})
          for (Post post : {Post::comm_first, Post::gemm_first})
            for (PieceSizes sizes : pieces > 1 ? std::vector<PieceSizes>{PieceSizes::equal, PieceSizes::halving}
                                               : std::vector<PieceSizes>{PieceSizes::equal}) {
              PlanOptions o;
              o.algo = algo;
              o.merge = merge;
              (takes_waves(op, algo) ? o.waves : o.stages) = stages;
              o.pieces = pieces;
              o.piece_sizes = sizes;
              o.post = post;
              o.gemm_lanes = stages == 2 || pieces == 3 ? 2 : 1;
              list.push_back(o);
            }
  return list;
}

// Each sendrecv step's label: (the algorithm's step index, its ordinal among the sendrecv steps
// with that index: the ring sub-step of a lowered collective).
std::vector<std::pair<int, int>> labels(const Plan& plan) {
  std::vector<std::pair<int, int>> out(plan.steps.size(), {-1, -1});
  std::map<int, int> seen;
  for (size_t i = 0; i < plan.steps.size(); ++i)
    if (plan.steps[i].kind == StepKind::sendrecv) out[i] = {plan.steps[i].index, seen[plan.steps[i].index]++};
  return out;
}

std::string name(const Problem& p, const PlanOptions& o, int r) {
  return to_string(p.op) + " " + to_string(o) + " P=" + std::to_string(p.world) + " M=" + std::to_string(p.m) +
         " rank " + std::to_string(r);
}

TEST(PeerTraffic, StagedRowsAreWhatThePeersSend) {
  int cases = 0;
  for (int P = 1; P <= 8; ++P)
    for (Op op : all_ops())
      for (const PlanOptions& o : options_for(op)) {
        const Problem p{.op = op, .m = 5 * P + 3, .n = 3 * P + 1, .k = 2 * P + 3, .world = P, .b_layout = BLayout::kn};
        if (o.stages > p.m / P || o.waves > p.m / P || rows_for_pieces(o.pieces, o.piece_sizes) > edge_rows(p, o))
          continue;
        const std::vector<Plan> plans = lowered_plans(p, o);
        std::vector<check::PeerTraffic> traffic;
        for (int r = 0; r < P; ++r) traffic.push_back(check::peer_traffic(plans, r));
        for (int r = 0; r < P; ++r) {
          ++cases;
          const std::vector<std::string> errors = check::replay_alone(plans, r, traffic[r]);
          EXPECT_TRUE(errors.empty()) << name(p, o, r) << ": " << errors.size() << " errors, first: " << errors.front();
          EXPECT_EQ(traffic[r].received.size(), traffic[r].sent.size()) << name(p, o, r);
          if (P > 1) {
            EXPECT_FALSE(traffic[r].received.empty()) << name(p, o, r);
          }
          for (const check::LinkTransfer& recv : traffic[r].received) {
            EXPECT_EQ(labels(plans[r]).at(recv.step), labels(plans[recv.peer]).at(recv.peer_step))
                << name(p, o, r) << ": receive at step " << recv.step << " sent by rank " << recv.peer
                << " at its step " << recv.peer_step;
            for (const check::Terms& row : recv.rows)
              for (const check::Term& t : row) {
                if (op == Op::ag_gemm) {
                  EXPECT_TRUE(t.kind == 0 && t.rank != r && row.size() == 1) << name(p, o, r);
                } else {  // gemm_ar's all-gather forwards whole sums, this rank's partial among them
                  EXPECT_TRUE(t.kind == 1 && (t.rank != r || op == Op::gemm_ar)) << name(p, o, r);
                }
              }
          }
        }
      }
  EXPECT_GT(cases, 500);
}

TEST(PeerTraffic, AChangedStagedRowFailsTheReplay) {
  for (Op op : all_ops()) {
    const Problem p{.op = op, .m = 19, .n = 9, .k = 11, .world = 4, .b_layout = BLayout::kn};
    PlanOptions o;
    o.algo = Algo::ring;
    const std::vector<Plan> plans = lowered_plans(p, o);
    check::PeerTraffic t = check::peer_traffic(plans, 1);
    ASSERT_TRUE(check::replay_alone(plans, 1, t).empty());
    t.received.at(1).rows.at(0).at(0).row += 1;  // a staged row from the wrong place
    EXPECT_FALSE(check::replay_alone(plans, 1, t).empty()) << to_string(op);
  }
}

TEST(PeerTraffic, RefusesPlansWithCollectives) {
  const Problem p{.op = Op::ag_gemm, .m = 8, .n = 4, .k = 4, .world = 2, .b_layout = BLayout::kn};
  PlanOptions o;
  o.algo = Algo::sequential;
  const std::vector<Plan> plans{make_plan(p, o, 0), make_plan(p, o, 1)};
  EXPECT_THROW(check::peer_traffic(plans, 0), std::runtime_error);
}

}  // namespace
}  // namespace collmm
