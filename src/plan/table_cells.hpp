// table_cells.hpp: the rows of the front ends' text tables (collmm-bench's, collmm-sim's) as
// cells: a heading, a width and a text each. Every table starts with the case's cells: the
// Problem's fields, the dtype, then the PlanOptions' fields, each from its field list (types.hpp),
// so a new field is a new column in every table.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "collmm/types.hpp"

namespace collmm {

struct Cell {
  std::string head;
  int width;  // right-aligned in this many characters
  std::string text;
};

// One cell per field of the problem, the dtype, one per field of the options. The algo cell holds
// the row's label (an --algo entry as the user spells it: "ring:pieces4", "auto:ring"; where not
// given, algo_label of the options). So rows of one algorithm with other options are told apart.
// Its column is kLabelWidth wide, so that most labels line up.
constexpr int kLabelWidth = 18;
std::vector<Cell> case_cells(const Problem&, const PlanOptions&, Dtype, const std::string& label = "");

// "#" and every cell's heading: a table's header line.
void print_heads(std::ostream&, const std::vector<Cell>&);
// " " and every cell's text: a row under that header. A text as wide as its column gets a space
// before it, so that it never runs into its neighbour.
void print_texts(std::ostream&, const std::vector<Cell>&);

}  // namespace collmm
