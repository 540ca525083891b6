// test_golden.cpp: the ring keeps the chunk order and posting order of the ATen ring it follows, the
// gemm_rs rings keep their memory bound, and impossible options are usage errors before any plan
// exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "collmm/sizes.hpp"
#include "plan_check.hpp"

namespace collmm {
namespace {

// The kinds and chunks of a plan's sendrecv and GEMM steps, in list order: "c1 g1 c0 g0 ...".
std::string order_of(const Plan& plan) {
  std::string s;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::gemm) s += "g" + std::to_string(step.chunk) + " ";
    if (step.kind == StepKind::sendrecv) s += "c" + std::to_string(step.chunk) + " ";
  }
  return s;
}

TEST(Golden, AgGemmRingRank1OfFourFollowsTheSeed) {
  const Problem p{.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  const Plan comm_first = make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1}, 1);
  // Step j computes chunk (1 - j) mod 4 and forwards that same chunk to rank 2.
  EXPECT_EQ(order_of(comm_first), "c1 g1 c0 g0 c3 g3 g2 ");
  const Plan gemm_first = make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::gemm_first, .gemm_lanes = 1}, 1);
  EXPECT_EQ(order_of(gemm_first), "g1 c1 g0 c0 g3 c3 g2 ");

  for (const Step& s : comm_first.steps) {
    if (s.kind != StepKind::sendrecv) continue;
    ASSERT_EQ(s.sends.size(), 1u);
    ASSERT_EQ(s.recvs.size(), 1u);
    EXPECT_EQ(s.sends[0].peer, 2);
    EXPECT_EQ(s.recvs[0].peer, 0);
    EXPECT_EQ(s.lane, 0);
    // Receives chunk (1 - j - 1) mod 4: rows block of that chunk in the gathered A.
    const int want = ((1 - s.index - 1) % 4 + 4) % 4;
    EXPECT_EQ(s.recvs[0].slice.row, 4 * want) << describe(s);
  }
  int j = 0;
  for (const Step& s : comm_first.steps)
    if (s.kind == StepKind::gemm) {
      EXPECT_EQ(s.out.row, 4 * s.chunk) << describe(s);
      EXPECT_EQ(s.index, j++);
      EXPECT_NE(s.lane, 0);
    }
}

// --merge G: the same transfers, and one GEMM per G received chunks of adjacent rows, never across
// the wrap from chunk 0 to chunk P-1; each waits for the transfer that brought its last chunk.
TEST(Golden, AgGemmRingMergesAdjacentChunks) {
  const Problem p{.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  // Rank 3 receives 2, 1, 0 (adjacent): one GEMM over rows 0..11 after its own chunk.
  const Plan r3 =
      make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 3}, 3);
  EXPECT_EQ(order_of(r3), "c3 g3 c2 c1 g0 ");
  const Plan r3m2 =
      make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 2}, 3);
  EXPECT_EQ(order_of(r3m2), "c3 g3 c2 c1 g1 g0 ");
  // Rank 1 receives 0, then 3 (not adjacent to 0), then 2: merge 3 still makes three GEMMs.
  const Plan r1 =
      make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 3}, 1);
  EXPECT_EQ(order_of(r1), "c1 g1 c0 g0 c3 g2 ");
  std::vector<Slice> outs;
  for (const Step& s : r1.steps)
    if (s.kind == StepKind::gemm) outs.push_back(s.out);
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].row, 4);  // own chunk 1
  EXPECT_EQ(outs[1].row, 0);  // chunk 0
  EXPECT_EQ(outs[1].rows, 4);
  EXPECT_EQ(outs[2].row, 8);  // chunks 2 and 3 together
  EXPECT_EQ(outs[2].rows, 8);
  // The comm is the plain ring's.
  const Plan plain = make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1}, 1);
  int comm_plain = 0, comm_merged = 0;
  for (const Step& s : plain.steps) comm_plain += s.kind == StepKind::sendrecv;
  for (const Step& s : r1.steps) comm_merged += s.kind == StepKind::sendrecv;
  EXPECT_EQ(comm_plain, comm_merged);
  EXPECT_TRUE(
      check_problem(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 3}).ok());
}

// --pieces S: ag_gemm's last transfer (step P-2) and the last chunk's GEMM in S pieces, each GEMM
// piece waiting for its own transfer piece only; the other steps as without pieces. Posted
// comm-first: the first piece, that step's GEMM (g3), then the other pieces.
TEST(Golden, AgGemmRingCutsItsLastChunkInPieces) {
  const Problem p{.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  const Plan plan = make_plan(p, {.algo = Algo::ring, .pieces = 2}, 1);
  EXPECT_EQ(order_of(plan), "c1 g1 c0 g0 c3 g3 c3 g2 g2 ");
  // At P = 2 the edge is the first step: the own chunk's GEMM right after the first piece;
  // gemm-first keeps the GEMM before every piece.
  const Problem p2{.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 2, .b_layout = BLayout::kn};
  EXPECT_EQ(order_of(make_plan(p2, {.algo = Algo::ring, .pieces = 3}, 1)), "c1 g1 c1 c1 g0 g0 g0 ");
  EXPECT_EQ(order_of(make_plan(p2, {.algo = Algo::ring, .post = Post::gemm_first, .pieces = 3}, 1)),
            "g1 c1 c1 c1 g0 g0 g0 ");
  std::vector<int> comms;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (s.kind == StepKind::sendrecv && s.index == 2) {
      comms.push_back(static_cast<int>(i));
      EXPECT_EQ(s.recvs.at(0).slice.rows, 2) << describe(s);  // half of chunk 2's 4 rows
      EXPECT_EQ(s.recvs.at(0).slice.row, 8 + 2 * (comms.size() - 1)) << describe(s);
    }
    if (s.kind == StepKind::gemm && s.chunk == 2) {
      EXPECT_EQ(s.out.rows, 2) << describe(s);
      EXPECT_EQ(s.waits, std::vector<int>{comms.at(static_cast<size_t>(s.out.row - 8) / 2)}) << describe(s);
    }
  }
  EXPECT_EQ(comms.size(), 2u);
  // Bidir: the halves of the last step's chunks in pieces too.
  const Plan bidir = make_plan(p, {.algo = Algo::bidir, .pieces = 2}, 1);
  int last_comms = 0, last_gemms = 0;
  for (const Step& s : bidir.steps) {
    last_comms += s.kind == StepKind::sendrecv && s.index == 2;
    last_gemms += s.kind == StepKind::gemm && s.index == 3;
  }
  EXPECT_EQ(last_comms, 2);
  EXPECT_EQ(last_gemms, 4);  // two pieces of two halves
}

// Where rank r's plan puts its own chunk's copy: next on its own GEMM's lane after that GEMM, listed
// before any later step's work, waiting for nothing, A's rows into the gathered A's rows of chunk r.
void expect_own_copy_after_its_gemm(const Plan& plan, const std::string& what) {
  const Problem& p = plan.problem;
  const int r = plan.rank;
  int copy = -1, own = -1;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (s.kind == StepKind::copy) {
      EXPECT_EQ(copy, -1) << what;
      copy = static_cast<int>(i);
    }
    if (s.kind == StepKind::gemm && s.index == 0) own = static_cast<int>(i);
    if (s.index >= 1) {
      EXPECT_NE(copy, -1) << what << ": " << describe(s) << " listed before the copy";
    }
  }
  ASSERT_GE(copy, 0) << what;
  ASSERT_GE(own, 0) << what;
  const Step& c = plan.steps[static_cast<size_t>(copy)];
  EXPECT_GT(copy, own) << what;
  EXPECT_EQ(c.lane, plan.steps[static_cast<size_t>(own)].lane) << what;
  EXPECT_NE(c.lane, 0) << what;
  for (int i = own + 1; i < copy; ++i) EXPECT_NE(plan.steps[static_cast<size_t>(i)].lane, c.lane) << what;
  EXPECT_TRUE(c.waits.empty()) << what;  // A is here and the rows it writes are its own
  EXPECT_EQ(c.a.buf, kBufA) << what;
  EXPECT_EQ(c.a.row, 0) << what;
  EXPECT_EQ(plan.buffers.at(static_cast<size_t>(c.out.buf)).role, Role::gathered) << what;
  EXPECT_EQ(c.out.row, block_offset(p.m, p.world, r)) << what;
  EXPECT_EQ(c.out.rows, block_size(p.m, p.world, r)) << what;
  EXPECT_TRUE(only_fills_output(plan, copy)) << what;
}

// The ag_gemm rings copy their own chunk into the gathered A on the own chunk's GEMM lane: it fills
// the lane's wait for the first received chunk instead of running beside the last GEMM. Every rank,
// P = 1, 2, 4, pieces 1 and 3, one and two GEMM lanes, both posting orders, the ring's merge 2.
TEST(Golden, AgGemmRingsCopyTheOwnChunkAfterItsGemm) {
  for (Algo algo : {Algo::ring, Algo::bidir})
    for (int P : {1, 2, 4})
      for (int pieces : {1, 3})
        for (int lanes : {1, 2})
          for (Post post : {Post::comm_first, Post::gemm_first})
            for (int merge : {1, 2}) {
              if (merge > 1 && algo != Algo::ring) continue;
              const Problem p{.op = Op::ag_gemm, .m = 24, .n = 8, .k = 8, .world = P, .b_layout = BLayout::kn};
              const PlanOptions o{
                  .algo = algo, .post = post, .gemm_lanes = lanes, .merge = merge, .pieces = P > 1 ? pieces : 1};
              for (int r = 0; r < P; ++r)
                expect_own_copy_after_its_gemm(
                    make_plan(p, o, r),
                    to_string(algo) + " P=" + std::to_string(P) + " rank " + std::to_string(r) + " " + to_string(o));
            }
}

// gemm_rs: step 0's partial computed and sent in S pieces, piece i's send posted right after piece
// i's GEMM (comm-first) and waiting for it only; the steps after it as without pieces. gemm-first
// posts every piece's GEMM, then the next step's, then the sends.
TEST(Golden, GemmRsRingCutsItsFirstPartialInPieces) {
  const Problem p{.op = Op::gemm_rs, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  const Plan plain = make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1}, 1);
  EXPECT_EQ(order_of(plain), "g0 c0 g3 c3 g2 c2 g1 ");
  const Plan plan = make_plan(p, {.algo = Algo::ring, .pieces = 4}, 1);
  EXPECT_EQ(order_of(plan), "g0 c0 g0 c0 g0 c0 g0 c0 g3 c3 g2 c2 g1 ");
  for (int i = 0; i < 4; ++i) {
    const Step& gemm = plan.steps[static_cast<size_t>(2 * i)];
    const Step& comm = plan.steps[static_cast<size_t>(2 * i + 1)];
    EXPECT_EQ(gemm.out.rows, 1);
    EXPECT_EQ(comm.sends.at(0).slice.row, i) << describe(comm);
    EXPECT_EQ(comm.sends.at(0).slice.rows, 1) << describe(comm);
    EXPECT_EQ(comm.waits, std::vector<int>{2 * i}) << describe(comm);
  }
  const Plan gemm_first = make_plan(p, {.algo = Algo::ring, .post = Post::gemm_first, .pieces = 4}, 1);
  EXPECT_EQ(order_of(gemm_first), "g0 g0 g0 g0 g3 c0 c0 c0 c0 g2 c3 g1 c2 ");
}

// gemm_rs at P = 2 in pieces: the last step's received sum came in step 0's pieces; on the GEMM
// lane after the GEMM into C, every piece but the last is added in one add (waiting for their
// receives), then the last piece (waiting for its own).
TEST(Golden, GemmRsAtTwoRanksAddsTheLastPieceOnItsOwn) {
  const Problem p{.op = Op::gemm_rs, .m = 32, .n = 8, .k = 8, .world = 2, .b_layout = BLayout::kn};
  for (Algo algo : {Algo::ring, Algo::bidir}) {
    const Plan plan = make_plan(p, {.algo = algo, .pieces = 4, .piece_sizes = PieceSizes::halving}, 0);
    std::vector<int> comms;
    int gemm_into_c = -1;
    std::vector<std::pair<int64_t, int64_t>> added;
    std::vector<std::vector<int>> waits;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const Step& s = plan.steps[i];
      if (s.kind == StepKind::sendrecv) comms.push_back(static_cast<int>(i));
      if (s.kind == StepKind::gemm && s.out.buf == kBufC) gemm_into_c = static_cast<int>(i);
      if (s.kind != StepKind::add) continue;
      ASSERT_GE(gemm_into_c, 0) << describe(s);
      EXPECT_EQ(s.lane, plan.steps[static_cast<size_t>(gemm_into_c)].lane) << describe(s);
      added.emplace_back(s.out.row, s.out.rows);
      waits.push_back(s.waits);
    }
    ASSERT_EQ(comms.size(), 4u);
    const std::vector<int> early(comms.begin(), comms.begin() + 3), last{comms[3]};
    if (algo == Algo::ring) {  // C's 16 rows came as 2, 2, 4, 8
      EXPECT_EQ(added, (std::vector<std::pair<int64_t, int64_t>>{{0, 8}, {8, 8}}));
      EXPECT_EQ(waits, (std::vector<std::vector<int>>{early, last}));
    } else {  // each half (8 rows) as 1, 1, 2, 4
      EXPECT_EQ(added, (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {8, 4}, {4, 4}, {12, 4}}));
      EXPECT_EQ(waits, (std::vector<std::vector<int>>{early, early, last, last}));
    }
  }
}

// --piece-sizes halving: the pieces tile the rows (no gap, no overlap), each has a row where the
// rows are at least rows_for_pieces; largest first they are R - R/2, R/2 - R/4, ... and R >> (S-1)
// last (8192 rows in 6: 4096 2048 1024 512 256 256), smallest first the same reversed; equal
// pieces are block_size's.
TEST(Golden, PiecesOfHalvingSizeTileTheRows) {
  auto sizes = [](int64_t rows, EdgeCut cut) {
    std::vector<int64_t> v;
    for (int i = 0; i < cut.pieces; ++i) v.push_back(piece_of({kBufA, 5, rows}, cut, i).rows);
    return v;
  };
  const EdgeCut first{6, PieceSizes::halving, PieceOrder::largest_first};
  const EdgeCut last{6, PieceSizes::halving, PieceOrder::smallest_first};
  EXPECT_EQ(sizes(8192, first), (std::vector<int64_t>{4096, 2048, 1024, 512, 256, 256}));
  EXPECT_EQ(sizes(8192, last), (std::vector<int64_t>{256, 256, 512, 1024, 2048, 4096}));
  EXPECT_EQ(sizes(45, {4, PieceSizes::halving, PieceOrder::largest_first}), (std::vector<int64_t>{23, 11, 6, 5}));
  for (int S = 1; S <= kMaxHalvingPieces; ++S)
    for (int64_t rows = 1; rows <= 300; ++rows)
      for (PieceSizes kind : {PieceSizes::equal, PieceSizes::halving})
        for (PieceOrder order : {PieceOrder::largest_first, PieceOrder::smallest_first}) {
          const EdgeCut cut{S, kind, order};
          int64_t next = 5;
          for (int i = 0; i < S; ++i) {
            const Slice s = piece_of({kBufA, 5, rows}, cut, i);
            EXPECT_EQ(s.row, next) << rows << " rows, piece " << i << " of " << S;
            next = s.row + s.rows;
            if (rows >= rows_for_pieces(S, kind)) {
              EXPECT_GE(s.rows, 1) << rows << " rows, piece " << i << " of " << S;
            }
            if (kind == PieceSizes::equal) {
              EXPECT_EQ(s.rows, block_size(rows, S, i));
            }
          }
          EXPECT_EQ(next, 5 + rows) << rows << " rows in " << S;
          if (kind == PieceSizes::halving && rows >= rows_for_pieces(S, kind)) {
            std::vector<int64_t> a = sizes(rows, {S, kind, PieceOrder::largest_first});
            std::vector<int64_t> b = sizes(rows, {S, kind, PieceOrder::smallest_first});
            std::reverse(b.begin(), b.end());
            EXPECT_EQ(a, b);
            EXPECT_TRUE(std::is_sorted(a.rbegin(), a.rend())) << rows << " rows in " << S;
          }
        }
}

// Halving pieces in the plans: ag_gemm's last transfer moves the largest piece first, each GEMM
// piece waiting for its own transfer; gemm_rs computes and sends the smallest first.
TEST(Golden, PiecesOfHalvingSizeInTheRings) {
  const Problem ag{.op = Op::ag_gemm, .m = 32, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  const Plan plan = make_plan(ag, {.algo = Algo::ring, .pieces = 3, .piece_sizes = PieceSizes::halving}, 1);
  EXPECT_EQ(order_of(plan), "c1 g1 c0 g0 c3 g3 c3 c3 g2 g2 g2 ");
  std::vector<int> comms;
  std::vector<std::pair<int64_t, int64_t>> moved, computed;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (s.kind == StepKind::sendrecv && s.index == 2) {
      comms.push_back(static_cast<int>(i));
      moved.emplace_back(s.recvs.at(0).slice.row, s.recvs.at(0).slice.rows);
    }
    if (s.kind == StepKind::gemm && s.chunk == 2) {
      computed.emplace_back(s.out.row, s.out.rows);
      EXPECT_EQ(s.waits, std::vector<int>{comms.at(computed.size() - 1)}) << describe(s);
    }
  }
  const std::vector<std::pair<int64_t, int64_t>> halving{{16, 4}, {20, 2}, {22, 2}};  // chunk 2: rows 16..23
  EXPECT_EQ(moved, halving);
  EXPECT_EQ(computed, halving);

  const Problem rs{.op = Op::gemm_rs, .m = 32, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  const Plan first = make_plan(rs, {.algo = Algo::ring, .pieces = 3, .piece_sizes = PieceSizes::halving}, 1);
  EXPECT_EQ(order_of(first), "g0 c0 g0 c0 g0 c0 g3 c3 g2 c2 g1 ");
  const std::vector<std::pair<int64_t, int64_t>> smallest_first{{0, 2}, {2, 2}, {4, 4}};
  for (int i = 0; i < 3; ++i) {
    const Step& gemm = first.steps[static_cast<size_t>(2 * i)];
    const Step& comm = first.steps[static_cast<size_t>(2 * i + 1)];
    EXPECT_EQ(std::pair(gemm.out.row, gemm.out.rows), smallest_first[static_cast<size_t>(i)]) << describe(gemm);
    EXPECT_EQ(std::pair(comm.sends.at(0).slice.row, comm.sends.at(0).slice.rows),
              smallest_first[static_cast<size_t>(i)])
        << describe(comm);
    EXPECT_EQ(comm.waits, std::vector<int>{2 * i}) << describe(comm);
  }
}

// Rows of work buffers a plan allocates.
int64_t work_rows(const Plan& plan) {
  int64_t rows = 0;
  for (const BufferSpec& b : plan.buffers)
    if (b.role == Role::work) rows += b.rows;
  return rows;
}

// gemm_rs ring and bidir: two chunk buffers (ring: two receive buffers; bidir: two per direction
// of half a chunk each), with the partials computed into C itself, also when P does not divide M
// (the rows C cannot hold are accumulated onto the received sum): bidir wants C no taller than 2 *
// ceil(most / 2) rows, and uneven M gets no third buffer.
TEST(Memory, GemmRsRingsNeedTwoChunkBuffers) {
  for (int P = 2; P <= 8; ++P)
    for (int64_t m : {3 * P, 4 * P, 4 * P + 1, 4 * P + P - 1, P + 1})
      for (Algo algo : {Algo::ring, Algo::bidir})
        for (int r = 0; r < P; ++r) {
          const Problem p{.op = Op::gemm_rs, .m = m, .n = 8, .k = 2 * P, .world = P, .b_layout = BLayout::kn};
          const Plan plan = make_plan(p, {.algo = algo, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1}, r);
          const int64_t most = block_size(m, P, 0), half = (most + 1) / 2;
          const int64_t limit = algo == Algo::ring ? 2 * most : 4 * half;
          EXPECT_LE(work_rows(plan), limit) << describe(plan);
        }
}

TEST(UsageErrors, ImpossibleOptionsAreRefused) {
  const Problem p{.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn};
  EXPECT_THROW(make_plan(p, {.algo = Algo::pipelined, .stages = -1, .post = Post::comm_first, .gemm_lanes = 1}, 0),
               UsageError);
  EXPECT_THROW(check_problem(p, {.algo = Algo::pipelined, .stages = -1, .post = Post::comm_first, .gemm_lanes = 1}),
               UsageError);
  // 16 rows over 4 ranks: at most 4 stages.
  EXPECT_NO_THROW(make_plan(p, {.algo = Algo::pipelined, .stages = 4, .post = Post::comm_first, .gemm_lanes = 1}, 0));
  EXPECT_THROW(make_plan(p, {.algo = Algo::pipelined, .stages = 5, .post = Post::comm_first, .gemm_lanes = 1}, 0),
               UsageError);
  EXPECT_THROW(make_plan({.op = Op::gemm_rs, .m = 17, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn},
                         {.algo = Algo::pipelined, .stages = 5, .post = Post::comm_first, .gemm_lanes = 1}, 0),
               UsageError);
  EXPECT_THROW(make_plan({.op = Op::ag_gemm, .m = 3, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, {}, 0),
               UsageError);  // M < P
  EXPECT_THROW(make_plan({.op = Op::gemm_rs, .m = 3, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn}, {}, 0),
               UsageError);
  EXPECT_THROW(make_plan({.op = Op::ag_gemm, .m = 8, .n = 3, .k = 8, .world = 4, .b_layout = BLayout::kn}, {}, 0),
               UsageError);  // N < P
  EXPECT_THROW(make_plan({.op = Op::gemm_rs, .m = 8, .n = 8, .k = 3, .world = 4, .b_layout = BLayout::kn}, {}, 0),
               UsageError);  // K < P
  EXPECT_THROW(make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 0}, 0),
               UsageError);                       // no GEMM lane
  EXPECT_THROW(make_plan(p, {}, 4), UsageError);  // no such rank
  EXPECT_THROW(
      make_plan(p, {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 0}, 0),
      UsageError);  // merge 0
  EXPECT_THROW(
      make_plan(p, {.algo = Algo::bidir, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 2}, 0),
      UsageError);  // merge: ring only
  EXPECT_THROW(make_plan({.op = Op::gemm_rs, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn},
                         {.algo = Algo::ring, .stages = 0, .post = Post::comm_first, .gemm_lanes = 1, .merge = 2}, 0),
               UsageError);
  // pieces: 1..kMaxPieces, ring and bidir only, at most the rows of the edge chunk (bidir: its half).
  EXPECT_THROW(make_plan(p, {.algo = Algo::ring, .pieces = 0}, 0), UsageError);
  EXPECT_THROW(make_plan(p, {.algo = Algo::ring, .pieces = kMaxPieces + 1}, 0), UsageError);
  EXPECT_THROW(make_plan(p, {.algo = Algo::pipelined, .pieces = 2}, 0), UsageError);
  EXPECT_THROW(make_plan(p, {.algo = Algo::sequential, .pieces = 2}, 0), UsageError);
  EXPECT_NO_THROW(make_plan(p, {.algo = Algo::ring, .pieces = 4}, 0));
  EXPECT_THROW(make_plan(p, {.algo = Algo::ring, .pieces = 5}, 0), UsageError);
  EXPECT_NO_THROW(make_plan(p, {.algo = Algo::bidir, .pieces = 2}, 0));
  EXPECT_THROW(make_plan(p, {.algo = Algo::bidir, .pieces = 3}, 0), UsageError);
  EXPECT_EQ(options_for(Op::ag_gemm, Algo::pipelined, {.algo = Algo::ring, .pieces = 4}).pieces, 1);
  EXPECT_EQ(options_for(Op::gemm_rs, Algo::bidir, {.algo = Algo::ring, .pieces = 4}).pieces, 4);
  // halving: ring and bidir only, at most kMaxHalvingPieces, 2^(S-1) rows in the edge chunk (4 here:
  // 3 pieces); one piece is the whole chunk whatever its sizes.
  const PieceSizes halving = PieceSizes::halving;
  EXPECT_NO_THROW(make_plan(p, {.algo = Algo::ring, .pieces = 3, .piece_sizes = halving}, 0));
  EXPECT_THROW(make_plan(p, {.algo = Algo::pipelined, .piece_sizes = halving}, 0), UsageError);
  EXPECT_THROW(make_plan({.op = Op::ag_gemm, .m = 4096, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn},
                         {.algo = Algo::ring, .pieces = kMaxHalvingPieces + 1, .piece_sizes = halving}, 0),
               UsageError);
  EXPECT_EQ(
      options_for(Op::ag_gemm, Algo::sequential, {.algo = Algo::ring, .pieces = 4, .piece_sizes = halving}).piece_sizes,
      PieceSizes::equal);
  EXPECT_EQ(options_for(Op::ag_gemm, Algo::ring, {.algo = Algo::ring, .pieces = 1, .piece_sizes = halving}).piece_sizes,
            PieceSizes::equal);
  EXPECT_EQ(
      options_for(Op::ag_gemm, Algo::bidir, {.algo = Algo::ring, .pieces = 2, .piece_sizes = halving}).piece_sizes,
      halving);
  for (Algo algo : {Algo::ring, Algo::bidir}) try {
      make_plan(p, {.algo = algo, .pieces = algo == Algo::ring ? 4 : 3, .piece_sizes = halving}, 0);
      ADD_FAILURE() << to_string(algo) << ": halving pieces of too few rows were accepted";
    } catch (const UsageError& e) {
      const std::string want =
          algo == Algo::ring ? "halving needs 8, so at most 3 pieces" : "halving needs 4, so at most 2 pieces";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  try {
    make_plan({.op = Op::gemm_rs, .m = 17, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn},
              {.algo = Algo::bidir, .pieces = 3}, 0);
    ADD_FAILURE() << "3 pieces of a 2-row half were accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 2 pieces"), std::string::npos) << e.what();
  }
  try {
    make_plan({.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4, .b_layout = BLayout::kn},
              {.algo = Algo::pipelined, .stages = 9, .post = Post::comm_first, .gemm_lanes = 1}, 0);
    ADD_FAILURE() << "9 stages of 4 rows were accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("stages"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace collmm
