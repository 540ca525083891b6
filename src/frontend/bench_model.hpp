// bench_model.hpp: where collmm-bench meets the cost model (collmm_sim). The profile a run uses, the
// predicted time of a case (the same plans through simulate()), the --algo auto pick shared by
// every process, and the tuning cache that records what was measured.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench_case.hpp"
#include "collmm/profile.hpp"
#include "tuning.hpp"

namespace collmm {

// The built-in profile a backend's --algo auto and --calibrate start from when --profile is not
// given: cpu -> "cpu-2core", cuda -> "h200-nvlink", cuda --transport host -> "h200-host".
std::string default_profile_name(const BackendOptions&);
// --profile when given, else the backend's default. Throws UsageError for an unknown name or a bad file.
Profile profile_for(const BenchOptions&, GemmLibrary library);

// The slowest rank's simulated time of every rank's plan for (problem, options), the plans the
// backend runs (make_plan), in the bench's dtype.
double predicted_time_us(const Problem&, const PlanOptions&, Dtype, const Profile&);

// Work process 0 does alone while the others wait in the next collective (reading the tuning
// cache, waiting for its lock, writing it): called on every process. Process 0 runs `work` and
// ends the job, naming the work, if it outlives kLocalWorkBoundS. Every other process's next
// collective waits that much longer than --timeout, so the work's time is not taken for a peer's
// hang. Process 0, its work done, waits --timeout alone, so a peer stopped meanwhile ends the job
// within --timeout of process 0's end of the work.
constexpr int kLocalWorkBoundS = 180;  // two waits for the cache's lock (60 s each) and its read and write
void process0_local_work(HostComm&, const std::string& what, const std::function<void()>& work);

// The --algo auto pick of one op.
struct AutoPick {
  PlanOptions options;  // the pick's options, with post from the command line
  std::string source;   // "model" or "measured"
  std::string printed;  // print(Choice): the pick and its predicted alternatives
  Choice choice;        // the whole choice: the candidates auto times (measured_choice.hpp) come from it
};

// Process 0 chooses (choose() with the profile and, when the file exists, the tuning cache) and
// every process gets its pick (collective), so all ranks run the same plan even when only process
// 0 sees the cache file. Throws UsageError on process 0's errors only: call it where
// raise_if_any_process_failed follows (Bench::validate).
AutoPick choose_on_process0(HostComm&, const Problem&, const BenchOptions&, GemmLibrary library, std::string& error);

// The candidates --algo auto times for this pick (measured_choice.hpp's candidates_to_time, posted
// as --post says): none when needs_measuring says no (--auto-measure off, one candidate, or the
// cache times them all).
std::vector<Alternative> auto_timed_candidates(const BenchOptions&, const AutoPick&);

// Times them on the bench's inputs (collective: each prepared, uploaded, then warm-up + timed runs
// of the whole job, the slowest rank's median) and makes the fastest the pick (source "measured").
MeasuredChoice measure_auto_pick(Executor&, const BenchOptions&, Op, AutoPick&);

// Adds every measured row (op, M, N, K, P, dtype, plan options, time_us) to the cache
// file (under its lock, merged with what other jobs added, written atomically: update_tuning_cache),
// creating it when absent. Rows posted gemm-first are left out: --algo auto's candidates
// are all comm-first. Returns how many rows were recorded.
size_t record_measurements(const std::string& path, const std::vector<CaseResult>&);

}  // namespace collmm
