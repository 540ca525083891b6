// tuning.cpp: `--algo auto` (collmm/tuning.hpp): candidates simulated by the cost model and a
// measured tuning cache that overrides the model for the shapes it holds (the cache's file:
// tuning_cache.cpp).
#include "collmm/tuning.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "collmm/sim.hpp"

namespace collmm {

std::vector<PlanOptions> auto_candidates(const Problem& p) {
  std::vector<PlanOptions> candidates;
  auto add = [&](Algo a, int stages, int lanes, int merge = 1, int pieces = 1) {
    const PlanOptions o{a, stages, Post::comm_first, lanes, merge, pieces};
    validate(p, o);  // throws for the problem itself; per-candidate limits are checked above
    candidates.push_back(o);
  };
  if (p.world == 1) {  // nothing to overlap: the ring's one step is the plain GEMM on A (no gather copy)
    add(Algo::ring, 0, 1);
    return candidates;
  }
  add(Algo::sequential, 0, 1);
  const double pp = double(p.world) * p.world;
  for (int s : {2, 4, 8})
    if (p.world > 1 && s <= p.m / p.world && s * pp <= 4e6)
      for (int lanes : {1, 2}) add(Algo::pipelined, s, lanes);
  for (Algo a : {Algo::ring, Algo::bidir})
    for (int lanes : {1, 2}) add(a, 0, lanes);
  if (p.op == Op::ag_gemm)
    for (int merge : {2, 4})
      if (p.world > merge) add(Algo::ring, 0, 1, merge);
  for (Algo a : {Algo::ring, Algo::bidir})  // the ring's exposed edge in pieces
    for (int pieces : {2, 4})
      if (pieces <= edge_rows(p, {a})) add(a, 0, 1, 1, pieces);
  return candidates;
}

Choice choose(const Problem& p, Dtype dtype, const Profile& profile, const TuningCache* cache) {
  const std::vector<PlanOptions> candidates = auto_candidates(p);
  Choice c;
  auto simulate_us = [&](const PlanOptions& o) {
    return simulate(p, o, dtype, profile, StepFilter::all, false).time_us;
  };
  for (const PlanOptions& o : candidates) c.alternatives.push_back({o, simulate_us(o), -1});

  const std::vector<TuningEntry> measured = cache ? cache->find(p, dtype) : std::vector<TuningEntry>{};
  for (const TuningEntry& e : measured) {
    auto it = std::find_if(c.alternatives.begin(), c.alternatives.end(),
                           [&](const Alternative& a) { return a.options == e.options; });
    if (it == c.alternatives.end()) {  // a measured configuration the model did not list
      c.alternatives.push_back({e.options, simulate_us(e.options), -1});
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
    for (const Alternative& a : c.alternatives)
      if (a.measured_us >= 0 && (pick->measured_us < 0 || a.measured_us < pick->measured_us)) pick = &a;
  }
  c.options = pick->options;
  c.predicted_us = pick->predicted_us;
  c.measured_us = pick->measured_us;
  return c;
}

std::string print(const Choice& c) {
  std::ostringstream s;
  char line[160];
  std::snprintf(line, sizeof line,
                "# auto: %s stages=%d gemm_lanes=%d merge=%d pieces=%d (from the %s; predicted %.1f us",
                to_string(c.options.algo).c_str(), c.options.stages, c.options.gemm_lanes, c.options.merge,
                c.options.pieces, c.source.c_str(), c.predicted_us);
  s << line;
  if (c.measured_us >= 0) {
    std::snprintf(line, sizeof line, ", measured %.1f us", c.measured_us);
    s << line;
  }
  s << ")\n#   alternatives (predicted, fastest first):\n";
  for (const Alternative& a : c.alternatives) {
    std::snprintf(line, sizeof line, "#   %-10s stages=%-2d lanes=%d merge=%d pieces=%d  predicted %10.1f us",
                  to_string(a.options.algo).c_str(), a.options.stages, a.options.gemm_lanes, a.options.merge,
                  a.options.pieces, a.predicted_us);
    s << line;
    if (a.measured_us >= 0) {
      std::snprintf(line, sizeof line, "  measured %10.1f us", a.measured_us);
      s << line;
    }
    s << "\n";
  }
  return s.str();
}

}  // namespace collmm
