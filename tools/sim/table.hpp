// table.hpp: collmm-sim's predicted table (in the manner of nccl-tests, the columns of
// collmm-bench's measured table plus the model's) and its JSON.
#pragma once

#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "collmm/sim.hpp"

namespace collmm {

void print_prediction_header(std::ostream&, const Profile&);
void print_prediction_row(std::ostream&, const Prediction&);
void print_prediction_summary(std::ostream&, const std::vector<Prediction>&);
nlohmann::json predictions_json(const Profile&, const std::vector<Prediction>&);

}  // namespace collmm
