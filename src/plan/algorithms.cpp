// algorithms.cpp: the table of algorithms (collmm/algorithms.hpp) and the rules read from it.
#include "collmm/algorithms.hpp"

#include <algorithm>

#include "collmm/plan.hpp"

namespace collmm {
namespace {

// sequential: one allgather or reduce-scatter of P parts and one GEMM per rank (gemm_ar: both).
double sequential_steps(double P, double) { return 2 * P; }
// pipelined: S stages of a collective over P ranks, on each of P ranks.
double staged_steps(double P, double S) { return S * P * P; }
// ring: P steps on each of P ranks (gemm_ar: in S waves); bidir: two rings of half chunks.
double ring_steps(double P, double S) { return S * P * P; }
double bidir_steps(double P, double) { return 2 * P * P; }

}  // namespace

const std::vector<AlgoRow>& algorithm_table() {
  static const std::vector<AlgoRow> rows{
      {.algo = Algo::sequential,
       .name = "sequential",
       .ag_gemm = ag_gemm_sequential,
       .gemm_rs = gemm_rs_sequential,
       .gemm_ar = gemm_ar_sequential,
       .takes_stages = false,
       .takes_gemm_lanes = false,
       .takes_merge = false,
       .takes_pieces = false,
       .chunk_parts = 1,
       .simulated_steps = sequential_steps,
       .auto_stages = {0},
       .auto_merges = {},
       .auto_pieces = {},
       .auto_halving = {},
       .auto_waves = {},
       .alone_at_one_rank = false},
      {.algo = Algo::pipelined,
       .name = "pipelined",
       .ag_gemm = ag_gemm_pipelined,
       .gemm_rs = gemm_rs_pipelined,
       .gemm_ar = gemm_ar_pipelined,
       .takes_stages = true,
       .takes_gemm_lanes = true,
       .takes_merge = false,
       .takes_pieces = false,
       .chunk_parts = 1,
       .simulated_steps = staged_steps,
       .auto_stages = {2, 4, 8},
       .auto_merges = {},
       .auto_pieces = {},
       .auto_halving = {},
       .auto_waves = {},
       .alone_at_one_rank = false},
      {.algo = Algo::ring,
       .name = "ring",
       .ag_gemm = ag_gemm_ring,
       .gemm_rs = gemm_rs_ring,
       .gemm_ar = gemm_ar_ring,
       .takes_stages = false,
       .takes_gemm_lanes = true,
       .takes_merge = true,
       .takes_pieces = true,
       .chunk_parts = 1,
       .simulated_steps = ring_steps,
       .auto_stages = {0},
       .auto_merges = {2, 4},
       .auto_pieces = {2, 4, 8, 16},
       .auto_halving = {4, 5},
       .auto_waves = {2, 4},
       .alone_at_one_rank = true},
      {.algo = Algo::bidir,
       .name = "bidir",
       .ag_gemm = ag_gemm_bidir,
       .gemm_rs = gemm_rs_bidir,
       .gemm_ar = gemm_ar_bidir,
       .takes_stages = false,
       .takes_gemm_lanes = true,
       .takes_merge = false,
       .takes_pieces = true,
       .chunk_parts = 2,
       .simulated_steps = bidir_steps,
       .auto_stages = {0},
       .auto_merges = {},
       .auto_pieces = {2, 4, 8, 16},
       .auto_halving = {4, 5},
       .auto_waves = {},
       .alone_at_one_rank = false},
  };
  return rows;
}

const AlgoRow& algorithm(Algo a) {
  for (const AlgoRow& row : algorithm_table())
    if (row.algo == a) return row;
  throw std::logic_error("algorithm " + std::to_string(static_cast<int>(a)) + " has no row in the table");
}

std::string algorithm_names(const std::string& separator) {
  std::string names;
  for (const AlgoRow& row : algorithm_table()) names += (names.empty() ? "" : separator) + row.name;
  return names;
}

PlanBuilder builder(Op op, Algo a) {
  switch (op) {
    case Op::ag_gemm: return algorithm(a).ag_gemm;
    case Op::gemm_rs: return algorithm(a).gemm_rs;
    case Op::gemm_ar: return algorithm(a).gemm_ar;
  }
  throw std::logic_error("op " + std::to_string(static_cast<int>(op)) + " has no builder column");
}

bool takes_merge(Op op, Algo a) { return op == Op::ag_gemm && algorithm(a).takes_merge; }

bool takes_stages(Op op, Algo a) {
  return algorithm(a).takes_stages || (op == Op::gemm_ar && !algorithm(a).auto_waves.empty());
}

std::string names_taking(bool AlgoRow::*option) {
  std::vector<std::string> names;
  for (const AlgoRow& row : algorithm_table())
    if (row.*option) names.push_back(row.name);
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return text;
}

int default_stages(const Problem& p) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(p.world, p.m / p.world)));
}

int stages_of(const Problem& p, const PlanOptions& o) {
  if (!takes_stages(p.op, o.algo)) return 1;
  if (o.stages > 0) return o.stages;
  return algorithm(o.algo).takes_stages ? default_stages(p) : 1;
}

double simulated_steps(const Problem& p, const PlanOptions& o) {
  return algorithm(o.algo).simulated_steps(p.world, stages_of(p, o));
}

std::vector<PlanOptions> auto_candidates(const Problem& p) {
  std::vector<PlanOptions> candidates;
  auto add = [&](Algo a, int stages, int lanes, int merge, int pieces, PieceSizes sizes = PieceSizes::equal) {
    const PlanOptions o{.algo = a,
                        .stages = stages,
                        .post = Post::comm_first,
                        .gemm_lanes = lanes,
                        .merge = merge,
                        .pieces = pieces,
                        .piece_sizes = sizes};
    validate(p, o);  // throws for the problem itself; per-candidate limits are checked by the callers
    candidates.push_back(o);
  };
  if (p.world == 1) {  // nothing to overlap: the ring's one step is the plain GEMM on A (no gather copy)
    for (const AlgoRow& row : algorithm_table())
      if (row.alone_at_one_rank) add(row.algo, 0, 1, 1, 1);
    return candidates;
  }
  for (const AlgoRow& row : algorithm_table())
    for (int s : row.auto_stages) {
      const PlanOptions staged{.algo = row.algo, .stages = s};
      if (s > 0 && (s > p.m / p.world || simulated_steps(p, staged) > kMaxSimulatedSteps)) continue;
      for (int lanes : row.takes_gemm_lanes ? std::vector<int>{1, 2} : std::vector<int>{1})
        add(row.algo, s, lanes, 1, 1);
    }
  if (p.op == Op::gemm_ar)  // the ring in waves (each wave's block at least a row per rank)
    for (const AlgoRow& row : algorithm_table())
      for (int waves : row.auto_waves)
        if (waves <= p.m / p.world && simulated_steps(p, {.algo = row.algo, .stages = waves}) <= kMaxSimulatedSteps)
          add(row.algo, waves, 1, 1, 1);
  if (p.op == Op::ag_gemm)
    for (const AlgoRow& row : algorithm_table())
      for (int merge : row.auto_merges)
        if (p.world > merge) add(row.algo, 0, 1, merge, 1);
  for (const AlgoRow& row : algorithm_table())  // the ring's exposed edge in pieces
    for (int pieces : row.auto_pieces)
      if (pieces <= edge_rows(p, {.algo = row.algo})) add(row.algo, 0, 1, 1, pieces);
  for (const AlgoRow& row : algorithm_table())  // ... in pieces of halving size
    for (int pieces : row.auto_halving)
      if (rows_for_pieces(pieces, PieceSizes::halving) <= edge_rows(p, {.algo = row.algo}))
        add(row.algo, 0, 1, 1, pieces, PieceSizes::halving);
  return candidates;
}

}  // namespace collmm
