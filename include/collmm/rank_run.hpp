// collmm/rank_run.hpp: what one iteration of one rank leaves: its wall time and, when asked for,
// the start and end of every step of its plan. Measured by an executor or predicted by the
// simulator; the timeline (collmm/timeline.hpp) is made from these.
#pragma once

#include <vector>

namespace collmm {

struct StepTime {
  double start_us = -1, end_us = -1;  // from the iteration's start on this rank; -1: not run
};

struct RankRun {
  int rank = 0;
  double total_us = 0;          // this rank's wall time for the iteration
  std::vector<StepTime> steps;  // parallel to plan.steps (empty when timestamps were not asked for)
};

}  // namespace collmm
