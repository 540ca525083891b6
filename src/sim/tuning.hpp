// tuning.hpp: `--algo auto`: the algorithm, stages and GEMM lane count for one shape and P,
// chosen from the cost model and refined by a measured tuning cache.
//
// Entry points for the front ends:
//   TuningCache load_tuning_cache(path);  save_tuning_cache(cache, path);
//   Choice choose(problem, dtype, profile, cache_or_nullptr);
//   std::string print(const Choice&);     // the pick and its predicted alternatives
//
// The candidates are auto_candidates (collmm/algorithms.hpp: each algorithm's row says its own).
// Every candidate is simulated (collmm/sim.hpp); the model's pick is the fastest. When the cache
// holds measurements of this exact (op, M, N, K, P, B layout, dtype), the pick is the fastest
// measured configuration instead, whatever the model says. That is source "measured"; within 1%
// of it, the one of fewest host steps (pick_measured). With one rank the only candidate is the
// ring: nothing to overlap, and its one step is the plain GEMM on A (measured on the H200 through
// the PyTorch op: sequential's local gather copy cost 4-9%).
//
// The cache file (JSON): {"entries": [{"op": "ag_gemm", "m": 8192, "n": 8192, "k": 8192,
//   "world_size": 8, "b_layout": "kn", "dtype": "bf16", "algo": "ring", "stages": 0, "post": "comm-first",
//   "gemm_lanes": 1, "merge": 1, "pieces": 1, "piece_sizes": "equal", "time_us": 1234.5,
//   "source": "bench"}, ...]}: the shape, then the plan options as to_json(PlanOptions) writes them
//   (an absent option or B layout: its default, kn for B; an absent source: bench).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collmm/algorithms.hpp"
#include "collmm/measure_settings.hpp"
#include "collmm/profile.hpp"
#include "collmm/types.hpp"

namespace collmm {

// PlanOptions as JSON: {"algo": "ring", "stages": 0, "post": "comm-first", "gemm_lanes": 1,
// "merge": 1, "pieces": 1, "piece_sizes": "equal"}: PlanOptions' field list (types.hpp). Reading: a
// required key must be there, an absent other key is its default; a value out of the field's range
// is a UsageError naming the key.
nlohmann::json to_json(const PlanOptions&);
PlanOptions plan_options_from_json(const nlohmann::json&);
// The Problem the same way: {"op": "ag_gemm", "m": 64, "n": 64, "k": 64, "world_size": 4, "b_layout": "kn"}.
nlohmann::json to_json(const Problem&);
// The keys a row of the front ends' JSON (collmm-bench's, collmm-sim's) starts with: the problem's
// fields, "dtype", then the plan options' fields, each from its field list.
nlohmann::json case_json(const Problem&, const PlanOptions&, Dtype);

// One measurement: the shape, P and dtype, and the plan options it was run with. The shape and
// the options together are its key in the cache.
struct TuningEntry {
  Problem problem;  // its JSON keys: Problem's field list (types.hpp), B layout included
  Dtype dtype = Dtype::bf16;
  PlanOptions options;
  double time_us = 0;            // measured
  std::string source = "bench";  // "bench": a collmm-bench row; "auto": auto's first-call timing (measured_choice.hpp)
};

struct TuningCache {
  std::vector<TuningEntry> entries;
  // The entries of exactly this problem (op, M, N, K, P, B layout) and dtype.
  std::vector<TuningEntry> find(const Problem&, Dtype) const;
  // Adds a measurement, replacing one of the same configuration.
  void record(const TuningEntry&);
};
// The cache file (tuning_cache.cpp). Every entry is checked: a known op, B layout and dtype, sizes
// and P within their fields' ranges, plan options that plan_options_from_json accepts, a time > 0.
// A bad one is a UsageError naming the file and the entry ("tuning cache F: entry 3: ..."). Text
// that is not JSON is one naming the place ("... is not valid JSON: parse error at line 2, ...").
// An empty file (no bytes, or white space only) is an empty cache, as a missing one is.
TuningCache parse_tuning_cache(const std::string& text, const std::string& path);
TuningCache load_tuning_cache(const std::string& path);  // throws UsageError on a bad or unreadable file
// Writes the whole cache atomically: a temporary file beside it, then rename.
void save_tuning_cache(const TuningCache&, const std::string& path);
// What several jobs sharing one cache do: under an exclusive lock (flock on "<path>.lock", waited
// for up to `lock_timeout_s`), reads what the file holds now (another writer's entries too),
// records `entries` into it and saves it atomically. Nothing another writer added is lost and no
// reader ever sees a half-written file. Throws std::runtime_error when the lock is not had in time
// or the file cannot be written; UsageError when the file there is not a tuning cache.
void update_tuning_cache(const std::string& path, const std::vector<TuningEntry>& entries, int lock_timeout_s = 60);

struct Alternative {
  PlanOptions options;
  double predicted_us = 0;
  double measured_us = -1;  // from the cache; -1 when not measured
  int steps = 0;            // the steps the host issues per call: rank 0's plan's, lowered where the profile's
                            // transport lowers collectives (lowers_collectives); 0: not known
};

struct Choice {
  PlanOptions options;  // the pick
  double predicted_us = 0;
  double measured_us = -1;
  std::string source;                     // "model" or "measured"
  std::vector<Alternative> alternatives;  // every candidate, fastest predicted first
};

Choice choose(const Problem&, Dtype, const Profile&, const TuningCache* cache = nullptr);

// The one rule for picking among measured times (auto's runoff, and a tuning cache's entries):
// the fastest, except that times within (1 + tie_margin) x the fastest are a tie, which goes to
// the plan of fewest host steps (known, > 0): the same device time within the noise, less host work
// per call. `times[i]` and `steps[i]` are candidate i's; returns its index (times not empty).
size_t pick_measured(const std::vector<double>& times, const std::vector<int>& steps, double tie_margin = kTieMargin);
std::string print(const Choice&);
// Every option but the algorithm, from PlanOptions' field list (types.hpp), as print writes them:
// " stages=0 post=comm-first gemm_lanes=1 merge=1 pieces=1 piece_sizes=equal".
std::string options_after_name(const PlanOptions&);

}  // namespace collmm
