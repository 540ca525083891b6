// collmm/table_cells.hpp: the rows of the front ends' text tables (collmm-bench's, collmm-sim's) as
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

// One cell per field of the problem, the dtype, one per field of the options.
std::vector<Cell> case_cells(const Problem&, Dtype, const PlanOptions&);

// "#" and every cell's heading: a table's header line.
void print_heads(std::ostream&, const std::vector<Cell>&);
// " " and every cell's text: a row under that header. A text as wide as its column gets a space
// before it, so that it never runs into its neighbour.
void print_texts(std::ostream&, const std::vector<Cell>&);

}  // namespace collmm
