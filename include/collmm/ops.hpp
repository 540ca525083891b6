// collmm/ops.hpp: the table of ops, one row each, as nccl-tests lists its collectives. A row holds
// the name, the builder of each algorithm's plan and where each rank's blocks of A, B and C lie. It
// says whether C is a sum over the ranks, checks the op's split, and gives the bytes a played peer
// moves and what the checker expects in C. Everything that lists or branches on ops reads this
// table: all_ops, to_string, parse_op, the CLIs' --op, make_plan, local_shape, validate, the data
// and the checker.
//
// A new op: its plan file ending in its row (plan/ag_gemm.cpp is one), one enum value in
// collmm/types.hpp, one line in plan/ops.cpp, and its tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "collmm/algorithms.hpp"
#include "collmm/types.hpp"

namespace collmm {

// One term of a C row as the plan checker follows it: row a_row of rank a_rank's A (its local row,
// where A's rows are not split) times rank b_rank's B.
struct Product {
  int a_rank;
  int64_t a_row;
  int b_rank;
};

struct OpRow {
  Op op;
  const char* name;
  const char* formula;                                 // what rank r computes, for --op's help and messages
  std::vector<std::pair<Algo, PlanBuilder>> builders;  // one per algorithm of the algorithm table
  bool sums_over_ranks;  // C is a sum of every rank's partial (A's columns and B's rows are split)
  bool gathers_a;        // A's rows are split and gathered: rows of A travel, exactly, and the
                         // gathered A is an output
  bool takes_merge;      // --merge applies (where the algorithm's row takes it)
  bool takes_waves;      // --waves applies (where the algorithm's row has auto_waves)
  // Rank r's blocks of A, B and C and where they lie in the global matrices (B's as [K, N], the
  // layout left to local_shape).
  LocalShape (*blocks)(const Problem&, int rank);
  // The op's own checks of the split over the ranks, each problem a sentence.
  void (*validate)(const Problem&, std::vector<std::string>& problems);
  // The bytes one rank's link moves when the peers are played (cuda --play-peers): what it receives
  // and sends, pinned. in_size and out_size: an element of A and of C.
  int64_t (*played_link_bytes)(const Problem&, int64_t in_size, int64_t out_size);
  // The products C row t (local) of rank r must hold, each once: what the plan checker expects.
  std::vector<Product> (*c_row)(const Problem&, int rank, int64_t t);
};

// Every row, in the order of the enum; what `--op all` runs.
const std::vector<OpRow>& op_table();
const OpRow& op_row(Op);
// The names joined by `separator`: "ag_gemm, gemm_rs, gemm_ar".
std::string op_names(const std::string& separator = ", ");

// For the rows' own code. The rank whose block of `total` (split over `parts`) holds index i.
int block_owner(int64_t total, int parts, int64_t i);
// Adds "<dim>=<size> is smaller than the P ranks: <why>" where size < P (a row's validate).
void need_one_per_rank(const Problem&, const char* dim, int64_t size, const std::string& why,
                       std::vector<std::string>& problems);

}  // namespace collmm
