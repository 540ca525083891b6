// tuning.cpp: `--algo auto` (src/sim/tuning.hpp): candidates simulated by the cost model and a
// measured tuning cache that overrides the model for the shapes it holds (the cache's file:
// tuning_cache.cpp).
#include "tuning.hpp"
#include "cost_model.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "collmm/algorithms.hpp"
#include "collmm/plan.hpp"
#include "collmm/sim.hpp"

namespace collmm {

Choice choose(const Problem& p, Dtype dtype, const Profile& profile, const TuningCache* cache) {
  const std::vector<PlanOptions> candidates = auto_candidates(p);
  Choice c;
  auto simulate_us = [&](const PlanOptions& o) {
    return simulate(p, o, dtype, profile, StepFilter::all, false).time_us;
  };
  // The steps the host issues per call: those of the lowered plan where the profile's transport
  // lowers collectives into rings (the host bed).
  const bool lowered = lowers_collectives(profile);
  auto steps = [&](const PlanOptions& o) {
    const Plan plan = make_plan(p, o, 0);
    return static_cast<int>((lowered ? lower_collectives(plan).plan : plan).steps.size());
  };
  for (const PlanOptions& o : candidates) c.alternatives.push_back({o, simulate_us(o), -1, steps(o)});

  const std::vector<TuningEntry> measured = cache ? cache->find(p, dtype) : std::vector<TuningEntry>{};
  for (const TuningEntry& e : measured) {
    auto it = std::find_if(c.alternatives.begin(), c.alternatives.end(),
                           [&](const Alternative& a) { return a.options == e.options; });
    if (it == c.alternatives.end()) {  // a measured configuration the model did not list
      c.alternatives.push_back({e.options, simulate_us(e.options), -1, steps(e.options)});
      it = c.alternatives.end() - 1;
    }
    it->measured_us = it->measured_us < 0 ? e.time_us : std::min(it->measured_us, e.time_us);
  }
  std::stable_sort(c.alternatives.begin(), c.alternatives.end(),
                   [](const Alternative& a, const Alternative& b) { return a.predicted_us < b.predicted_us; });

  const Alternative* pick = &c.alternatives.front();
  c.source = "model";
  if (!measured.empty()) {
    c.source = "measured";
    std::vector<const Alternative*> timed;
    std::vector<double> times;
    std::vector<int> counts;
    for (const Alternative& a : c.alternatives)
      if (a.measured_us >= 0) timed.push_back(&a), times.push_back(a.measured_us), counts.push_back(a.steps);
    pick = timed[pick_measured(times, counts)];
  }
  c.options = pick->options;
  c.predicted_us = pick->predicted_us;
  c.measured_us = pick->measured_us;
  return c;
}

size_t pick_measured(const std::vector<double>& times, const std::vector<int>& steps, double tie_margin) {
  if (times.empty() || steps.size() != times.size()) throw std::logic_error("pick_measured: times and steps differ");
  size_t best = 0;
  for (size_t i = 1; i < times.size(); ++i)
    if (times[i] < times[best]) best = i;
  if (steps[best] <= 0) return best;  // steps not known: the fastest
  const double tie = times[best] * (1 + tie_margin);
  for (size_t i = 0; i < times.size(); ++i)
    if (times[i] <= tie && steps[i] > 0 &&
        (steps[i] < steps[best] || (steps[i] == steps[best] && times[i] < times[best])))
      best = i;
  return best;
}

std::string options_after_name(const PlanOptions& o) {
  std::string text;
  for_each_field(o, [&](const Field& f, const auto& v) {
    if (std::string(f.key) != "algo") text += std::string(" ") + f.key + "=" + field_text(v);
  });
  return text;
}

std::string print(const Choice& c) {
  std::ostringstream s;
  char line[256];
  std::snprintf(line, sizeof line, "# auto: %s%s (from the %s; predicted %.1f us", to_string(c.options.algo).c_str(),
                options_after_name(c.options).c_str(), c.source.c_str(), c.predicted_us);
  s << line;
  if (c.measured_us >= 0) {
    std::snprintf(line, sizeof line, ", measured %.1f us", c.measured_us);
    s << line;
  }
  s << ")\n#   alternatives (predicted, fastest first):\n";
  for (const Alternative& a : c.alternatives) {
    std::snprintf(line, sizeof line, "#   %-10s%s  predicted %10.1f us", to_string(a.options.algo).c_str(),
                  options_after_name(a.options).c_str(), a.predicted_us);
    s << line;
    if (a.measured_us >= 0) {  // the cache's times decide (pick_measured): each with its host steps
      std::snprintf(line, sizeof line, "  measured %10.1f us  (%d host steps)", a.measured_us, a.steps);
      s << line;
    }
    s << "\n";
  }
  return s.str();
}

}  // namespace collmm
