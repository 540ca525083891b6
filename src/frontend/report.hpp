// report.hpp: collmm-bench's outputs from the results: the table in the manner of nccl-tests (one
// row per case, '#' header and summary lines) and the --json document. Both are built from one
// column list each, so a new figure is one more entry: hidden% (measured overlap) always, pred_us
// and pred/meas with --profile.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_case.hpp"

namespace collmm {

struct RunInfo {
  std::string backend;
  int world = 1;
  int procs = 1;
  std::string timing_note;  // the executor's, printed when not empty
  bool predicted = false;   // --profile given: the pred_us and pred/meas columns, "predicted_us"
};

void print_table_header(std::ostream&, const BenchOptions&, const RunInfo&);
void print_table_row(std::ostream&, const CaseResult&, bool predicted = false);
// A case whose host issue took at least this share of its time was paced by the host.
constexpr double kHostPaced = 0.9;
// '# Out of bounds values : N FAILED|OK', the average speedup of the overlapped algorithms, and the
// cases the host paced (CaseResult::issue_us >= kHostPaced x time_us), where there are any.
void print_table_summary(std::ostream&, const std::vector<CaseResult>&);
// --rounds: one comment line per round of an op, "# round 2/3 of ag_gemm, us: sequential 812.4, ring 530.1".
void print_round(std::ostream&, Op, int round, int rounds, const std::vector<std::pair<std::string, double>>& times);

// {"collmm_version", "backend", "world_size", "results": [...]}: a row starts with case_json's keys
// (src/sim/tuning.hpp: the problem's fields, "dtype", the plan options' fields), then "steps" (the
// plan's step count) and the figures; undefined figures (NaN, or #wrong without --check) are null.
// Beside those keys each row has "label", "options" (the plan options as the tuning cache writes
// them), "overlap_hidden_fraction" (mean over ranks with comm), "_min", "_per_rank", and with
// --profile "predicted_us"; an --algo auto row has "chosen_by" ("model" or "measured"). On a
// backend that enqueues its steps (cuda, without --graph) each row has "issue_us" and "issue_ops"
// ({"gemms", "others"}) and the document "host_issue" ({"issue_us", "gemm_issue_us", "shared",
// "cases"}: fit_issue over the rows, auto's left out).
nlohmann::json results_json(const RunInfo&, const std::vector<CaseResult>&);

// Total #wrong over checked cases.
int64_t total_wrong(const std::vector<CaseResult>&);

}  // namespace collmm
