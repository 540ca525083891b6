// gemm_rs.cpp: the schedules of GEMM + ReduceScatter, one function per algorithm.
//
// Rank r of P holds A_r (columns block r of A, [M, K_r]) and B_r ([K_r, N]); it computes
// C_r = rows block r of (sum over q of A_q @ B_q), [M_r, N]. A "block" b is the output rows of
// rank b; this rank's partial for block b is A_r[rows of b] @ B_r.
//
// sequential: one GEMM of all M rows into a work buffer, then its reduce-scatter into C.
// pipelined: the same in S stages of every block's rows, stage s's reduce-scatter beside stage
//   s+1's GEMMs.
// ring, bidir: the accumulate-and-forward ring (plan/rs_ring.cpp), which also serves gemm_ar's
//   ring and bidir (plan/gemm_ar.cpp).
#include <algorithm>

#include "op_rows.hpp"
#include "rs_ring.hpp"

namespace collmm {
namespace {

int64_t rows_of(const Problem& p, int q) { return block_size(p.m, p.world, q); }
int64_t off_of(const Problem& p, int q) { return block_offset(p.m, p.world, q); }

Plan gemm_rs_sequential(const Problem& p, const PlanOptions& o, int r) {
  Plan plan = empty_plan(p, o, r);
  const int w = plan.add_buffer(Role::work, p.m, p.n);
  const int mm = plan.push(gemm_step(plan.gemm_lane(0), {w, 0, p.m}, {kBufA, 0, p.m}, 0, -1, {}));
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
        gemm_steps[s].push_back(plan.push(gemm_step(plan.gemm_lane(s), {w[s % 2], stacked, rows}, a, s, q, waits)));
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

// gemm_rs's ring and bidir: one ring over all of M (one GEMM at P = 1).
Plan gemm_rs_rings(const Problem& p, const PlanOptions& o, int r, bool bidir) {
  Plan plan = empty_plan(p, o, r);
  if (p.world == 1)
    plan.push(gemm_step(plan.gemm_lane(0), {kBufC, 0, p.m}, {kBufA, 0, p.m}, 0, 0, {}));
  else
    append_rs_ring(plan, bidir, 0, p.m, {});
  return plan;
}

Plan gemm_rs_ring(const Problem& p, const PlanOptions& o, int r) { return gemm_rs_rings(p, o, r, false); }
Plan gemm_rs_bidir(const Problem& p, const PlanOptions& o, int r) { return gemm_rs_rings(p, o, r, true); }

}  // namespace

LocalShape summed_blocks(const Problem& p, int r) {
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

namespace {

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
          .blocks = summed_blocks,
          .validate = validate,
          .played_link_bytes = played_link_bytes,
          .c_row = summed_c_row};
}

}  // namespace collmm
