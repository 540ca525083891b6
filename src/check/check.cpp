// check.cpp: the plan checker's entry points (plan_check.hpp) and what its passes share: step
// labels, the rows each step reads and writes, and the report's text.
#include <sstream>

#include "check_internal.hpp"
#include "plan_check.hpp"

namespace collmm {
namespace check {

std::string where(const Plan& plan, int step) {
  std::string s = "rank " + std::to_string(plan.rank) + " step " + std::to_string(step);
  if (step >= 0 && step < static_cast<int>(plan.steps.size())) s += " (" + describe(plan.steps[step]) + ")";
  return s;
}

std::vector<Access> accesses(const Step& s) {
  std::vector<Access> acc;
  switch (s.kind) {
    case StepKind::gemm:
    case StepKind::copy: acc = {{s.a, false}, {s.out, true}}; break;
    case StepKind::add:  // reads out too; a write already conflicts with every other access
      acc = {{s.a, false}, {s.out, true}};
      break;
    case StepKind::sendrecv:
      for (const Transfer& t : s.sends) acc.push_back({t.slice, false});
      for (const Transfer& t : s.recvs) acc.push_back({t.slice, true});
      break;
    case StepKind::allgather:
      acc.push_back({s.a, false});
      for (const Slice& part : s.parts) acc.push_back({part, true});
      break;
    case StepKind::reduce_scatter:
      for (const Slice& part : s.parts) acc.push_back({part, false});
      acc.push_back({s.out, true});
      break;
  }
  return acc;
}

bool overlap(const Slice& x, const Slice& y) {
  return x.buf == y.buf && x.rows > 0 && y.rows > 0 && x.row < y.row + y.rows && y.row < x.row + x.rows;
}

}  // namespace check

std::string CheckReport::text(size_t max_lines) const {
  if (ok()) return "ok";
  std::ostringstream out;
  out << errors.size() << " error(s):\n";
  for (size_t i = 0; i < errors.size() && i < max_lines; ++i) out << "  " << errors[i] << "\n";
  if (errors.size() > max_lines) out << "  ... and " << errors.size() - max_lines << " more\n";
  return out.str();
}

CheckReport check_plans(const std::vector<Plan>& all_ranks) {
  CheckReport report;
  if (!check::check_structure(all_ranks, report.errors)) return report;
  const check::Matching matching = check::match_comm(all_ranks, report.errors);
  check::check_races(all_ranks, report.errors);
  check::DataFlow flow(all_ranks);
  if (check::run_symbolic(all_ranks, matching, flow, report.errors)) flow.check_final(report.errors);
  return report;
}

CheckReport check_problem(const Problem& p, const PlanOptions& o) {
  std::vector<Plan> plans;
  for (int r = 0; r < p.world; ++r) plans.push_back(make_plan(p, o, r));
  return check_plans(plans);
}

}  // namespace collmm
