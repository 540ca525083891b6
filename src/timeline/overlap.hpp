// overlap.hpp: how much of the communication a run hid under its GEMMs, read off a
// Timeline (measured or predicted).
//
// Entry point for the front ends:
//   Overlap measure_overlap(const Timeline&);   // per rank and a job summary
//
// Per rank r: comm = the union of r's comm intervals (sendrecv, allgather, reduce_scatter, copy,
// add: TimelineEvent::counts_as_comm), gemm = the union of its GEMM intervals; hidden = |comm ∩ gemm|;
// fraction = hidden / |comm|. A rank with no comm time has fraction 0 (nothing was hidden) and is
// left out of the summary; the summary's mean and min are over the ranks that have comm time (0
// when none has).
#pragma once

#include <utility>
#include <vector>

#include "collmm/timeline.hpp"

namespace collmm {

struct RankOverlap {
  int rank = 0;
  double comm_us = 0;    // |union of comm intervals|
  double gemm_us = 0;    // |union of GEMM intervals|
  double hidden_us = 0;  // |comm ∩ gemm|
  double fraction = 0;   // hidden / comm
};

struct Overlap {
  std::vector<RankOverlap> ranks;  // ascending rank, one per rank that has events
  double mean_fraction = 0;
  double min_fraction = 0;
};

Overlap measure_overlap(const Timeline&);

// Helpers, exposed for tests: merge intervals [start, end) into a sorted disjoint union, and
// the length of the intersection of two such unions.
using Intervals = std::vector<std::pair<double, double>>;
Intervals interval_union(Intervals);
double length(const Intervals& sorted_disjoint);
double intersection_length(const Intervals& a, const Intervals& b);

}  // namespace collmm
