// timeline.cpp: RankRun step times + Plan step labels -> Timeline events.
#include "collmm/timeline.hpp"

namespace collmm {

Timeline make_timeline(const std::vector<Plan>& plans, const std::vector<RankRun>& runs) {
  Timeline t;
  if (!plans.empty()) {
    t.op = plans[0].problem.op;
    t.algo = plans[0].options.algo;
    t.world = plans[0].problem.world;
  }
  for (size_t i = 0; i < plans.size() && i < runs.size(); ++i) {
    const Plan& plan = plans[i];
    for (size_t s = 0; s < plan.steps.size() && s < runs[i].steps.size(); ++s) {
      const StepTime& st = runs[i].steps[s];
      if (st.start_us < 0) continue;
      const Step& step = plan.steps[s];
      t.events.push_back({plan.rank, step.lane, step.kind, step.index, step.chunk, st.start_us, st.end_us});
    }
  }
  return t;
}

}  // namespace collmm
