// gemm_ar.cpp: the schedules of GEMM + AllReduce, one function per algorithm.
//
// Rank r of P holds A_r (columns block r of A, [M, K_r]) and B_r ([K_r, N]); every rank computes
// the whole C = sum over q of A_q @ B_q, [M, N]. The all-reduce is a reduce-scatter of C's row
// blocks followed by an all-gather of the summed blocks, as NCCL's and MPI's ring all-reduce moves
// its data: 2 (P-1)/P of C per rank in all.
//
// sequential: one GEMM of all M rows into a work buffer, then the reduce-scatter of its P blocks
//   into rank r's block of C, then the all-gather of every block, in place in C.
// pipelined: the same over S stages of M's rows (stage s: rows block s of S, cut in P blocks);
//   stage s's reduce-scatter and all-gather run on the comm lane beside stage s+1's GEMM. Two
//   stage buffers rotate, as gemm_rs's pipelined:
//
//   gemm  | g0 | g1      | g2      |              S = 3
//   comm       | rs0 ag0 | rs1 ag1 | rs2 ag2 |
//
// ring, bidir: gemm_rs's ring (plan/gemm_rs.cpp: each block summed on its way round, the GEMMs
//   beside the transfers; --pieces cuts its first GEMM and send), which leaves rank r's summed
//   block in its rows of C, then the all-gather of the blocks. A block is complete only at the
//   ring's last step, so one ring leaves that all-gather with no GEMM beside it. --waves W (ring
//   only; 0 and 1: one wave) runs W waves of M/W rows, each its own ring. The all-gather of wave w
//   travels in wave w+1's sendrecvs (step j also sends block r - j of wave w on to r+1 and
//   receives block r - j - 1), beside wave w+1's GEMMs. Only the last wave's runs alone:
//
//   gemm  | ring of wave 0     | ring of wave 1     |
//   comm  |  rs0 ...           |  rs1 + ag0 ...     | ag1 |
#include "op_rows.hpp"
#include "rs_ring.hpp"

namespace collmm {
namespace {

// The all-gather of rows [row0, row0 + rows) of C, cut in P blocks (block q: rank q's), in place:
// this rank contributes its own block. Waits for `waits`.
Step allgather_c(const Problem& p, int r, int64_t row0, int64_t rows, int index, std::vector<int> waits) {
  Step ag;
  ag.kind = StepKind::allgather;
  ag.lane = 0;
  for (int q = 0; q < p.world; ++q)
    ag.parts.push_back({kBufC, row0 + block_offset(rows, p.world, q), block_size(rows, p.world, q)});
  ag.a = ag.parts[static_cast<size_t>(r)];
  ag.index = index;
  ag.chunk = r;
  ag.waits = std::move(waits);
  return ag;
}

// sequential (S = 1) and pipelined: S stages of a GEMM, a reduce-scatter and an all-gather.
Plan staged(const Problem& p, const PlanOptions& o, int r, int S) {
  Plan plan = empty_plan(p, o, r);
  const int P = p.world;
  const int64_t most = block_size(p.m, S, 0);
  const int w[2] = {plan.add_buffer(Role::work, most, p.n), S > 1 ? plan.add_buffer(Role::work, most, p.n) : -1};
  std::vector<int> gemm_steps, rs_steps;
  auto post_gemm = [&](int s) {
    const int64_t rows = block_size(p.m, S, s);
    std::vector<int> waits;
    if (s >= 2) waits.push_back(rs_steps[s - 2]);  // its stage buffer is free again
    gemm_steps.push_back(plan.push(local_step(StepKind::gemm, plan.gemm_lane(s), {w[s % 2], 0, rows},
                                              {kBufA, block_offset(p.m, S, s), rows}, s, -1, waits)));
  };
  auto post_collectives = [&](int s) {
    const int64_t row0 = block_offset(p.m, S, s), rows = block_size(p.m, S, s);
    Step rs;
    rs.kind = StepKind::reduce_scatter;
    rs.lane = 0;
    for (int q = 0; q < P; ++q) rs.parts.push_back({w[s % 2], block_offset(rows, P, q), block_size(rows, P, q)});
    rs.out = {kBufC, row0 + block_offset(rows, P, r), block_size(rows, P, r)};
    rs.index = s;
    rs.chunk = r;
    rs.waits = {gemm_steps[static_cast<size_t>(s)]};
    rs_steps.push_back(plan.push(rs));
    plan.push(allgather_c(p, r, row0, rows, s, {}));  // after the reduce-scatter, on its lane
  };
  if (o.post == Post::comm_first) {
    for (int s = 0; s < S; ++s) post_gemm(s), post_collectives(s);
  } else {  // gemm-first: stage s+1's GEMM is posted before stage s's collectives
    post_gemm(0);
    for (int s = 0; s < S; ++s) {
      if (s + 1 < S) post_gemm(s + 1);
      post_collectives(s);
    }
  }
  return plan;
}

// The last step of every GEMM lane so far (what a step must wait for to follow all of them).
std::vector<int> last_gemm_lane_steps(const Plan& plan) {
  std::vector<int> last(static_cast<size_t>(plan.lanes), -1), waits;
  for (size_t i = 0; i < plan.steps.size(); ++i) last[static_cast<size_t>(plan.steps[i].lane)] = static_cast<int>(i);
  for (size_t lane = 1; lane < last.size(); ++lane)
    if (last[lane] >= 0) waits.push_back(last[lane]);
  return waits;
}

// ring and bidir: W waves of M's rows, each a gemm_rs ring; wave w-1's all-gather travels in wave
// w's sendrecvs, the last wave's runs alone.
Plan rings(const Problem& p, const PlanOptions& o, int r, bool bidir) {
  Plan plan = empty_plan(p, o, r);
  const int P = p.world;
  if (P == 1) {  // the one GEMM writes all of C
    plan.push(local_step(StepKind::gemm, plan.gemm_lane(0), {kBufC, 0, p.m}, {kBufA, 0, p.m}, 0, 0));
    return plan;
  }
  const int W = waves_of(p, o);
  auto wave_row = [&](int w) { return block_offset(p.m, W, w); };  // wave W: all of M
  std::vector<int> done;                                           // the previous wave's last GEMM-lane steps
  for (int w = 0; w < W; ++w) {
    const int64_t m0 = wave_row(w), prev0 = w > 0 ? wave_row(w - 1) : 0, prev_rows = m0 - prev0;
    // All-gather ring step j of wave w-1: send block (r - j), receive block (r - j - 1), in C.
    auto gather_prev = [&](int j, Step& comm) {
      if (w == 0) return;
      auto block = [&](int q) {
        return Slice{kBufC, prev0 + block_offset(prev_rows, P, q), block_size(prev_rows, P, q)};
      };
      comm.sends.push_back({ring_mod(r + 1, P), block(ring_mod(r - j, P))});
      comm.recvs.push_back({ring_mod(r - 1, P), block(ring_mod(r - j - 1, P))});
      if (j == 0) comm.waits.insert(comm.waits.end(), done.begin(), done.end());  // its own block complete
    };
    append_rs_ring(plan, bidir, m0, wave_row(w + 1) - m0, gather_prev);
    done = last_gemm_lane_steps(plan);
  }
  plan.push(allgather_c(p, r, wave_row(W - 1), p.m - wave_row(W - 1), P, done));
  return plan;
}

Plan gemm_ar_sequential(const Problem& p, const PlanOptions& o, int r) { return staged(p, o, r, 1); }
Plan gemm_ar_pipelined(const Problem& p, const PlanOptions& o, int r) { return staged(p, o, r, stages_of(p, o)); }
Plan gemm_ar_ring(const Problem& p, const PlanOptions& o, int r) { return rings(p, o, r, false); }
Plan gemm_ar_bidir(const Problem& p, const PlanOptions& o, int r) { return rings(p, o, r, true); }

// Rank r holds gemm_rs's blocks of A and B; its C is all of the sum.
LocalShape blocks(const Problem& p, int r) {
  LocalShape s = summed_blocks(p, r);
  s.c_rows = p.m;
  s.c_row0 = 0;
  return s;
}

void validate(const Problem& p, std::vector<std::string>& problems) {
  need_one_per_rank(p, "M", p.m, "every rank needs at least one row of C", problems);
  need_one_per_rank(p, "K", p.k, "gemm_ar gives every rank at least one column of A", problems);
}

// With played peers a rank receives and sends up to P running sums of a block of C, and the
// all-gather's blocks.
int64_t played_link_bytes(const Problem& p, int64_t, int64_t out_size) {
  return 4 * int64_t(p.world) * (p.m / p.world + 1) * p.n * out_size;
}

}  // namespace

OpRow gemm_ar_row() {
  return {.op = Op::gemm_ar,
          .name = "gemm_ar",
          .formula = "C = sum_q A_q @ B_q on every rank",
          .builders = {{Algo::sequential, gemm_ar_sequential},
                       {Algo::pipelined, gemm_ar_pipelined},
                       {Algo::ring, gemm_ar_ring},
                       {Algo::bidir, gemm_ar_bidir}},
          .sums_over_ranks = true,
          .gathers_a = false,
          .takes_merge = false,
          .takes_waves = true,
          .blocks = blocks,
          .validate = validate,
          .played_link_bytes = played_link_bytes,
          .c_row = summed_c_row};
}

}  // namespace collmm
