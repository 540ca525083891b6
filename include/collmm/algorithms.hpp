// collmm/algorithms.hpp: the table of algorithms, one row each (as nccl-tests lists its
// collectives): the name, the options it takes, the steps the simulator walks for it and its
// candidates for `--algo auto`. Everything that lists or branches on algorithms reads this table:
// parsing and printing names, options_for, validate, auto's candidates, the simulator's limit, the
// CLIs' help and the Python extension's list. Each op's builder of each algorithm is in the op's row
// (collmm/ops.hpp).
//
// A new algorithm: its builder in each op's plan file (plan/ag_gemm.cpp, ...) and the op's row, one
// enum value in collmm/types.hpp, one row in plan/algorithms.cpp and its golden plan test.
#pragma once

#include <string>
#include <vector>

#include "collmm/types.hpp"

namespace collmm {

struct Plan;
using PlanBuilder = Plan (*)(const Problem&, const PlanOptions&, int rank);

struct AlgoRow {
  Algo algo;
  const char* name;
  bool takes_stages;      // --stages (0: default_stages)
  bool takes_waves;       // --waves: the op's output in waves of rows, each this row's ring (gemm_ar)
  bool takes_gemm_lanes;  // more than one GEMM lane can run at once (sequential: one GEMM)
  bool takes_merge;       // --merge, in ag_gemm only (gemm_rs has no merge)
  bool takes_pieces;      // --pieces: the ring's exposed edge chunk cut into row pieces
  int chunk_parts;        // the parts each chunk travels in (bidir: two halves); edge_rows divides by it
  // The steps the simulator walks for all P ranks at S stages or waves (1 where neither applies).
  double (*simulated_steps)(double P, double S);
  std::vector<int> auto_stages;   // auto's candidate stage counts ({0}: not staged)
  std::vector<int> auto_merges;   // auto's candidate merges beyond 1 (ag_gemm only, P > merge)
  std::vector<int> auto_pieces;   // auto's candidate pieces beyond 1 (where the edge chunk has the rows)
  std::vector<int> auto_halving;  // the same, in pieces of halving size (--piece-sizes halving)
  std::vector<int> auto_waves;    // auto's candidate waves where the op takes them ({}: none)
  bool alone_at_one_rank;         // auto's one candidate at P = 1 (nothing to overlap there)
};

// Every row, in the order of the enum; what `--algo all` runs and `--list-algos` prints.
const std::vector<AlgoRow>& algorithm_table();
const AlgoRow& algorithm(Algo);
// The names joined by `separator`: "sequential, pipelined, ring, bidir".
std::string algorithm_names(const std::string& separator = ", ");

// The op's builder of the algorithm (its row in collmm/ops.hpp).
PlanBuilder builder(Op, Algo);
// Whether --merge applies: the op's row and the algorithm's row both take it.
bool takes_merge(Op, Algo);
// Whether --waves applies: the op's row and the algorithm's row both take waves (gemm_ar's ring).
bool takes_waves(Op, Algo);
// The names of the rows that take an option, joined by " and ": "ring and bidir".
std::string names_taking(bool AlgoRow::*option);

// The stage count of a pipelined plan when --stages is 0: as many as ranks, but at least one row
// per stage of the smallest rank's block: max(1, min(P, M / P)).
int default_stages(const Problem&);
// o.stages where the algorithm takes stages and it is given, default_stages where it is 0, else 1.
int stages_of(const Problem&, const PlanOptions&);
// o.waves where the op and algorithm take waves and it is given, else 1.
int waves_of(const Problem&, const PlanOptions&);

// `o` as algorithm `algo` of `op` takes it: an option that algorithm has no use for is at its
// default. Its row says which: stages outside pipelined, waves outside gemm_ar's ring, merge outside
// the ag_gemm ring, pieces outside ring and bidir, piece sizes where there is one piece. What a
// front end runs for each algorithm when one set of flags serves several (--algo all).
PlanOptions options_for(Op op, Algo algo, PlanOptions o);

// The rows of the smallest piece of work --pieces cuts: the smallest rank's block, divided by the
// parts its chunks travel in (the algorithm's row: bidir sends two halves). It must hold at least
// rows_for_pieces(pieces, piece_sizes) rows.
int64_t edge_rows(const Problem&, const PlanOptions&);

// validate(Problem) (collmm/types.hpp) and the options that one algorithm takes, in one UsageError
// naming everything wrong. Every integer option is within its range; merge, waves and pieces are
// set only where the rows take them. The edge chunk has the rows for its pieces, and the smallest
// block can split into the stages and waves.
void validate(const Problem&, const PlanOptions&);

// The simulator walks every step of every rank's plan; bounded so that every run ends in seconds
// (a ring at P = 1024, 1M steps, takes about 6 s and 1 GB).
constexpr double kMaxSimulatedSteps = 4e6;
double simulated_steps(const Problem&, const PlanOptions&);

// The configurations `--algo auto` simulates for this problem, in the table's order:
//   - each row's stage counts (those the shape allows, within kMaxSimulatedSteps) times its GEMM
//     lane counts (1 and 2 where it takes lanes), all posted comm-first;
//   - then each row's merges (ag_gemm, P > merge);
//   - then each row's pieces (1 lane, pieces <= edge_rows), then its pieces of halving size
//     (1 lane, 2^(pieces-1) <= edge_rows).
// With one rank, only the row marked alone_at_one_rank.
std::vector<PlanOptions> auto_candidates(const Problem&);

}  // namespace collmm
