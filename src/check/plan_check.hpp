// plan_check.hpp: the plan checker. It runs the plans of all P ranks symbolically, under the
// execution rules written at the top of plan.hpp, and proves what makes a schedule safe to run:
//
//  1. structure: waits name earlier steps and lanes exist. Every comm step is on lane 0 (so list
//     order is the order transfers are posted, which MPI and NCCL match by). Slices lie inside
//     their buffers, A and B are never written, and no step is empty. Shapes agree: GEMM rows and
//     widths, copy/add/transfer element counts, one row width on both sides (the data check
//     follows whole rows).
//  2. matching and no deadlock: the k-th send r->q has the k-th receive on q from r, of the same
//     size. Every rank's k-th collective is the same one with the same part sizes. A simulation
//     runs every step to its end: lane FIFO + waits; a sendrecv group ends once each of its
//     transfers met a posted counterpart, a collective once every rank posted it.
//  3. data: every row carries the multiset of terms it holds (which global A row, multiplied by
//     which rank's B). At the end, ag_gemm: C row i of rank r was written exactly once, by a GEMM
//     of global A row i with B_r, and the gathered A holds A row i in row i;
//     gemm_rs: C row t of rank r holds every rank's partial of global row (offset_r + t) exactly
//     once; gemm_ar: C row i of every rank holds every rank's partial of row i exactly once. Every
//     C row is written.
//  4. races: within a rank, two steps that are not ordered by lane order and waits (transitively)
//     must not touch overlapping rows of one buffer when either writes them.
//
// The errors are sentences for humans, each naming the rank, the step index and describe(step).
#pragma once

#include <string>
#include <vector>

#include "collmm/plan.hpp"

namespace collmm {

struct CheckReport {
  std::vector<std::string> errors;
  bool ok() const { return errors.empty(); }
  // "ok", or the error count and the first errors, one per line.
  std::string text(size_t max_lines = 30) const;
};

// all_ranks[q] must be rank q's plan, all for one Problem and PlanOptions.
CheckReport check_plans(const std::vector<Plan>& all_ranks);
// Builds every rank's plan (make_plan: throws UsageError for impossible options) and checks them.
CheckReport check_problem(const Problem&, const PlanOptions&);

}  // namespace collmm
