// report.hpp: collmm-bench's outputs from the results: the table in the manner of nccl-tests (one
// row per case, '#' header and summary lines) and the --json document. Both are built from one
// column list each, so a new figure (e.g. measured overlap, issue 4) is one more entry.
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
};

void print_table_header(std::ostream&, const BenchOptions&, const RunInfo&);
void print_table_row(std::ostream&, const CaseResult&);
// '# Out of bounds values : N FAILED|OK' and the average speedup of the overlapped algorithms.
void print_table_summary(std::ostream&, const std::vector<CaseResult>&);

// {"collmm_version", "backend", "world_size", "results": [{"op", "algo", "m", ...}]}; undefined
// figures (NaN, or #wrong without --check) are null.
nlohmann::json results_json(const RunInfo&, const std::vector<CaseResult>&);

// Total #wrong over checked cases.
int64_t total_wrong(const std::vector<CaseResult>&);

}  // namespace collmm
