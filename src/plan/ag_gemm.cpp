// ag_gemm.cpp: the schedules of AllGather + GEMM, one function per algorithm.
//
// Rank r of P holds A_r (rows block r of A [M, K]) and B_r; it computes C_r = AllGather(A) @ B_r,
// [M, N_r], and keeps the gathered A in a buffer of its own ([M, K], role `gathered`). A "chunk" is
// one rank's row block of A; chunk q lands in rows block q of the gathered A and of C.
//
// The ring (one lane for comm, GEMMs on the others):
//
//   step j:  cur = (r - j) mod P                 chunk this rank holds
//            comm: send cur -> r+1, recv (r-j-1) mod P <- r-1        (if j < P-1)
//            gemm: C[cur] = A[cur] @ B_r                             (waits for the recv of cur)
//
//   rank 0  | g0 |o| g3 | g2 | g1 |      g = GEMM of that chunk, s = its transfer,
//   comm    | s0   | s3 | s2 |            o = own chunk copied into the gathered A
//
// --merge G: the GEMMs of chunks received at G consecutive steps become one GEMM over their
// adjacent rows (posted at the step of the last of them); fewer, larger GEMMs, the same comm.
//
// --pieces S (ring and bidir): the ring's one exposed GEMM is the last chunk's, which can only start
// once the last transfer (step P-2) has ended. That transfer is cut into S sendrecv steps of
// 1/S of the chunk's rows each, and the last chunk's GEMM into S GEMMs, piece i waiting for
// transfer piece i only. Piece i's GEMM runs beside the transfer of piece i+1, and 1/S of a chunk's
// GEMM is left alone at the end instead of all of it. --piece-sizes halving: the pieces are 1/2,
// 1/4, ... of the chunk, the largest first, so 1/2^(S-1) is left alone after S transfers. Only
// that edge is cut: the other steps' GEMMs already run beside a transfer, and every extra transfer
// pays its fixed cost.
//
//   comm  | s0 | s3 | s2a | s2b |          rank 0 of 4, S = 2: step 2's transfer in two pieces;
//   gemm  | g0 | g3 | g2  | g1a | g1b |    g1a waits for the first piece only
//
// With --merge, the group before the last chunk closes at step P-2; the last chunk is not merged.
#include <algorithm>
#include <optional>

#include "collmm/plan.hpp"
#include "op_rows.hpp"

namespace collmm {
namespace {

// Rows block q of buffer `buf` (the whole of chunk q).
Slice chunk_rows(const Problem& p, int buf, int q) {
  return {buf, block_offset(p.m, p.world, q), block_size(p.m, p.world, q)};
}

// Half h (0: first ceil(rows/2) rows, 1: the rest) of chunk q.
Slice half_rows(const Problem& p, int buf, int q, int h) {
  Slice c = chunk_rows(p, buf, q);
  const int64_t first = (c.rows + 1) / 2;
  return h == 0 ? Slice{buf, c.row, first} : Slice{buf, c.row + first, c.rows - first};
}

// Where chunk q is read from on this rank: its own chunk straight from A, others from the gathered A.
Slice source_rows(const Problem& p, int gathered, int rank, int q) {
  if (q == rank) return {kBufA, 0, block_size(p.m, p.world, rank)};
  return chunk_rows(p, gathered, q);
}

// Posts one ring step: its transfers (one, or the edge's pieces) and its GEMMs, in the order --post
// asks. gemm-first: the GEMMs, then the transfers. comm-first: the first transfer, the GEMMs, then
// the other pieces. So the link has work at once, and the GEMMs do not wait on the host while it
// posts pieces that queue behind the first anyway. On the host bed, S pieces held the first GEMM
// of a P = 2 ring back by 40-55 us. Returns the transfers' step indices, in piece order.
std::vector<int> post_ring_step(Plan& plan, Post post, const std::vector<Step>& comms, const std::vector<Step>& mms) {
  std::vector<int> posted;
  if (post == Post::comm_first && !comms.empty()) posted.push_back(plan.push(comms.front()));
  for (const Step& m : mms) plan.push(m);
  for (size_t i = posted.size(); i < comms.size(); ++i) posted.push_back(plan.push(comms[i]));
  return posted;
}

// Chunks received at consecutive ring steps: r-1, r-2, ...; each new one lies right above the
// rows gathered so far, so together they are one block of rows.
struct Merge {
  Slice rows{-1, 0, 0};
  int count = 0;
  void add(Slice chunk) {
    rows = count == 0 ? chunk : Slice{chunk.buf, chunk.row, rows.rows + chunk.rows};
    ++count;
  }
};

// Own chunk into the gathered A, so the gathered output is complete. The rings post it on the GEMM
// lane right after the own chunk's GEMM: where the link is the slower side that lane waits there
// for the first received chunk, and the copy (an SM kernel) fills the wait. Posted last on lane 0,
// it ran beside the last GEMM, the one nothing hides, and made it longer by about its own time.
// On the host bed, ag P = 2 M 32768: a 128 us copy, the last GEMM 109 us longer
// (docs/perf/log-2026-12.md).
void copy_own_chunk(Plan& plan, int gathered, int lane) {
  const Slice own = chunk_rows(plan.problem, gathered, plan.rank);
  plan.push(local_step(StepKind::copy, lane, own, {kBufA, 0, own.rows}, -1, plan.rank));
}

Plan ag_gemm_sequential(const Problem& p, const PlanOptions& o, int r) {
  Plan plan = empty_plan(p, o, r);
  const int g = plan.add_buffer(Role::gathered, p.m, p.k);
  Step ag;
  ag.kind = StepKind::allgather;
  ag.lane = 0;
  ag.a = {kBufA, 0, block_size(p.m, p.world, r)};
  for (int q = 0; q < p.world; ++q) ag.parts.push_back(chunk_rows(p, g, q));
  ag.index = 0;
  const int ag_step = plan.push(ag);
  plan.push(gemm_step(plan.gemm_lane(0), {kBufC, 0, p.m}, {g, 0, p.m}, 0, -1, {ag_step}));
  return plan;
}

// S stages; stage s gathers sub-block s of every rank's chunk, then runs one GEMM per other
// rank's sub-block. This rank's own chunk is here from the start, but its GEMM is cut the same way:
// sub-block s+1 of it runs beside stage s+1's transfer, posted after it. A transfer that becomes
// ready while a GEMM that fills the GPU already runs barely moves until that GEMM ends (measured on
// the host bed, docs/perf/log-2026-12.md). So no GEMM may start ahead of the transfer it hides.
// comm-first posts stage s+1's allgather before stage s's GEMMs.
//
//   comm  | ag 0  | ag 1        | ag 2        | ag 3        |
//   gemm  | own 0 | s0    own 1 | s1    own 2 | s2    own 3 | s3 |
Plan ag_gemm_pipelined(const Problem& p, const PlanOptions& o, int r) {
  Plan plan = empty_plan(p, o, r);
  const int P = p.world;
  const int S = stages_of(p, o);
  const int g = plan.add_buffer(Role::gathered, p.m, p.k);
  const int64_t m_r = block_size(p.m, P, r);

  auto post_allgather = [&](int s) {
    Step ag;
    ag.kind = StepKind::allgather;
    ag.lane = 0;
    ag.a = {kBufA, block_offset(m_r, S, s), block_size(m_r, S, s)};
    for (int q = 0; q < P; ++q) {
      const int64_t m_q = block_size(p.m, P, q);
      ag.parts.push_back({g, block_offset(p.m, P, q) + block_offset(m_q, S, s), block_size(m_q, S, s)});
    }
    ag.index = s;
    return plan.push(ag);
  };
  auto post_gemms = [&](int s, int ag_step) {  // the other ranks' sub-blocks s, once gathered
    for (int q = 0; q < P; ++q) {
      const Slice rows = plan.steps[ag_step].parts[q];
      if (q != r && rows.rows > 0)
        plan.push(gemm_step(plan.gemm_lane(s), {kBufC, rows.row, rows.rows}, rows, s, q, {ag_step}));
    }
  };
  auto post_own = [&](int s, std::vector<int> waits) {  // sub-block s of this rank's chunk, read from A
    const Slice a{kBufA, block_offset(m_r, S, s), block_size(m_r, S, s)};
    if (a.rows > 0)
      plan.push(
          gemm_step(plan.gemm_lane(s), {kBufC, block_offset(p.m, P, r) + a.row, a.rows}, a, s, r, std::move(waits)));
  };

  std::vector<int> ag_steps;
  if (o.post == Post::comm_first) {
    ag_steps.push_back(post_allgather(0));
    post_own(0, {});
    for (int s = 0; s < S; ++s) {
      if (s + 1 < S) ag_steps.push_back(post_allgather(s + 1));
      post_gemms(s, ag_steps[s]);
      if (s + 1 < S) post_own(s + 1, {ag_steps[s]});
    }
  } else {
    for (int s = 0; s < S; ++s) {
      post_own(s, s > 0 ? std::vector<int>{ag_steps[s - 1]} : std::vector<int>{});
      ag_steps.push_back(post_allgather(s));
      post_gemms(s, ag_steps[s]);
    }
  }
  return plan;
}

Plan ag_gemm_ring(const Problem& p, const PlanOptions& o, int r) {
  Plan plan = empty_plan(p, o, r);
  const int P = p.world;
  const int g = plan.add_buffer(Role::gathered, p.m, p.k);
  const int send_to = ring_mod(r + 1, P), recv_from = ring_mod(r - 1, P);
  // pieces of the last transfer (step P-2) and the last GEMM; a piece is moved, then computed
  const EdgeCut edge = edge_cut(o, PieceOrder::largest_first, P > 1);

  std::vector<int> prev_comm;  // the step(s) that received the chunk used now: one per piece
  Merge group;                 // received chunks whose GEMM is not posted yet (merge > 1)
  int gemms = 0;
  for (int j = 0; j < P; ++j) {
    const int cur = ring_mod(r - j, P);
    const Slice src = source_rows(p, g, r, cur);
    const EdgeCut pieces = j == P - 2 ? edge : EdgeCut{};
    std::vector<Step> comms(j < P - 1 ? pieces.pieces : 0);
    for (int i = 0; i < static_cast<int>(comms.size()); ++i) {
      comms[i].kind = StepKind::sendrecv;
      comms[i].index = j;
      comms[i].chunk = cur;
      comms[i].sends.push_back({send_to, piece_of(src, pieces, i)});
      comms[i].recvs.push_back({recv_from, piece_of(chunk_rows(p, g, ring_mod(r - j - 1, P)), pieces, i)});
    }

    // This step's GEMMs: chunk cur alone, or (merge) the group that cur closes, or none yet; the
    // last chunk, when it came in pieces, one GEMM per piece as soon as that piece is here.
    std::vector<Step> mms;
    if (j == P - 1 && edge.pieces > 1) {
      for (int i = 0; i < edge.pieces; ++i)
        mms.push_back(gemm_step(plan.gemm_lane(gemms++), piece_of(chunk_rows(p, kBufC, cur), edge, i),
                                piece_of(src, edge, i), j, cur, {prev_comm[i]}));
    } else if (j == 0 || o.merge == 1) {
      mms.push_back(gemm_step(plan.gemm_lane(gemms++), chunk_rows(p, kBufC, cur), src, j, cur, prev_comm));
    } else {
      group.add(chunk_rows(p, g, cur));
      // chunk P-1 does not lie above chunk 0; a last chunk cut in pieces is not merged
      const bool last = j == P - 1 || cur == 0 || (edge.pieces > 1 && j == P - 2);
      if (group.count == o.merge || last) {
        mms.push_back(gemm_step(plan.gemm_lane(gemms++), {kBufC, group.rows.row, group.rows.rows}, group.rows, j, cur,
                                prev_comm));  // earlier chunks came before on lane 0
        group = Merge{};
      }
    }

    prev_comm = post_ring_step(plan, o.post, comms, mms);
    if (j == 0) copy_own_chunk(plan, g, plan.gemm_lane(0));
  }
  return plan;
}

// Each chunk travels as two halves: half 0 goes r -> r+1 (as in the ring), half 1 goes r -> r-1,
// so each link direction carries half a chunk per step. At step j this rank holds half 0 of chunk
// (r - j) and half 1 of chunk (r + j); at step 0 both halves are its own chunk (one GEMM).
Plan ag_gemm_bidir(const Problem& p, const PlanOptions& o, int r) {
  Plan plan = empty_plan(p, o, r);
  const int P = p.world;
  const int g = plan.add_buffer(Role::gathered, p.m, p.k);
  const int next = ring_mod(r + 1, P), prev = ring_mod(r - 1, P);

  auto src_half = [&](int q, int h) {
    Slice s = half_rows(p, g, q, h);
    if (q == r) s.buf = kBufA, s.row -= block_offset(p.m, P, r);
    return s;
  };

  // pieces of the last transfer (step P-2) and the last GEMMs; a piece is moved, then computed
  const EdgeCut edge = edge_cut(o, PieceOrder::largest_first, P > 1);
  std::vector<int> prev_comm;
  for (int j = 0; j < P; ++j) {
    const int cur0 = ring_mod(r - j, P), cur1 = ring_mod(r + j, P);
    const EdgeCut pieces = j == P - 2 ? edge : EdgeCut{};
    std::vector<Step> comms(j < P - 1 ? pieces.pieces : 0);
    for (int i = 0; i < static_cast<int>(comms.size()); ++i) {
      Step& comm = comms[i];
      comm.kind = StepKind::sendrecv;
      comm.index = j;
      comm.chunk = cur0;
      // Empty halves (a one-row chunk has no second half) are left out on both sides alike.
      auto add = [&](std::vector<Transfer>& list, int peer, Slice s) {
        if (s.rows > 0) list.push_back({peer, piece_of(s, pieces, i)});
      };
      add(comm.sends, next, src_half(cur0, 0));
      add(comm.recvs, prev, half_rows(p, g, ring_mod(r - j - 1, P), 0));
      add(comm.sends, prev, src_half(cur1, 1));
      add(comm.recvs, next, half_rows(p, g, ring_mod(r + j + 1, P), 1));
    }

    // The halves' GEMMs (both halves of the own chunk at once at step 0); at the last step, when
    // the halves came in pieces, piece i of both as soon as piece i is here.
    std::vector<Step> mms;
    const int lane = plan.gemm_lane(j);
    if (j == 0) {
      mms.push_back(gemm_step(lane, chunk_rows(p, kBufC, r), source_rows(p, g, r, r), 0, r));
    } else {
      const EdgeCut n = j == P - 1 ? edge : EdgeCut{};
      for (int i = 0; i < n.pieces; ++i)
        for (int h = 0; h < 2; ++h) {
          const int q = h == 0 ? cur0 : cur1;
          const Slice s = piece_of(src_half(q, h), n, i);
          const Slice out = piece_of({kBufC, half_rows(p, g, q, h).row, src_half(q, h).rows}, n, i);
          if (s.rows > 0)
            mms.push_back(gemm_step(lane, out, s, j, q, n.pieces > 1 ? std::vector<int>{prev_comm[i]} : prev_comm));
        }
    }
    comms.erase(
        std::remove_if(comms.begin(), comms.end(), [](const Step& c) { return c.sends.empty() && c.recvs.empty(); }),
        comms.end());
    prev_comm = post_ring_step(plan, o.post, comms, mms);
    if (j == 0) copy_own_chunk(plan, g, lane);
  }
  return plan;
}

// Rank r holds rows block r of A and columns block r of B; its C is all M rows of its columns.
LocalShape blocks(const Problem& p, int r) {
  const int64_t n_r = block_size(p.n, p.world, r), n0 = block_offset(p.n, p.world, r);
  return {.a_rows = block_size(p.m, p.world, r),
          .a_cols = p.k,
          .b_rows = 0,
          .b_cols = 0,
          .c_rows = p.m,
          .c_cols = n_r,
          .gemm_k = p.k,
          .gemm_n = n_r,
          .a_row0 = block_offset(p.m, p.world, r),
          .a_col0 = 0,
          .b_k0 = 0,
          .b_n0 = n0,
          .c_row0 = 0,
          .c_col0 = n0};
}

void validate(const Problem& p, std::vector<std::string>& problems) {
  need_one_per_rank(p, "M", p.m, "every rank needs at least one row of A", problems);
  need_one_per_rank(p, "N", p.n, "ag_gemm gives every rank at least one column of B", problems);
}

// With played peers a rank receives and sends the rows of A it gathers.
int64_t played_link_bytes(const Problem& p, int64_t in_size, int64_t) { return 2 * p.m * p.k * in_size; }

// C row t of rank r: A row t (held by the rank whose block it is) times B_r, written once.
std::vector<Product> c_row(const Problem& p, int r, int64_t t) {
  const int q = block_owner(p.m, p.world, t);
  return {{q, t, r}};
}

}  // namespace

OpRow ag_gemm_row() {
  return {.op = Op::ag_gemm,
          .name = "ag_gemm",
          .formula = "C_r = AllGather(A) @ B_r",
          .builders = {{Algo::sequential, ag_gemm_sequential},
                       {Algo::pipelined, ag_gemm_pipelined},
                       {Algo::ring, ag_gemm_ring},
                       {Algo::bidir, ag_gemm_bidir}},
          .sums_over_ranks = false,
          .gathers_a = true,
          .takes_merge = true,
          .takes_waves = false,
          .blocks = blocks,
          .validate = validate,
          .played_link_bytes = played_link_bytes,
          .c_row = c_row};
}

}  // namespace collmm
