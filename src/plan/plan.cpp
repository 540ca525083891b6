// plan.cpp: the Plan container, the dispatch from (op, algo) to its builder, and a readable dump.
#include "collmm/plan.hpp"

#include <sstream>

namespace collmm {

std::string to_string(Role r) {
  switch (r) {
    case Role::a: return "A";
    case Role::b: return "B";
    case Role::c: return "C";
    case Role::gathered: return "gathered";
    case Role::work: return "work";
  }
  return "?";
}

bool written_by_run(Role r) { return r == Role::c || r == Role::gathered || r == Role::work; }

int find_buffer(const Plan& plan, Role role) {
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].role == role) return static_cast<int>(b);
  return -1;
}

std::string to_string(StepKind k) {
  switch (k) {
    case StepKind::gemm: return "gemm";
    case StepKind::copy: return "copy";
    case StepKind::add: return "add";
    case StepKind::sendrecv: return "sendrecv";
    case StepKind::allgather: return "allgather";
    case StepKind::reduce_scatter: return "reduce_scatter";
  }
  return "?";
}

bool is_transfer(StepKind k) {
  return k == StepKind::sendrecv || k == StepKind::allgather || k == StepKind::reduce_scatter;
}

bool counts_as_comm(StepKind k) { return k != StepKind::gemm; }

bool only_fills_output(const Plan& plan, int i) {
  const Step& c = plan.steps.at(static_cast<size_t>(i));
  if (c.kind != StepKind::copy) return false;
  auto overlaps = [&](const Slice& s) {
    return s.buf == c.out.buf && s.row < c.out.row + c.out.rows && c.out.row < s.row + s.rows;
  };
  for (size_t j = static_cast<size_t>(i) + 1; j < plan.steps.size(); ++j) {
    const Step& s = plan.steps[j];
    if (overlaps(s.a)) return false;  // read by a gemm, copy or add; an allgather's contribution
    for (const Transfer& t : s.sends)
      if (overlaps(t.slice)) return false;
    if (s.kind == StepKind::reduce_scatter)
      for (const Slice& part : s.parts)
        if (overlaps(part)) return false;
  }
  return true;
}

int Plan::add_buffer(Role role, int64_t rows, int64_t cols) {
  buffers.push_back({role, rows, cols});
  return static_cast<int>(buffers.size()) - 1;
}

int Plan::push(Step s) {
  steps.push_back(std::move(s));
  return static_cast<int>(steps.size()) - 1;
}

Plan empty_plan(const Problem& p, const PlanOptions& o, int rank) {
  Plan plan;
  plan.problem = p;
  plan.options = o;
  plan.rank = rank;
  plan.lanes = 1 + o.gemm_lanes;
  const LocalShape s = local_shape(p, rank);
  plan.add_buffer(Role::a, s.a_rows, s.a_cols);
  plan.add_buffer(Role::b, s.b_rows, s.b_cols);
  plan.add_buffer(Role::c, s.c_rows, s.c_cols);
  return plan;
}

Step local_step(StepKind kind, int lane, Slice out, Slice a, int index, int chunk, std::vector<int> waits) {
  Step s;
  s.kind = kind;
  s.lane = lane;
  s.out = out;
  s.a = a;
  s.index = index;
  s.chunk = chunk;
  s.waits = std::move(waits);
  return s;
}

Plan make_plan(const Problem& p, const PlanOptions& o, int rank) {
  validate(p, o);
  if (rank < 0 || rank >= p.world)
    throw UsageError("rank " + std::to_string(rank) + " outside world of " + std::to_string(p.world));
  return builder(p.op, o.algo)(p, o, rank);
}

static std::string slice_str(const Slice& s) {
  std::ostringstream out;
  out << "buf" << s.buf << "[" << s.row << ":" << s.row + s.rows << "]";
  return out.str();
}

std::string describe(const Step& s) {
  std::ostringstream out;
  out << "lane " << s.lane << " " << to_string(s.kind);
  if (s.index >= 0) out << " step " << s.index;
  if (s.chunk >= 0) out << " chunk " << s.chunk;
  switch (s.kind) {
    case StepKind::gemm:
      out << ": " << slice_str(s.out) << (s.accumulate ? " += " : " = ") << slice_str(s.a) << " @ B";
      break;
    case StepKind::copy:
    case StepKind::add:
      out << ": " << slice_str(s.out) << (s.kind == StepKind::add ? " += " : " = ") << slice_str(s.a);
      break;
    case StepKind::sendrecv:
      out << ":";
      for (auto& t : s.sends) out << " send " << slice_str(t.slice) << "->" << t.peer;
      for (auto& t : s.recvs) out << " recv " << slice_str(t.slice) << "<-" << t.peer;
      break;
    case StepKind::allgather:
      out << ": " << slice_str(s.a) << " into";
      for (auto& q : s.parts) out << " " << slice_str(q);
      break;
    case StepKind::reduce_scatter:
      out << ":";
      for (auto& q : s.parts) out << " " << slice_str(q);
      out << " into " << slice_str(s.out);
      break;
  }
  if (!s.waits.empty()) {
    out << " (waits";
    for (int w : s.waits) out << " " << w;
    out << ")";
  }
  return out.str();
}

std::string describe(const Plan& plan) {
  std::ostringstream out;
  out << to_string(plan.problem.op) << " " << to_string(plan.options.algo) << " rank " << plan.rank << "/"
      << plan.problem.world << " M=" << plan.problem.m << " N=" << plan.problem.n << " K=" << plan.problem.k
      << " lanes=" << plan.lanes << "\n";
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    out << "  buf" << b << " " << to_string(plan.buffers[b].role) << " [" << plan.buffers[b].rows << ", "
        << plan.buffers[b].cols << "]\n";
  for (size_t i = 0; i < plan.steps.size(); ++i) out << "  " << i << ": " << describe(plan.steps[i]) << "\n";
  return out.str();
}

}  // namespace collmm
