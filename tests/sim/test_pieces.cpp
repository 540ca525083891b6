// test_pieces.cpp: what the cost model says of --pieces S. With a chunk's GEMM g and its transfer
// c >= g, the ring's and bidir's exposed edge shrinks by min((S-1)/S g, c - g) (both ops): cut in
// pieces, the edge GEMM still queues behind its neighbour step's GEMM (ag_gemm: the GEMM of step P-2,
// which runs beside the first pieces; gemm_rs: step 1's, which the first add waits for), so
// the saving is whole only where c >= 2g - g/S. Each extra transfer pays its fixed cost, so a large
// one makes S > 1 lose; on the host bed's profile at the row S = 2 is predicted faster.
// Pieces of halving size leave 1/2^(S-1) of the chunk's GEMM for S transfers: on the bed's P = 2
// row they are predicted faster than any equal cut.
#include <gtest/gtest.h>

#include <algorithm>

#include "collmm/algorithms.hpp"
#include "collmm/sim.hpp"
#include "sim_test_util.hpp"
#include "tuning.hpp"

namespace collmm {
namespace {

constexpr int P = 4;
constexpr int64_t kRows = 256;  // per rank

Problem problem(Op op) {
  Problem p;
  p.op = op;
  p.m = kRows * P, p.n = 256 * P, p.k = 512 * P, p.world = P;
  return p;
}

// One chunk's GEMM takes g; one chunk's transfer ratio * g (4/3: t_gemm = P g = t_comm).
double chunk_gemm_us(Op op) {
  return op == Op::ag_gemm ? test::gemm_us(kRows, 256, 512 * P, 1.0) : test::gemm_us(kRows, 256 * P, 512, 1.0);
}
Profile balanced(Op op, double latency_us, double ratio = 4.0 / 3) {
  const double chunk_bytes = op == Op::ag_gemm ? kRows * 512.0 * P * 4 : kRows * 256.0 * P * 4;
  Profile prof = test::analytic_profile(1.0, chunk_bytes / (ratio * chunk_gemm_us(op) * 1e3));
  prof.links.intra_latency_us = latency_us;
  return prof;
}

double time_us(Op op, Algo algo, int pieces, const Profile& prof) {
  PlanOptions o;
  o.algo = algo;
  o.pieces = pieces;
  return simulate(problem(op), o, Dtype::f32, prof, StepFilter::all, false).time_us;
}

TEST(Pieces, TheExposedEdgeShrinksByAPieceOfTheChunkGemm) {
  for (double ratio : {4.0 / 3, 2.5})
    for (Op op : all_ops())
      for (Algo algo : {Algo::ring, Algo::bidir}) {
        const Profile prof = balanced(op, 0, ratio);
        const double g = chunk_gemm_us(op), one = time_us(op, algo, 1, prof);
        for (int s : {2, 4, 8}) {
          const double saved = one - time_us(op, algo, s, prof);
          EXPECT_NEAR(saved, std::min(g * (s - 1) / s, (ratio - 1) * g), 0.05 * g)
              << to_string(op) << " " << to_string(algo) << " c/g=" << ratio << " S=" << s;
        }
      }
}

TEST(Pieces, AFixedCostPerTransferMakesMorePiecesLose) {
  for (Op op : all_ops()) {
    const double g = chunk_gemm_us(op);
    // A small fixed cost: S = 2 still pays; one of half a chunk GEMM per transfer: it does not.
    EXPECT_LT(time_us(op, Algo::ring, 2, balanced(op, 0.05 * g)), time_us(op, Algo::ring, 1, balanced(op, 0.05 * g)));
    EXPECT_GT(time_us(op, Algo::ring, 4, balanced(op, 0.5 * g)), time_us(op, Algo::ring, 1, balanced(op, 0.5 * g)));
  }
}

// The row on the host bed: M = K = 8192, per-rank N (ag_gemm) or K (gemm_rs) 8192, P = 4,
// bf16, where the ring exposes a quarter of t_gemm. (gemm_ar's ring also runs the all-gather after
// it, which the pieces do not touch: there they gain less than 5%.)
TEST(Pieces, HostBedRowIsPredictedFasterInTwoPieces) {
  const Profile prof = builtin_profile("h200-host");
  for (Op op : {Op::ag_gemm, Op::gemm_rs}) {
    Problem p;
    p.op = op, p.m = 8192, p.n = op == Op::ag_gemm ? 4 * 8192 : 8192, p.k = op == Op::ag_gemm ? 8192 : 4 * 8192;
    p.world = 4;
    PlanOptions one, two;
    two.pieces = 2;
    const double t1 = simulate(p, one, Dtype::bf16, prof, StepFilter::all, false).time_us;
    const double t2 = simulate(p, two, Dtype::bf16, prof, StepFilter::all, false).time_us;
    EXPECT_LT(t2, 0.95 * t1) << to_string(op) << ": " << t2 << " us vs " << t1;
  }
}

// The bed's P = 2 row, M = 8192, t_gemm ~ t_comm (per-rank N or K 8192): the ring exposes half of
// t_gemm. Equal pieces trade the tail g/(2S) against S fixed costs (best near S = 8); halving sizes
// leave g/2^S for S transfers: 5 of them are predicted faster than any equal cut, within 1.11x of
// max(t_gemm, t_comm) (equal: 1.12x at best).
TEST(Pieces, HalvingSizesBeatEqualOnesOnTheBedsTwoRankRow) {
  const Profile prof = builtin_profile("h200-host");
  for (Op op : all_ops()) {
    Problem p;
    p.op = op, p.m = 8192, p.n = op == Op::ag_gemm ? 2 * 8192 : 8192, p.k = op == Op::ag_gemm ? 8192 : 2 * 8192;
    p.world = 2;
    auto time = [&](int pieces, PieceSizes sizes) {
      PlanOptions o;
      o.pieces = pieces, o.piece_sizes = sizes;
      return simulate(p, o, Dtype::bf16, prof, StepFilter::all, false).time_us;
    };
    const double halving = time(5, PieceSizes::halving);
    for (int s : {1, 2, 4, 8, 16, 32})
      EXPECT_LT(halving, time(s, PieceSizes::equal)) << to_string(op) << ": halving 5 vs equal " << s;
    const Prediction plain = predict(p, PlanOptions{}, Dtype::bf16, prof);
    EXPECT_LT(halving, 1.11 * std::max(plain.t_gemm_us, plain.t_comm_us)) << to_string(op);
  }
}

// auto lists the ring and bidir in each of the table's pieces where the edge chunk has the rows
// (and picks one where t_gemm ~ t_comm); the tuning cache's JSON keeps pieces and refuses a bad count.
TEST(Pieces, AutoConsidersThemAndTheCacheKeepsThem) {
  const Choice c = choose(problem(Op::gemm_rs), Dtype::f32, balanced(Op::gemm_rs, 0, 2.5), nullptr);
  int cut = 0, listed = 0;
  for (const Alternative& a : c.alternatives) cut += a.options.pieces > 1;
  for (const AlgoRow& row : algorithm_table())
    for (PieceSizes sizes : {PieceSizes::equal, PieceSizes::halving})
      for (int pieces : sizes == PieceSizes::equal ? row.auto_pieces : row.auto_halving) {
        listed += 1;
        EXPECT_TRUE(std::any_of(c.alternatives.begin(), c.alternatives.end(),
                                [&](const Alternative& a) {
                                  return a.options.algo == row.algo && a.options.pieces == pieces &&
                                         a.options.piece_sizes == sizes;
                                }))
            << row.name << " in " << pieces << " " << to_string(sizes) << " pieces is not among auto's candidates";
      }
  EXPECT_EQ(cut, listed);
  EXPECT_GE(listed, 8);
  EXPECT_GT(c.options.pieces, 1) << print(c);
  Problem small = problem(Op::ag_gemm);
  small.m = 3 * P;  // 3 rows a chunk: no 4 pieces (equal or halving), and bidir's halves have 1 row
  int small_cut = 0;
  for (const PlanOptions& o : auto_candidates(small)) small_cut += o.pieces > 1;
  EXPECT_EQ(small_cut, 1);  // ring in 2 pieces

  PlanOptions o;
  o.algo = Algo::bidir, o.pieces = 4, o.piece_sizes = PieceSizes::halving;
  EXPECT_EQ(plan_options_from_json(to_json(o)), o);
  nlohmann::json sizes = to_json(o);
  sizes["piece_sizes"] = "thirds";
  EXPECT_THROW(plan_options_from_json(sizes), UsageError);
  nlohmann::json bad = to_json(o);
  bad["pieces"] = 0;
  EXPECT_THROW(plan_options_from_json(bad), UsageError);
}

}  // namespace
}  // namespace collmm
