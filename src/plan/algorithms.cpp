// algorithms.cpp: the table of algorithms (collmm/algorithms.hpp) and the rules read from it: the
// algorithms' names, options_for, edge_rows and the checks of the options one algorithm takes.
#include "collmm/algorithms.hpp"

#include <algorithm>
#include <sstream>
#include <tuple>

#include "collmm/ops.hpp"
#include "collmm/plan.hpp"
#include "collmm/sizes.hpp"
#include "enum_names.hpp"

namespace collmm {
namespace {

// sequential: one allgather or reduce-scatter of P parts and one GEMM per rank (gemm_ar: both).
double sequential_steps(double P, double) { return 2 * P; }
// pipelined: S stages of a collective over P ranks; ring: P steps (gemm_ar: in S waves); on each
// of P ranks.
double staged_steps(double P, double S) { return S * P * P; }
// bidir: two rings of half chunks.
double bidir_steps(double P, double) { return 2 * P * P; }

}  // namespace

const std::vector<AlgoRow>& algorithm_table() {
  static const std::vector<AlgoRow> rows{
      {.algo = Algo::sequential,
       .name = "sequential",
       .takes_stages = false,
       .takes_waves = false,
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
       .takes_stages = true,
       .takes_waves = false,
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
       .takes_stages = false,
       .takes_waves = true,
       .takes_gemm_lanes = true,
       .takes_merge = true,
       .takes_pieces = true,
       .chunk_parts = 1,
       .simulated_steps = staged_steps,
       .auto_stages = {0},
       .auto_merges = {2, 4},
       .auto_pieces = {2, 4, 8, 16},
       .auto_halving = {4, 5},
       .auto_waves = {2, 4},
       .alone_at_one_rank = true},
      {.algo = Algo::bidir,
       .name = "bidir",
       .takes_stages = false,
       .takes_waves = false,
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

namespace {

const EnumNames<Algo>& algo_names() {
  static const EnumNames<Algo> names = names_of_rows(algorithm_table(), &AlgoRow::algo);
  return names;
}

}  // namespace

const std::vector<Algo>& all_algos() {
  static const std::vector<Algo> algos = values_of_rows(algorithm_table(), &AlgoRow::algo);
  return algos;
}
std::string to_string(Algo v) { return algo_names().name(v); }
Algo parse_algo(const std::string& s) { return algo_names().parse(s, "algorithm"); }
void parse_field(const std::string& s, Algo& v) { v = parse_algo(s); }
size_t longest_name(Algo) { return algo_names().longest(); }

std::string algorithm_names(const std::string& separator) {
  std::string names;
  for (const AlgoRow& row : algorithm_table()) names += (names.empty() ? "" : separator) + row.name;
  return names;
}

PlanBuilder builder(Op op, Algo a) {
  for (const auto& [algo, build] : op_row(op).builders)
    if (algo == a) return build;
  throw std::logic_error(to_string(op) + " has no builder of " + to_string(a));
}

bool takes_merge(Op op, Algo a) { return op_row(op).takes_merge && algorithm(a).takes_merge; }

bool takes_waves(Op op, Algo a) { return op_row(op).takes_waves && algorithm(a).takes_waves; }

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
  if (!algorithm(o.algo).takes_stages) return 1;
  return o.stages > 0 ? o.stages : default_stages(p);
}

int waves_of(const Problem& p, const PlanOptions& o) { return takes_waves(p.op, o.algo) && o.waves > 0 ? o.waves : 1; }

PlanOptions options_for(Op op, Algo algo, PlanOptions o) {
  o.algo = algo;
  if (!algorithm(algo).takes_stages) o.stages = 0;
  if (!takes_waves(op, algo)) o.waves = 0;
  if (!takes_merge(op, algo)) o.merge = 1;
  if (!algorithm(algo).takes_pieces) o.pieces = 1;
  if (o.pieces == 1) o.piece_sizes = PieceSizes::equal;  // one piece is the whole chunk either way
  return o;
}

int64_t edge_rows(const Problem& p, const PlanOptions& o) {
  const int64_t chunk = p.m / waves_of(p, o) / p.world;  // the smallest rank's block (of a wave)
  return chunk / algorithm(o.algo).chunk_parts;
}

void validate(const Problem& p, const PlanOptions& o) {
  validate(p);
  std::vector<std::string> problems;
  std::ostringstream msg;  // one problem's sentence at a time
  auto add = [&] {
    problems.push_back(msg.str());
    msg.str("");
  };
  for_each_field(o, [&](const Field& f, const auto& v) {
    if constexpr (std::is_integral_v<std::decay_t<decltype(v)>>)
      if (const std::string bad = out_of_range(f, v); !bad.empty()) problems.push_back(bad);
  });
  const int P = p.world;
  if (o.merge > 1 && !takes_merge(p.op, o.algo)) {
    msg << "merge " << o.merge << " applies to";
    for (const OpRow& op : op_table())
      for (const AlgoRow& row : algorithm_table())
        if (takes_merge(op.op, row.algo)) msg << " " << op.name << " " << row.name;
    msg << " only (got " << to_string(p.op) << " " << to_string(o.algo) << ")";
    add();
  }
  if (o.pieces > 1 && !algorithm(o.algo).takes_pieces) {
    msg << "pieces " << o.pieces << " applies to " << names_taking(&AlgoRow::takes_pieces) << " only (got "
        << to_string(o.algo) << (algorithm(o.algo).takes_stages ? ", which cuts every transfer already: stages" : "")
        << ")";
    add();
  }
  const bool halving = o.piece_sizes == PieceSizes::halving;
  if (halving && !algorithm(o.algo).takes_pieces) {
    msg << "pieces of halving size apply to " << names_taking(&AlgoRow::takes_pieces) << " only (got "
        << to_string(o.algo) << ")";
    add();
  }
  if (halving && o.pieces > kMaxHalvingPieces) {
    msg << "pieces " << o.pieces << " of halving size: at most " << kMaxHalvingPieces << " pieces (the smallest then 1/"
        << (1 << (kMaxHalvingPieces - 1)) << " of the chunk)";
    add();
  }
  if (o.pieces > 1 && o.pieces <= (halving ? kMaxHalvingPieces : kMaxPieces) && algorithm(o.algo).takes_pieces &&
      rows_for_pieces(o.pieces, o.piece_sizes) > edge_rows(p, o)) {
    const int64_t rows = edge_rows(p, o);
    int most = 1;  // the most pieces of these sizes the edge chunk has rows for
    while (most < (halving ? kMaxHalvingPieces : kMaxPieces) && rows_for_pieces(most + 1, o.piece_sizes) <= rows)
      ++most;
    msg << "pieces " << o.pieces << (halving ? " of halving size" : "") << " cannot cut the " << to_string(o.algo)
        << "'s edge chunk: the smallest " << (algorithm(o.algo).chunk_parts == 2 ? "half chunk" : "chunk")
        << " of M=" << p.m << " over " << P << " ranks has " << rows << " rows"
        << (halving ? ", halving needs " + std::to_string(rows_for_pieces(o.pieces, o.piece_sizes)) : "")
        << ", so at most " << most << " pieces";
    add();
  }
  if (o.stages > 0 && !algorithm(o.algo).takes_stages && takes_waves(p.op, o.algo)) {
    msg << "stages " << o.stages << ": " << to_string(p.op) << "'s " << to_string(o.algo)
        << " has no stages; its waves are the option waves (" << to_string(o.algo) << ":waves" << o.stages << ")";
    add();
  }
  if (o.waves > 1 && !takes_waves(p.op, o.algo)) {
    msg << "waves " << o.waves << " apply to";
    for (const OpRow& op : op_table())
      for (const AlgoRow& row : algorithm_table())
        if (takes_waves(op.op, row.algo)) msg << " " << op.name << " " << row.name;
    msg << " only (got " << to_string(p.op) << " " << to_string(o.algo) << ")";
    add();
  }
  for (auto [count, name, applies] : {std::tuple{o.stages, "stages", algorithm(o.algo).takes_stages},
                                      std::tuple{o.waves, "waves", takes_waves(p.op, o.algo)}})
    if (applies && count > p.m / P) {
      msg << name << " " << count << " cannot split M=" << p.m << " over " << P
          << " ranks: the smallest rank's block has " << p.m / P << " rows, so at most " << p.m / P << " " << name;
      add();
    }
  throw_if_any(problems);
}

double simulated_steps(const Problem& p, const PlanOptions& o) {
  return algorithm(o.algo).simulated_steps(p.world, stages_of(p, o) * waves_of(p, o));  // one of them is 1
}

std::vector<PlanOptions> auto_candidates(const Problem& p) {
  std::vector<PlanOptions> candidates;
  auto add = [&](Algo a, int stages, int lanes, int merge, int pieces, PieceSizes sizes = PieceSizes::equal,
                 int waves = 0) {
    const PlanOptions o{.algo = a,
                        .stages = stages,
                        .waves = waves,
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
  for (const AlgoRow& row : algorithm_table())  // the ring in waves (each wave's block a row per rank)
    if (takes_waves(p.op, row.algo))
      for (int waves : row.auto_waves)
        if (waves <= p.m / p.world && simulated_steps(p, {.algo = row.algo, .waves = waves}) <= kMaxSimulatedSteps)
          add(row.algo, 0, 1, 1, 1, PieceSizes::equal, waves);
  for (const AlgoRow& row : algorithm_table())
    if (takes_merge(p.op, row.algo))
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
