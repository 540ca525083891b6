// ops.cpp: the table of ops (collmm/ops.hpp), one row per op, each defined at the end of its plan
// file, and what is read from it: the ops' names, local shapes and the op's part of validate.
#include "collmm/ops.hpp"

#include <algorithm>

#include "enum_names.hpp"
#include "op_rows.hpp"

namespace collmm {

const std::vector<OpRow>& op_table() {
  static const std::vector<OpRow> rows{ag_gemm_row(), gemm_rs_row(), gemm_ar_row()};
  return rows;
}

const OpRow& op_row(Op op) {
  for (const OpRow& row : op_table())
    if (row.op == op) return row;
  throw std::logic_error("op " + std::to_string(static_cast<int>(op)) + " has no row in the table");
}

namespace {

const EnumNames<Op>& names() {
  static const EnumNames<Op> names = names_of_rows(op_table(), &OpRow::op);
  return names;
}

}  // namespace

const std::vector<Op>& all_ops() {
  static const std::vector<Op> ops = values_of_rows(op_table(), &OpRow::op);
  return ops;
}
std::string to_string(Op v) { return names().name(v); }
Op parse_op(const std::string& s) { return names().parse(s, "op"); }
void parse_field(const std::string& s, Op& v) { v = parse_op(s); }
size_t longest_name(Op) { return names().longest(); }

std::string op_names(const std::string& separator) {
  std::string text;
  for (const OpRow& row : op_table()) text += (text.empty() ? "" : separator) + row.name;
  return text;
}

int block_owner(int64_t total, int parts, int64_t i) {
  int q = 0;
  while (q + 1 < parts && block_offset(total, parts, q + 1) <= i) ++q;
  return q;
}

void need_one_per_rank(const Problem& p, const char* dim, int64_t size, const std::string& why,
                       std::vector<std::string>& problems) {
  if (size < p.world)
    problems.push_back(std::string(dim) + "=" + std::to_string(size) + " is smaller than the " +
                       std::to_string(p.world) + " ranks: " + why);
}

LocalShape local_shape(const Problem& p, int r) {
  LocalShape s = op_row(p.op).blocks(p, r);
  s.b_rows = p.b_layout == BLayout::kn ? s.gemm_k : s.gemm_n;
  s.b_cols = p.b_layout == BLayout::kn ? s.gemm_n : s.gemm_k;
  return s;
}

bool sums_over_ranks(Op op) { return op_row(op).sums_over_ranks; }
bool gathers_a(Op op) { return op_row(op).gathers_a; }
int64_t c_first_row(const Problem& p, int r) { return local_shape(p, r).c_row0; }

}  // namespace collmm
