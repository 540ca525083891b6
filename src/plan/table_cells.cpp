// table_cells.cpp: the case's cells of a table row, from the field lists.
#include "table_cells.hpp"

#include <algorithm>
#include <iomanip>

#include "algo_entries.hpp"

namespace collmm {
namespace {

// Integers: room for 6 digits; an enum: its longest name. Never narrower than the heading.
constexpr size_t kIntegerDigits = 6;

template <class V>
void append_cells(const V& value, std::vector<Cell>& cells) {
  for_each_field(value, [&](const Field& f, const auto& v) {
    size_t room = kIntegerDigits;
    if constexpr (std::is_enum_v<std::decay_t<decltype(v)>>) room = longest_name(v);
    const size_t width = std::max(room, std::string(f.head).size()) + 1;
    cells.push_back({f.head, static_cast<int>(width), field_text(v)});
  });
}

}  // namespace

std::vector<Cell> case_cells(const Problem& p, const PlanOptions& o, Dtype dtype, const std::string& label) {
  std::vector<Cell> cells;
  append_cells(p, cells);
  cells.push_back({"dtype", static_cast<int>(std::max<size_t>(longest_name(dtype), 5)) + 1, to_string(dtype)});
  append_cells(o, cells);
  for (Cell& c : cells)
    if (c.head == "algo") c = {c.head, kLabelWidth + 1, label.empty() ? algo_label(o) : label};
  return cells;
}

void print_heads(std::ostream& out, const std::vector<Cell>& cells) {
  out << "#";
  for (const Cell& c : cells) out << std::setw(c.width) << c.head;
  out << "\n";
}

void print_texts(std::ostream& out, const std::vector<Cell>& cells) {
  out << " ";
  for (const Cell& c : cells) {
    if (c.text.size() >= static_cast<size_t>(c.width)) out << " ";
    out << std::setw(c.width) << c.text;
  }
  out << "\n";
}

}  // namespace collmm
