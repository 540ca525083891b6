// table.hpp: collmm-sim's predicted table (in the manner of nccl-tests, the columns of
// collmm-bench's measured table plus the model's) and its JSON.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collmm/sim.hpp"

namespace collmm {

// One row: its label (the --algo entry as collmm-bench names its row: "ring", "ring:pieces4h",
// "auto:ring"; algo_entries.hpp) and what the model predicts for it.
struct SimRow {
  std::string label;
  Prediction prediction;
};

void print_prediction_header(std::ostream&, const Profile&);
void print_prediction_row(std::ostream&, const SimRow&);
void print_prediction_summary(std::ostream&, const std::vector<SimRow>&);
// {"predicted": true, "profile": ..., "results": [...]}: a row starts with case_json's keys, then
// "label" and the predicted figures.
nlohmann::json predictions_json(const Profile&, const std::vector<SimRow>&);

}  // namespace collmm
