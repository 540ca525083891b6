// measured_choice.hpp: an `auto` that measures. The cost model's choice (tuning.hpp) is the
// start. Its best few candidates (predicted within `margin` of the best, at most `max_candidates`,
// the pick itself and sequential always among them) are timed on the real inputs the first time a
// shape runs. The fastest (a tie within 1% to the fewest host steps: pick_measured) runs from then
// on. Every process takes the same decision: a candidate's time is the slowest process's, agreed
// through the HostComm. So a rank whose clock or load differs cannot pick another plan than its
// peers.
//
//   choice   = choose(problem, dtype, profile, cache)           // the model's (or the cache's) pick
//   to_time  = candidates_to_time(choice, settings)            // <= max_candidates, the pick and sequential in
//   measured = measure_choice(to_time, time_candidate, host, settings)
//   run measured.options; record tuning_entries(...) into the cache (source "auto")
//
// The cost of the first call of a shape: for each timed candidate, its plan prepared once, then
// `warmup` + `iters` runs (default 1 + 3, at most 4 candidates: 16 runs). Then, only where two or
// more candidates came within 5% of the fastest, those again in up to 2 more passes (at most 32
// runs more, 8 with two close candidates). A few small exchanges between the processes. Later
// calls of the shape run the pick at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "collmm/measure_settings.hpp"
#include "host_comm.hpp"
#include "tuning.hpp"

namespace collmm {

struct TimedCandidate {
  PlanOptions options;
  double predicted_us = 0;
  double time_us = 0;           // the median over its passes of the slowest process's time
  std::vector<double> pass_us;  // the slowest process's time in each pass that timed it
  std::vector<double> proc_us;  // every process's time (the median over its passes), in process order
  int steps = 0;                // its host steps per call (Alternative::steps)
};

struct MeasuredChoice {
  PlanOptions options;                // the fastest timed candidate, or of those tied with it the one of
                                      // fewest host steps (MeasureSettings::tie_margin)
  double time_us = 0;                 // its time
  std::vector<TimedCandidate> timed;  // in the order timed (fastest predicted first)
};

// The candidates to time, from a Choice's alternatives, fastest predicted first: those predicted
// within the margin of the best, at most max_candidates, with the choice's own pick (the model's
// best, or a tuning cache's fastest measured) and sequential always among them (in place of the
// last others where the bound is reached). One candidate only (one rank) is returned alone.
std::vector<Alternative> candidates_to_time(const Choice&, const MeasureSettings&);

// Whether auto times anything for this choice: measuring is on, there are two candidates or more,
// and the choice does not already hold a measured time (tuning cache) for every one of them.
bool needs_measuring(const Choice&, const MeasureSettings&);

// This process's time of one candidate, in microseconds: `warmup` runs, then the median of `iters`
// runs. Collective: every process calls it for the same candidate at the same point.
using TimeCandidate = std::function<double(const PlanOptions&, int warmup, int iters)>;

// Times every candidate and agrees each one's time as the slowest process's. Collective: the
// candidates must be the same on every process (checked first, a UsageError on every process when
// they differ). Then it runs the runoff among the close ones (MeasureSettings) and picks the
// fastest (a tie to the fewest host steps). Every decision rests on agreed times: every process
// returns the same MeasuredChoice.
MeasuredChoice measure_choice(const std::vector<Alternative>& candidates, const TimeCandidate& time, HostComm& host,
                              const MeasureSettings& settings);

// "# auto measured: 3 candidates, 1 warm-up + 3 timed runs each ..." then one line per candidate
// (predicted, measured, the pick marked) and the pick.
std::string print(const MeasuredChoice&, const MeasureSettings&);

// The timed candidates as tuning-cache entries of this problem (source "auto").
std::vector<TuningEntry> tuning_entries(const Problem&, Dtype, const MeasuredChoice&);

// A Choice as JSON and back: what process 0 sends the others so that all start from its choice.
nlohmann::json to_json(const Choice&);
Choice choice_from_json(const nlohmann::json&);

// The per-process memory of auto's decisions, keyed by the problem and dtype (ProblemKey), and the
// whole decision on its first call. Process 0's choose() (with the tuning cache at `cache_path`
// when it names a file that exists) is shared with every process. Then, where needs_measuring, the
// candidates are timed (measure_choice) and, with a cache path, recorded into it by process 0
// (update_tuning_cache). Collective on a shape's first call; later calls only look it up.
class AutoChooser {
 public:
  using Decision = AutoDecision;
  const Decision& decide(HostComm& host, const Problem& problem, Dtype dtype, const Profile& profile,
                         const std::string& cache_path, const MeasureSettings& settings, const TimeCandidate& time);
  size_t size() const { return decided_.size(); }

 private:
  std::map<ProblemKey, Decision> decided_;
};

}  // namespace collmm
