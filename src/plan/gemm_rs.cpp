// gemm_rs.cpp: the schedules of GEMM + ReduceScatter, one function per algorithm.
//
// Rank r of P holds A_r (columns block r of A, [M, K_r]) and B_r ([K_r, N]); it computes
// C_r = rows block r of (sum over q of A_q @ B_q), [M_r, N]. A "block" b is the output rows of
// rank b; this rank's partial for block b is A_r[rows of b] @ B_r.
//
// The ring accumulates and forwards (one lane for comm and adds, GEMMs on the others):
//
//   step j:  b = (r - j - 1) mod P
//            gemm: G = A_r[rows of b] @ B_r              (overlaps the transfer of step j-1)
//            add:  R += G, R being the sum for b received from r-1 at step j-1   (if j > 0)
//            comm: send R -> r+1, receive the sum for block (r - j - 2) from r-1  (if j < P-1)
//   After P steps b = r and R + G is this rank's block: the last GEMM writes into C and the last
//   add adds the received sum into C. Each rank sends (P-1) blocks, as a reduce-scatter does.
//   Memory: two receive buffers R (rotating); G is C itself. Where C is shorter than the largest
//   block (P does not divide M), the rows of G that C cannot hold are computed straight onto the
//   received sum (GEMM with accumulate), so the extra memory is two chunk buffers in every case.
//
// --pieces S (ring and bidir): the ring's one exposed GEMM is step 0's, which nothing can run
// beside: the first send needs the whole partial. Step 0's GEMM is cut into S GEMMs of 1/S of the
// block's rows and its transfer into S sendrecv steps, piece i going as soon as its GEMM is done,
// so the first send starts after 1/S of that GEMM (--piece-sizes halving: the pieces are
// 1/2^(S-1), ..., 1/4, 1/2 of the block, the smallest first, so the first send starts after
// 1/2^(S-1) of it); comm-first posts each piece's send right after its GEMM. The receiver gets the
// sum in S pieces into the same buffer, and adds it at step 1 as before (its add needs its own
// step-1 partial, which runs beside those transfers); at P = 2 step 1 is the last step, and the
// pieces are added on the GEMM lane after the last GEMM, all but the last in one add, so only the
// last piece's add follows the last receive. Only that edge is cut: the other steps' GEMMs already
// run beside a transfer, and every extra transfer pays its fixed cost. The ring's other edge at
// P > 2, the last add, is an add (memory-bound, a few percent of a GEMM): not worth a transfer's
// fixed cost per piece.
//
//   gemm  | g0a | g0b | g1 | g2 | g3 |            S = 2: the first partial in two pieces;
//   comm        | s0a | s0b | s1 | s2 | add        s0a goes once g0a is done
//
// The ring (append_rs_ring, rs_ring.hpp) also serves gemm_ar (plan/gemm_ar.cpp): one ring per wave,
// over that wave's rows of M; gemm_ar's C holds all M rows, so every row of C named here lies at
// rank r's block of the wave (c_first_row), and the all-gather follows.
#include <algorithm>

#include "op_rows.hpp"
#include "rs_ring.hpp"

namespace collmm {
namespace {

int64_t rows_of(const Problem& p, int q) { return block_size(p.m, p.world, q); }
int64_t off_of(const Problem& p, int q) { return block_offset(p.m, p.world, q); }

Step gemm(int lane, Slice out, Slice a, int index, int chunk, std::vector<int> waits) {
  return local_step(StepKind::gemm, lane, out, a, index, chunk, std::move(waits));
}

// Adds run on the comm lane, right before the send of the sum they make (the last step's pieces at
// P = 2: on the GEMM lane, see the ring's builder).
Step add(Slice out, Slice a, int index, int chunk, std::vector<int> waits) {
  return local_step(StepKind::add, 0, out, a, index, chunk, std::move(waits));
}

// One direction of the accumulate-and-forward ring over a sub-range of every block (the whole
// block for the ring, one half for bidir). Builds the steps of step j into the plan in the order
// chosen by post; the caller interleaves directions.
struct RsRing {
  int dir;          // +1: send to r+1, block (r - j - 1); -1: send to r-1, block (r + j + 1)
  int half;         // -1 whole block, 0 / 1: that half
  int recv_buf[2];  // rotating receive buffers
  Slice g;          // where partials are computed (rows as needed)
  int last_add = -1;
  int cur = 0;  // which receive buffer holds the running sum
};

Plan gemm_rs_sequential(const Problem& p, const PlanOptions& o, int r) {
  Plan plan = empty_plan(p, o, r);
  const int w = plan.add_buffer(Role::work, p.m, p.n);
  const int mm = plan.push(gemm(plan.gemm_lane(0), {w, 0, p.m}, {kBufA, 0, p.m}, 0, -1, {}));
  Step rs;
  rs.kind = StepKind::reduce_scatter;
  rs.lane = 0;
  for (int q = 0; q < p.world; ++q) rs.parts.push_back({w, off_of(p, q), rows_of(p, q)});
  rs.out = {kBufC, 0, rows_of(p, r)};
  rs.index = 0;
  rs.waits = {mm};
  plan.push(rs);
  return plan;
}

// S stages; stage s computes sub-block s of every rank's block into a stage buffer (stacked in rank
// order, as a reduce-scatter wants them), then reduce-scatters it. Two stage buffers rotate, so
// stage s's reduce-scatter runs beside stage s+1's GEMMs.
Plan gemm_rs_pipelined(const Problem& p, const PlanOptions& o, int r) {
  Plan plan = empty_plan(p, o, r);
  const int P = p.world;
  const int S = stages_of(p, o);
  auto stage_rows = [&](int q, int s) { return block_size(rows_of(p, q), S, s); };
  int64_t most = 0;
  for (int q = 0; q < P; ++q) most += stage_rows(q, 0);
  const int w[2] = {plan.add_buffer(Role::work, most, p.n), S > 1 ? plan.add_buffer(Role::work, most, p.n) : -1};

  std::vector<int> rs_steps;
  std::vector<std::vector<int>> gemm_steps(S);
  auto post_gemms = [&](int s) {
    int64_t stacked = 0;
    for (int q = 0; q < P; ++q) {
      const int64_t rows = stage_rows(q, s);
      const Slice a{kBufA, off_of(p, q) + block_offset(rows_of(p, q), S, s), rows};
      std::vector<int> waits;
      if (s >= 2) waits.push_back(rs_steps[s - 2]);  // its stage buffer is free again
      if (rows > 0)
        gemm_steps[s].push_back(plan.push(gemm(plan.gemm_lane(s), {w[s % 2], stacked, rows}, a, s, q, waits)));
      stacked += rows;
    }
  };
  auto post_rs = [&](int s) {
    Step rs;
    rs.kind = StepKind::reduce_scatter;
    rs.lane = 0;
    int64_t stacked = 0;
    for (int q = 0; q < P; ++q) {
      rs.parts.push_back({w[s % 2], stacked, stage_rows(q, s)});
      stacked += stage_rows(q, s);
    }
    rs.out = {kBufC, block_offset(rows_of(p, r), S, s), stage_rows(r, s)};
    rs.index = s;
    rs.waits = gemm_steps[s];
    rs_steps.push_back(plan.push(rs));
  };

  if (o.post == Post::comm_first) {
    for (int s = 0; s < S; ++s) post_gemms(s), post_rs(s);
  } else {  // gemm-first: stage s+1's GEMMs are posted before stage s's reduce-scatter
    post_gemms(0);
    for (int s = 0; s < S; ++s) {
      if (s + 1 < S) post_gemms(s + 1);
      post_rs(s);
    }
  }
  return plan;
}

}  // namespace

void append_rs_ring(Plan& plan, bool bidir, int64_t m0, int64_t m_rows, const CommHook& on_comm) {
  const Problem& p = plan.problem;
  const PlanOptions& o = plan.options;
  const int r = plan.rank;
  const int P = p.world;
  // Block q of these rows: rows_in(q) rows from A row off_in(q).
  auto rows_in = [&](int q) { return block_size(m_rows, P, q); };
  auto off_in = [&](int q) { return m0 + block_offset(m_rows, P, q); };
  const int64_t most = rows_in(0);
  const int64_t c0 = off_in(r) - c_first_row(p, r);  // rank r's block in C: 0 (gemm_rs) or its rows
  // Rows of block q that direction d handles, as a slice of A's rows (global) or relative.
  auto part = [&](int q, int half) -> std::pair<int64_t, int64_t> {  // (offset in block, rows)
    const int64_t rows = rows_in(q);
    if (half < 0) return {0, rows};
    const int64_t first = (rows + 1) / 2;
    return half == 0 ? std::pair<int64_t, int64_t>{0, first} : std::pair<int64_t, int64_t>{first, rows - first};
  };
  const int ndir = bidir ? 2 : 1;
  const int64_t dir_rows = bidir ? (most + 1) / 2 : most;
  // G, where the middle steps' partials go: C itself (bidir: the first half's partial, then the
  // second's, together at most `most` rows). A rank whose C is shorter than the largest block
  // cannot hold those rows in C: they are computed straight onto the received sum instead (a GEMM
  // with accumulate, once the sum has arrived), so no third buffer is needed.
  const int64_t c_rows = rows_in(r);
  auto in_c = [&](const Slice& g, int64_t rows) { return std::min(rows, std::max<int64_t>(0, c_rows - (g.row - c0))); };

  std::vector<RsRing> dirs;
  for (int d = 0; d < ndir; ++d) {
    RsRing ring;
    ring.dir = d == 0 ? +1 : -1;
    ring.half = bidir ? d : -1;
    ring.recv_buf[0] = plan.add_buffer(Role::work, dir_rows, p.n);
    ring.recv_buf[1] = plan.add_buffer(Role::work, dir_rows, p.n);
    ring.g = {kBufC, c0 + d * dir_rows, d == 0 ? dir_rows : most - dir_rows};
    dirs.push_back(ring);
  }
  auto block_at = [&](const RsRing& d, int j) { return ring_mod(r - d.dir * (j + 1), P); };

  // The GEMMs of piece i of step j: each direction's partial (into G, or the send buffer at step
  // 0); at the last step one GEMM of this rank's whole block straight into C. Step 0's are cut into
  // `edge` pieces (one piece at the other steps). A piece is computed, then sent: with halving
  // sizes the smallest goes first.
  const EdgeCut edge = edge_cut(o, PieceOrder::smallest_first);
  auto pieces_of = [&](int j) { return j == 0 ? edge : EdgeCut{}; };
  auto post_gemms = [&](int j, int i) {
    const bool last = j == P - 1;
    const EdgeCut n = pieces_of(j);
    std::vector<int> prev_adds, ids;
    for (auto& d : dirs)
      if (d.last_add >= 0) prev_adds.push_back(d.last_add);
    if (last)
      ids.push_back(
          plan.push(gemm(plan.gemm_lane(j), {kBufC, c0, rows_in(r)}, {kBufA, off_in(r), rows_in(r)}, j, r, prev_adds)));
    for (auto& d : dirs) {
      const int b = block_at(d, j);
      const auto [off, rows] = part(b, d.half);
      const int64_t here = j == 0 ? rows : in_c(d.g, rows);  // the rest: see post_adds
      if (here == 0 || last) continue;
      const Slice out = j == 0 ? Slice{d.recv_buf[1], 0, rows} : Slice{d.g.buf, d.g.row, here};
      const Slice a{kBufA, off_in(b) + off, here};
      ids.push_back(plan.push(gemm(plan.gemm_lane(j), piece_of(out, n, i), piece_of(a, n, i), j, b, prev_adds)));
    }
    return ids;
  };
  // The comm steps of step j, one per piece (comm_ids[i]); the sums they receive are added at j + 1.
  std::vector<int> comm_ids;
  // The adds of step j < P - 1 (received sum + this rank's partial, into the sum that goes on).
  auto post_adds = [&](int j, const std::vector<int>& gemm_ids) {
    for (auto& d : dirs) {
      const int b = block_at(d, j);
      const auto [off, rows] = part(b, d.half);
      if (rows == 0) continue;
      const Slice sum{d.recv_buf[d.cur], 0, rows};
      std::vector<int> waits = gemm_ids;
      const int64_t here = in_c(d.g, rows);
      if (here < rows) {  // rows of the partial that C cannot hold: sum += A rows @ B
        Step tail = gemm(plan.gemm_lane(j), {sum.buf, here, rows - here}, {kBufA, off_in(b) + off + here, rows - here},
                         j, b, {comm_ids.back()});
        tail.accumulate = true;
        waits.push_back(plan.push(tail));
      }
      if (here > 0)
        d.last_add = plan.push(add({sum.buf, 0, here}, {d.g.buf, d.g.row, here}, j, b, waits));
      else
        d.last_add = waits.back();  // the accumulating GEMM did the whole add
    }
  };
  // The last step's adds: the received sum into C, after the GEMM into C. On the comm lane after
  // the last receive; at P = 2 in pieces the sum arrived in step 0's pieces, and they are added on
  // the GEMM lane: every piece but the last in one add (they came while that GEMM ran), then the
  // last piece once it is here, so only the last piece's add follows the last receive (no extra
  // transfer: the pieces are the edge's own).
  auto post_last_adds = [&](int j, const std::vector<int>& gemm_ids) {
    const int S = P == 2 ? edge.pieces : 1;
    const EdgeCut cut = S == 1 ? EdgeCut{} : edge;
    const std::vector<std::pair<int, int>> groups = S == 1
                                                        ? std::vector<std::pair<int, int>>{{0, 0}}
                                                        : std::vector<std::pair<int, int>>{{0, S - 2}, {S - 1, S - 1}};
    for (const auto& [first, last] : groups)
      for (auto& d : dirs) {
        const int b = block_at(d, j);
        const auto [off, rows] = part(b, d.half);
        const int64_t from = piece_offset(rows, cut, first), to = piece_offset(rows, cut, last + 1);
        if (to == from) continue;
        Step a = add({kBufC, c0 + off + from, to - from}, {d.recv_buf[d.cur], from, to - from}, j, b, gemm_ids);
        if (S > 1) {  // on the GEMM into C's lane, after its pieces' receives
          a.lane = plan.steps[static_cast<size_t>(gemm_ids.front())].lane;
          a.waits.assign(comm_ids.begin() + first, comm_ids.begin() + last + 1);
        }
        d.last_add = plan.push(a);
      }
  };
  // Piece i of step j's comm: piece i of every partial goes as soon as its GEMM is done.
  auto post_comm = [&](int j, int i, const std::vector<int>& gemm_ids) {
    const EdgeCut n = pieces_of(j);
    Step comm;
    comm.kind = StepKind::sendrecv;
    comm.lane = 0;
    comm.index = j;
    for (auto& d : dirs) {
      const int b = block_at(d, j);
      const int64_t rows = part(b, d.half).second;
      const int64_t next_rows = part(block_at(d, j + 1), d.half).second;
      if (comm.chunk < 0) comm.chunk = b;
      if (rows > 0) comm.sends.push_back({ring_mod(r + d.dir, P), piece_of({d.recv_buf[d.cur], 0, rows}, n, i)});
      if (next_rows > 0)
        comm.recvs.push_back({ring_mod(r - d.dir, P), piece_of({d.recv_buf[1 - d.cur], 0, next_rows}, n, i)});
    }
    if (j == 0) comm.waits = gemm_ids;
    for (auto& d : dirs)  // a sum finished by an accumulating GEMM (no add on this lane)
      if (j > 0 && d.last_add >= 0 && plan.steps[d.last_add].lane != 0) comm.waits.push_back(d.last_add);
    if (i == 0 && on_comm) on_comm(j, comm);
    comm_ids.push_back(plan.push(comm));
  };
  auto next_buffers = [&] {
    for (auto& d : dirs) d.cur = 1 - d.cur;
  };

  // Step 0's GEMMs write the partials that go out into recv_buf[1]. comm-first: each piece's send
  // right after its GEMMs (the link starts after the first piece's GEMM, not after every piece's
  // launch), and the comm of step j before the GEMMs of step j+1, which it overlaps. gemm-first:
  // step 0's GEMMs, then at each step the GEMMs of step j+1 before the comm of step j.
  for (auto& d : dirs) d.cur = 1;
  std::vector<std::vector<int>> piece_ids;  // step 0's GEMMs, per piece
  for (int i = 0; i < edge.pieces; ++i) {
    piece_ids.push_back(post_gemms(0, i));
    if (o.post == Post::comm_first) post_comm(0, i, piece_ids.back());
  }
  std::vector<int> ids = post_gemms(1, 0);  // the GEMMs of the current step
  if (o.post == Post::gemm_first)
    for (int i = 0; i < edge.pieces; ++i) post_comm(0, i, piece_ids[static_cast<size_t>(i)]);
  next_buffers();
  for (int j = 1; j < P - 1; ++j) {
    post_adds(j, ids);
    comm_ids.clear();
    if (o.post == Post::gemm_first) {
      std::vector<int> next = post_gemms(j + 1, 0);
      post_comm(j, 0, ids);
      ids = next;
    } else {
      post_comm(j, 0, ids);
      ids = post_gemms(j + 1, 0);
    }
    next_buffers();
  }
  post_last_adds(P - 1, ids);
}

namespace {

// gemm_rs's ring and bidir: one ring over all of M (one GEMM at P = 1).
Plan gemm_rs_rings(const Problem& p, const PlanOptions& o, int r, bool bidir) {
  Plan plan = empty_plan(p, o, r);
  if (p.world == 1)
    plan.push(gemm(plan.gemm_lane(0), {kBufC, 0, p.m}, {kBufA, 0, p.m}, 0, 0, {}));
  else
    append_rs_ring(plan, bidir, 0, p.m, {});
  return plan;
}

Plan gemm_rs_ring(const Problem& p, const PlanOptions& o, int r) { return gemm_rs_rings(p, o, r, false); }
Plan gemm_rs_bidir(const Problem& p, const PlanOptions& o, int r) { return gemm_rs_rings(p, o, r, true); }

// Rank r holds columns block r of A and rows block r of B; its C is rows block r of the sum.
LocalShape blocks(const Problem& p, int r) {
  const int64_t k_r = block_size(p.k, p.world, r), k0 = block_offset(p.k, p.world, r);
  return {.a_rows = p.m,
          .a_cols = k_r,
          .b_rows = 0,
          .b_cols = 0,
          .c_rows = rows_of(p, r),
          .c_cols = p.n,
          .gemm_k = k_r,
          .gemm_n = p.n,
          .a_row0 = 0,
          .a_col0 = k0,
          .b_k0 = k0,
          .b_n0 = 0,
          .c_row0 = off_of(p, r),
          .c_col0 = 0};
}

void validate(const Problem& p, std::vector<std::string>& problems) {
  need_one_per_rank(p, "M", p.m, "every rank needs at least one row of C", problems);
  need_one_per_rank(p, "K", p.k, "gemm_rs gives every rank at least one column of A", problems);
}

// With played peers a rank receives and sends up to P running sums of a block of C.
int64_t played_link_bytes(const Problem& p, int64_t, int64_t out_size) {
  return 2 * int64_t(p.world) * (p.m / p.world + 1) * p.n * out_size;
}

}  // namespace

std::vector<Product> summed_c_row(const Problem& p, int r, int64_t t) {
  std::vector<Product> sum;
  for (int q = 0; q < p.world; ++q) sum.push_back({q, c_first_row(p, r) + t, q});
  return sum;
}

OpRow gemm_rs_row() {
  return {.op = Op::gemm_rs,
          .name = "gemm_rs",
          .formula = "C_r = rows block r of sum_q A_q @ B_q",
          .builders = {{Algo::sequential, gemm_rs_sequential},
                       {Algo::pipelined, gemm_rs_pipelined},
                       {Algo::ring, gemm_rs_ring},
                       {Algo::bidir, gemm_rs_bidir}},
          .sums_over_ranks = true,
          .gathers_a = false,
          .takes_merge = false,
          .takes_waves = false,
          .blocks = blocks,
          .validate = validate,
          .played_link_bytes = played_link_bytes,
          .c_row = summed_c_row};
}

}  // namespace collmm
