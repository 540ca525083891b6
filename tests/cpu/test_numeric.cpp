// test_numeric.cpp: every op x algorithm x dtype (f32, f64, bf16) x posting order on the cpu
// backend, on shapes that stress the splits: uneven shards, transposed B, M = P, tiny, tall and
// wide; plus two or three GEMM lanes, every pipelined stage count and the rings' edge in pieces. Each rank checks its
// own C against the f64 reference and ag_gemm's gathered A against the global A.
#include <gtest/gtest.h>

#include <algorithm>

#include <ostream>
#include <tuple>

#include "cpu_test_env.hpp"

namespace collmm {
// Readable parameters in GoogleTest's messages.
inline void PrintTo(Op op, std::ostream* os) { *os << to_string(op); }
inline void PrintTo(Algo algo, std::ostream* os) { *os << to_string(algo); }
}  // namespace collmm

namespace collmm::cpu_test {
namespace {

struct Shape {
  const char* name;
  int64_t m, n, k;
  BLayout b_layout;
};

// Valid for both ops at any P (M, N, K >= P); most do not divide by P.
std::vector<Shape> shapes(int P) {
  return {
      {"uneven", 4 * P + 1, 3 * P + 2, 2 * P + 1, BLayout::kn},  // P = 3: M=13 N=11 K=7
      {"uneven_nk", 4 * P + 1, 3 * P + 2, 2 * P + 1, BLayout::nk},
      {"m_eq_p", P, 2 * P + 1, P + 2, BLayout::kn},
      {"tiny", P, P, P, BLayout::nk},
      {"tall_nk", 9 * P + 2, P + 1, 5 * P + 3, BLayout::nk},
      {"wide", P + 1, 16 * P + 5, 3 * P, BLayout::kn},
  };
}

void expect_correct(const Problem& p, const PlanOptions& o, Dtype dtype, uint64_t seed) {
  const Checked r = run_and_check(p, o, dtype, seed);
  EXPECT_EQ(r.c.wrong, 0) << case_name(p, o, dtype) << ": max_rel_err " << r.c.max_rel_err;
  if (p.op == Op::ag_gemm) {
    EXPECT_EQ(r.gathered_wrong, 0) << "gathered A of " << case_name(p, o, dtype);
  }
}

class EveryCase : public ::testing::TestWithParam<std::tuple<Op, Algo>> {};

TEST_P(EveryCase, MatchesReferenceForEveryDtypePostAndShape) {
  const auto [op, algo] = GetParam();
  uint64_t seed = 1;
  for (Dtype dtype : {Dtype::f32, Dtype::f64, Dtype::bf16})
    for (Post post : {Post::comm_first, Post::gemm_first})
      for (const Shape& s : shapes(world())) {
        const Problem p{.op = op, .m = s.m, .n = s.n, .k = s.k, .world = world(), .b_layout = s.b_layout};
        PlanOptions o;
        o.algo = algo;
        o.post = post;
        expect_correct(p, o, dtype, seed++);
      }
}

TEST_P(EveryCase, MatchesReferenceWithSeveralGemmLanes) {
  const auto [op, algo] = GetParam();
  const int P = world();
  for (int lanes : {2, 3})
    for (BLayout lay : {BLayout::kn, BLayout::nk}) {
      const Problem p{.op = op, .m = 6 * P + 1, .n = 2 * P + 3, .k = 3 * P + 1, .world = P, .b_layout = lay};
      PlanOptions o;
      o.algo = algo;
      o.gemm_lanes = lanes;
      o.stages = algo == Algo::pipelined ? 3 : 0;
      expect_correct(p, o, Dtype::f32, 100 + lanes);
    }
}

// The ag_gemm ring with merged GEMMs (--merge 2, 3, P) on uneven shapes and both B layouts: the
// merged GEMMs cover adjacent chunks of different sizes, some ranks' rings wrap mid-way.
TEST(MergedRing, MatchesReference) {
  const int P = world();
  uint64_t seed = 300;
  for (int merge : {2, 3, P})
    for (BLayout lay : {BLayout::kn, BLayout::nk})
      for (Post post : {Post::comm_first, Post::gemm_first}) {
        const Problem p{
            .op = Op::ag_gemm, .m = 5 * P + P / 2 + 1, .n = 2 * P + 1, .k = 3 * P + 2, .world = P, .b_layout = lay};
        PlanOptions o;
        o.algo = Algo::ring;
        o.merge = std::max(1, merge);
        o.post = post;
        o.gemm_lanes = merge == 3 ? 2 : 1;
        expect_correct(p, o, Dtype::f64, seed++);
      }
}

// --pieces S = 1..4: the ring's and bidir's exposed edge in pieces (both ops), equal or of halving
// size (where the edge chunk has the 2^(S-1) rows: ring up to 4, bidir's half chunks up to 3),
// uneven M (the pieces of the chunks differ in size), both B layouts and posting orders, one or two
// GEMM lanes; for sequential and pipelined the option is refused before any plan exists.
TEST_P(EveryCase, MatchesReferenceWithTheEdgeInPieces) {
  const auto [op, algo] = GetParam();
  const int P = world();
  uint64_t seed = 400;
  for (int pieces : {1, 2, 3, 4})
    for (PieceSizes sizes : {PieceSizes::equal, PieceSizes::halving})
      for (BLayout lay : {BLayout::kn, BLayout::nk})
        for (Post post : {Post::comm_first, Post::gemm_first}) {
          const Problem p{
              .op = op, .m = 8 * P + P / 2 + 1, .n = 2 * P + 1, .k = 3 * P + 2, .world = P, .b_layout = lay};
          PlanOptions o;
          o.algo = algo;
          o.pieces = pieces;
          o.piece_sizes = sizes;
          o.post = post;
          o.gemm_lanes = pieces == 3 ? 2 : 1;
          const bool cuts = algo == Algo::ring || algo == Algo::bidir;
          if ((pieces > 1 || sizes == PieceSizes::halving) && !cuts) {
            EXPECT_THROW(make_plan(p, o, rank()), UsageError);
            continue;
          }
          if (sizes == PieceSizes::halving && (pieces == 1 || rows_for_pieces(pieces, sizes) > edge_rows(p, o)))
            continue;
          expect_correct(p, o, pieces == 2 ? Dtype::bf16 : Dtype::f64, seed++);
        }
}

// Running the same prepared plan again (inputs kept, outputs poisoned again) is still right: the
// lane threads start a new iteration cleanly.
TEST_P(EveryCase, RepeatedRunsOfOnePlanStayCorrect) {
  const auto [op, algo] = GetParam();
  const int P = world();
  const Problem p{.op = op, .m = 3 * P + 2, .n = 2 * P + 1, .k = 2 * P + 3, .world = P, .b_layout = BLayout::kn};
  PlanOptions o;
  o.algo = algo;
  const uint64_t seed = 7;
  const Checked first = run_and_check(p, o, Dtype::f64, seed);
  EXPECT_EQ(first.c.wrong, 0);
  Executor& ex = executor();
  for (int it = 0; it < 3; ++it) {
    ex.poison();
    ex.run(StepFilter::all, false);
  }
  const Plan plan = make_plan(p, o, rank());
  const BufferSpec& cs = plan.buffers[kBufC];
  std::vector<double> c(static_cast<size_t>(cs.rows * cs.cols));
  ex.read(0, kBufC, c.data(), c.size() * sizeof(double));
  EXPECT_EQ(compare(c, reference_c(p, rank(), seed, Dtype::f64), Dtype::f64, Dtype::f64, p.k).wrong, 0)
      << case_name(p, o, Dtype::f64) << " after 4 runs";
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Op, Algo>>& info) {
  return to_string(std::get<0>(info.param)) + "_" + to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Cpu, EveryCase,
                         ::testing::Combine(::testing::ValuesIn(all_ops()),
                                            ::testing::Values(Algo::sequential, Algo::pipelined, Algo::ring,
                                                              Algo::bidir)),
                         param_name);

// Pipelined with every stage count from 1 to the most the smallest block allows (M / P).
TEST(Pipelined, EveryStageCount) {
  const int P = world();
  for (Op op : all_ops())
    for (BLayout lay : {BLayout::kn, BLayout::nk}) {
      const Problem p{.op = op, .m = 4 * P + 3, .n = 2 * P + 1, .k = 2 * P + 2, .world = P, .b_layout = lay};
      for (int stages = 1; stages <= p.m / P; ++stages)
        for (Post post : {Post::comm_first, Post::gemm_first})
          for (Dtype dtype : {Dtype::f32, Dtype::bf16}) {
            PlanOptions o;
            o.algo = Algo::pipelined;
            o.stages = stages;
            o.post = post;
            expect_correct(p, o, dtype, 200 + stages);
          }
    }
}

// gemm_ar's ring in every wave count M allows (each wave's all-gather beside the next wave's ring),
// with one and two GEMM lanes and its edge in pieces.
TEST(GemmArRing, EveryWaveCount) {
  const int P = world();
  for (BLayout lay : {BLayout::kn, BLayout::nk}) {
    const Problem p{.op = Op::gemm_ar, .m = 4 * P + 3, .n = 2 * P + 1, .k = 2 * P + 2, .world = P, .b_layout = lay};
    for (int waves = 1; waves <= p.m / P; ++waves)
      for (Post post : {Post::comm_first, Post::gemm_first})
        for (int lanes : {1, 2}) {
          const PlanOptions o{.algo = Algo::ring, .waves = waves, .post = post, .gemm_lanes = lanes};
          expect_correct(p, o, lanes == 1 ? Dtype::f32 : Dtype::bf16, 300 + waves);
        }
    const PlanOptions cut{.algo = Algo::ring, .waves = 2, .pieces = 2};
    expect_correct(p, cut, Dtype::f64, 310);
  }
}

}  // namespace
}  // namespace collmm::cpu_test
