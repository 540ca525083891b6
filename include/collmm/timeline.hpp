// collmm/timeline.hpp: one iteration of every rank as a list of timed events, the common input of
// the Chrome trace, the SVG picture and the overlap metric; measured (from RankRun) or predicted
// (collmm-sim).
#pragma once

#include <string>
#include <vector>

#include "collmm/plan.hpp"
#include "collmm/rank_run.hpp"

namespace collmm {

struct TimelineEvent {
  int rank = 0;
  int lane = 0;
  StepKind kind = StepKind::gemm;
  int index = -1;  // the algorithm's step or stage
  int chunk = -1;
  double start_us = 0, end_us = 0;
  bool counts_as_comm() const { return collmm::counts_as_comm(kind); }
};

struct Timeline {
  Op op{};
  Algo algo = Algo::ring;
  int world = 1;
  std::vector<TimelineEvent> events;
};

// Events of the steps that ran (start >= 0); plans[i] and runs[i] belong to the same rank.
Timeline make_timeline(const std::vector<Plan>& plans, const std::vector<RankRun>& runs);

}  // namespace collmm
