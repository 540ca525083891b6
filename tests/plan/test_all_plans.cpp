// test_all_plans.cpp: the plan checker passes every schedule: both ops x every algorithm x both
// posting orders x 1 or 2 GEMM lanes x both B layouts, for P = 1..16, on even, uneven, M = P, tiny
// and non-square shapes, for pipelined with the default, 1, 2 and the most stages, and for the
// ag_gemm ring with merge 2, 3 and P (GEMMs over several received chunks); each also with its
// collectives lowered to rings (lower_collectives), as the host transport runs it. And the ring and
// bidir of both ops with their edge cut in pieces, equal or of halving size, every count from 2 to 8
// that the rows allow.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "plan_check.hpp"

namespace collmm {
namespace {

struct Shape {
  const char* name;
  int64_t m, n, k;
};

std::vector<Shape> shapes(int P) {
  return {{"even", 4 * P, 2 * P, 3 * P},
          {"uneven", 4 * P - 1, 2 * P + 1, 3 * P + 1},  // remainders P-1 and 1 (for P > 1)
          {"m_eq_p", P, 2 * P + 1, P + 2},
          {"tiny", P, P, P},
          {"non_square", 2 * P + 1, 7 * P + 3, P + 3}};
}

// Merge counts worth trying: 1 everywhere; 2, 3 and P for the ag_gemm ring.
std::vector<int> merge_counts(const Problem& p, Algo algo) {
  if (p.op != Op::ag_gemm || algo != Algo::ring) return {1};
  return {1, 2, 3, p.world};
}

// Stage counts worth trying for pipelined (waves for gemm_ar's ring): the default (0), 1, 2 and the
// most M allows.
std::vector<int> stage_counts(const Problem& p, Algo algo) {
  if (!algorithm(algo).takes_stages && !takes_waves(p.op, algo)) return {0};
  const int most = static_cast<int>(p.m / p.world);
  std::vector<int> s{0, 1};
  if (most >= 2) s.push_back(2);
  if (most > 2) s.push_back(most);
  return s;
}

class AllPlans : public ::testing::TestWithParam<int> {};

TEST_P(AllPlans, EveryScheduleIsProvedSafe) {
  const int P = GetParam();
  int checked = 0, failed = 0;
  for (Op op : all_ops())
    for (const Shape& shape : shapes(P))
      for (BLayout layout : {BLayout::kn, BLayout::nk})
        for (Algo algo : all_algos()) {
          const Problem p{.op = op, .m = shape.m, .n = shape.n, .k = shape.k, .world = P, .b_layout = layout};
          for (int stages : stage_counts(p, algo))
            for (Post post : {Post::comm_first, Post::gemm_first})
              for (int lanes : {1, 2})
                for (int merge : merge_counts(p, algo)) {
                  const bool waves = takes_waves(p.op, algo);
                  const PlanOptions o{.algo = algo,
                                      .stages = waves ? 0 : stages,
                                      .waves = waves ? stages : 0,
                                      .post = post,
                                      .gemm_lanes = lanes,
                                      .merge = merge};
                  CheckReport report = check_problem(p, o);
                  if (report.ok()) {  // and as the host transport runs it: collectives lowered to rings
                    std::vector<Plan> lowered;
                    for (int r = 0; r < P; ++r) lowered.push_back(lower_collectives(make_plan(p, o, r)).plan);
                    report = check_plans(lowered);
                  }
                  ++checked;
                  if (report.ok()) continue;
                  if (++failed <= 3)
                    ADD_FAILURE() << to_string(op) << " " << shape.name << " M=" << p.m << " N=" << p.n << " K=" << p.k
                                  << " P=" << P << " b=" << to_string(layout) << " " << to_string(o) << "\n"
                                  << report.text(12);
                }
        }
  EXPECT_EQ(failed, 0) << "of " << checked << " configurations";
  EXPECT_GT(checked, 0);
}

// --pieces S on the ring and bidir, equal or of halving size: every S from 2 up to 8 or what the
// rows of the edge chunk allow, both posting orders, 1 or 2 GEMM lanes, with the ag_gemm ring's
// merges and gemm_ar's ring in two waves; a tall shape gives equal S up to 8, a taller one halving S up to 8 (2^7 rows
// a half chunk).
TEST_P(AllPlans, EveryPiecesCountIsProvedSafe) {
  const int P = GetParam();
  int checked = 0, failed = 0;
  std::vector<Shape> list = shapes(P);
  list.push_back({"tall", 16 * P + 3, 2 * P + 1, 3 * P + 1});
  list.push_back({"taller", 256 * P + 3, 2 * P + 1, 3 * P + 1});
  for (Op op : all_ops())
    for (const Shape& shape : list)
      for (Algo algo : {Algo::ring, Algo::bidir})
        for (PieceSizes sizes : {PieceSizes::equal, PieceSizes::halving}) {
          const Problem p{.op = op, .m = shape.m, .n = shape.n, .k = shape.k, .world = P, .b_layout = BLayout::kn};
          if (sizes == PieceSizes::equal && std::string(shape.name) == "taller") continue;  // as tall
          // gemm_ar's ring also in 2 waves, each wave's edge in pieces
          for (int waves : takes_waves(op, algo) && p.m / P >= 2 ? std::vector<int>{0, 2} : std::vector<int>{0}) {
            int most = 1;
            while (most < 8 && rows_for_pieces(most + 1, sizes) <= edge_rows(p, {.algo = algo, .waves = waves})) ++most;
            for (int pieces = 2; pieces <= most; ++pieces)
              for (Post post : {Post::comm_first, Post::gemm_first})
                for (int lanes : {1, 2})
                  for (int merge : merge_counts(p, algo)) {
                    const PlanOptions o{algo, 0, waves, post, lanes, merge, pieces, sizes};
                    const CheckReport report = check_problem(p, o);
                    ++checked;
                    if (report.ok()) continue;
                    if (++failed <= 3)
                      ADD_FAILURE() << to_string(op) << " " << shape.name << " M=" << p.m << " P=" << P << " "
                                    << to_string(o) << "\n"
                                    << report.text(12);
                  }
          }
        }
  EXPECT_EQ(failed, 0) << "of " << checked << " configurations";
}

INSTANTIATE_TEST_SUITE_P(P1to16, AllPlans, ::testing::Range(1, 17),
                         [](const ::testing::TestParamInfo<int>& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace collmm
