// structure.cpp: the plan checker's first pass. Every rank's plan is for the same problem and
// options, and every step is well formed on its own. Its lane exists (lane 0 for every comm
// step), it waits only for earlier steps, and its slices lie inside their buffers. Its shapes agree:
// rows * cols element counts, with the widths taken from the buffers, and one width on both sides
// (the data check follows whole rows). It is not empty, A and B are never written, and no step
// writes rows that it also reads or writes through another of its slices.
#include <sstream>

#include "check_internal.hpp"

namespace collmm::check {
namespace {

bool is_input(Role r) { return r == Role::a || r == Role::b || r == Role::gathered; }

std::string rows_str(const Slice& s) {
  std::ostringstream out;
  out << "buf" << s.buf << "[" << s.row << ":" << s.row + s.rows << "]";
  return out.str();
}

// The checks of one step; `fatal` is set when later passes could not run on it.
struct StepCheck {
  const Plan& plan;
  int i;
  Errors& errors;
  bool fatal = false;

  void fail(const std::string& msg, bool is_fatal = false) {
    errors.push_back(where(plan, i) + ": " + msg);
    fatal = fatal || is_fatal;
  }
  const BufferSpec& buffer(const Slice& s) const { return plan.buffers[static_cast<size_t>(s.buf)]; }
  int64_t width(const Slice& s) const { return buffer(s).cols; }

  bool in_bounds(const Slice& s, const std::string& what) {
    if (s.buf < 0 || s.buf >= static_cast<int>(plan.buffers.size())) {
      fail(what + " names buffer " + std::to_string(s.buf) + ", which does not exist", true);
      return false;
    }
    if (s.row < 0 || s.rows < 0 || s.row + s.rows > buffer(s).rows) {
      fail(what + " " + rows_str(s) + " lies outside its buffer of " + std::to_string(buffer(s).rows) + " rows", true);
      return false;
    }
    return true;
  }
  // `out` receives the elements of `in`: same count, same width, same element type.
  void same_elements(const Slice& out, const Slice& in, const std::string& what) {
    const int64_t n_out = out.rows * width(out), n_in = in.rows * width(in);
    if (n_out != n_in)
      fail(what + ": " + rows_str(in) + " has " + std::to_string(n_in) + " elements, " + rows_str(out) + " has " +
           std::to_string(n_out));
    else if (width(out) != width(in))
      fail(what + ": rows of " + std::to_string(width(in)) + " and of " + std::to_string(width(out)) +
           " elements (the data check follows whole rows)");
    if (is_input(buffer(out).role) != is_input(buffer(in).role))
      fail(what + ": " + to_string(buffer(in).role) + " and " + to_string(buffer(out).role) +
           " hold different element types");
  }

  void run() {
    const Step& s = plan.steps[static_cast<size_t>(i)];
    if (s.lane < 0 || s.lane >= plan.lanes)
      fail("lane " + std::to_string(s.lane) + " outside [0, " + std::to_string(plan.lanes) + ")", true);
    for (int w : s.waits)
      if (w < 0 || w >= i) fail("waits for step " + std::to_string(w) + ", which is not an earlier step", true);
    if (s.kind != StepKind::sendrecv && !(s.sends.empty() && s.recvs.empty()))
      fail("a " + to_string(s.kind) + " step carries sends or receives", true);
    if (s.kind != StepKind::allgather && s.kind != StepKind::reduce_scatter && !s.parts.empty())
      fail("a " + to_string(s.kind) + " step carries collective parts", true);
    // MPI and NCCL match transfers (and collectives) in the order a rank posts them; that is
    // list order, which the matching assumes, only when one lane posts them all.
    if (is_transfer(s.kind) && s.lane != 0) fail("comm step on lane " + std::to_string(s.lane) + ", not lane 0");
    const int P = plan.problem.world;
    switch (s.kind) {
      case StepKind::gemm: {
        if (!in_bounds(s.out, "output") || !in_bounds(s.a, "input")) return;
        const LocalShape shape = local_shape(plan.problem, plan.rank);
        if (s.a.rows != s.out.rows)
          fail("multiplies " + std::to_string(s.a.rows) + " rows into " + std::to_string(s.out.rows));
        if (width(s.a) != shape.gemm_k || width(s.out) != shape.gemm_n)
          fail("GEMM of a [" + std::to_string(width(s.a)) + "]-wide input into a [" + std::to_string(width(s.out)) +
               "]-wide output; B_r is [" + std::to_string(shape.gemm_k) + ", " + std::to_string(shape.gemm_n) + "]");
        if (buffer(s.a).role != Role::a && buffer(s.a).role != Role::gathered)
          fail("GEMM input is " + to_string(buffer(s.a).role) + ", not A or the gathered A");
        if (is_input(buffer(s.out).role)) fail("GEMM output is " + to_string(buffer(s.out).role));
        break;
      }
      case StepKind::copy:
      case StepKind::add:
        if (!in_bounds(s.out, "output") || !in_bounds(s.a, "input")) return;
        same_elements(s.out, s.a, to_string(s.kind));
        if (s.kind == StepKind::add && is_input(buffer(s.out).role))
          fail("add into " + to_string(buffer(s.out).role) + ", which holds inputs");
        break;
      case StepKind::sendrecv:
        for (auto* list : {&s.sends, &s.recvs})
          for (const Transfer& t : *list) {
            if (t.peer < 0 || t.peer >= P) fail("peer " + std::to_string(t.peer) + " outside the world", true);
            in_bounds(t.slice, list == &s.sends ? "send" : "receive");
          }
        break;
      case StepKind::allgather:
      case StepKind::reduce_scatter: {
        const bool ag = s.kind == StepKind::allgather;
        const Slice& mine = ag ? s.a : s.out;
        if (static_cast<int>(s.parts.size()) != P) {
          fail("has " + std::to_string(s.parts.size()) + " parts for " + std::to_string(P) + " ranks", true);
          return;
        }
        if (!in_bounds(mine, ag ? "contribution" : "output")) return;
        for (int q = 0; q < P; ++q) {
          const Slice& part = s.parts[static_cast<size_t>(q)];
          if (!in_bounds(part, "part " + std::to_string(q))) return;
          if (part.buf != s.parts[0].buf) fail("parts lie in different buffers");
          if (!ag && q > 0 && part.row != s.parts[q - 1].row + s.parts[q - 1].rows)
            fail("part " + std::to_string(q) + " does not follow part " + std::to_string(q - 1));
        }
        same_elements(ag ? s.parts[plan.rank] : s.out, ag ? s.a : s.parts[plan.rank],
                      ag ? "this rank's part" : "this rank's output");
        if (!ag && is_input(buffer(s.out).role)) fail("reduce_scatter into " + to_string(buffer(s.out).role));
        break;
      }
    }
    if (fatal) return;
    // Builders leave empty work out (a one-row chunk has no second half): backends need not
    // accept a GEMM of zero rows or a zero-byte transfer.
    if ((s.kind == StepKind::gemm || s.kind == StepKind::copy || s.kind == StepKind::add) && s.out.rows == 0)
      fail("works on zero rows");
    for (auto* list : {&s.sends, &s.recvs})
      for (const Transfer& t : *list)
        if (t.slice.rows == 0) fail("moves zero rows with rank " + std::to_string(t.peer));
    const std::vector<Access> acc = accesses(s);
    for (size_t x = 0; x < acc.size(); ++x) {
      const Role role = buffer(acc[x].slice).role;
      if (role == Role::b) fail("touches B, which only GEMMs read (whole)");
      if (acc[x].write && role == Role::a) fail("writes A, which is the user's input");
      for (size_t y = x + 1; y < acc.size(); ++y) {
        const bool in_place = s.kind == StepKind::allgather && acc[x].slice.buf == acc[y].slice.buf &&
                              acc[x].slice.row == acc[y].slice.row && acc[x].slice.rows == acc[y].slice.rows;
        if ((acc[x].write || acc[y].write) && overlap(acc[x].slice, acc[y].slice) && !in_place)
          fail("writes " + rows_str(acc[x].write ? acc[x].slice : acc[y].slice) + " while it also uses " +
               rows_str(acc[x].write ? acc[y].slice : acc[x].slice));
      }
    }
  }
};

std::string problem_str(const Plan& p) {
  std::ostringstream out;
  out << to_string(p.problem.op) << " M=" << p.problem.m << " N=" << p.problem.n << " K=" << p.problem.k
      << " P=" << p.problem.world << " b=" << to_string(p.problem.b_layout) << " " << to_string(p.options);
  return out.str();
}

// A, B and C first, with the local shapes of the problem.
bool check_buffers(const Plan& plan, Errors& errors) {
  const std::string who = "rank " + std::to_string(plan.rank) + ": ";
  if (plan.buffers.size() < 3) {
    errors.push_back(who + "a plan needs buffers A, B and C first");
    return false;
  }
  const LocalShape s = local_shape(plan.problem, plan.rank);
  const BufferSpec want[3] = {
      {Role::a, s.a_rows, s.a_cols}, {Role::b, s.b_rows, s.b_cols}, {Role::c, s.c_rows, s.c_cols}};
  bool ok = true;
  for (int b = 0; b < 3; ++b) {
    const BufferSpec& got = plan.buffers[static_cast<size_t>(b)];
    if (got.role != want[b].role || got.rows != want[b].rows || got.cols != want[b].cols) {
      errors.push_back(who + "buffer " + std::to_string(b) + " is " + to_string(got.role) + " [" +
                       std::to_string(got.rows) + ", " + std::to_string(got.cols) + "], expected " +
                       to_string(want[b].role) + " [" + std::to_string(want[b].rows) + ", " +
                       std::to_string(want[b].cols) + "]");
      ok = false;
    }
  }
  for (size_t b = 3; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].role == Role::a || plan.buffers[b].role == Role::b || plan.buffers[b].role == Role::c ||
        plan.buffers[b].rows < 0 || plan.buffers[b].cols < 1) {
      errors.push_back(who + "buffer " + std::to_string(b) + " is a second " + to_string(plan.buffers[b].role) +
                       " or has no shape");
      ok = false;
    }
  return ok;
}

}  // namespace

bool check_structure(const std::vector<Plan>& plans, Errors& errors) {
  if (plans.empty()) {
    errors.push_back("no plans");
    return false;
  }
  bool ok = true;
  const int P = static_cast<int>(plans.size());
  if (plans[0].problem.world != P) {
    errors.push_back(std::to_string(P) + " plans for a world of " + std::to_string(plans[0].problem.world));
    return false;
  }
  for (int q = 0; q < P; ++q) {
    const Plan& plan = plans[static_cast<size_t>(q)];
    if (plan.rank != q) {
      errors.push_back("plan " + std::to_string(q) + " is for rank " + std::to_string(plan.rank));
      ok = false;
      continue;
    }
    if (problem_str(plan) != problem_str(plans[0])) {
      errors.push_back("rank " + std::to_string(q) + " plans " + problem_str(plan) + ", rank 0 plans " +
                       problem_str(plans[0]));
      ok = false;
    }
    if (plan.lanes < 1) {
      errors.push_back("rank " + std::to_string(q) + " has no lanes");
      ok = false;
      continue;
    }
    if (!check_buffers(plan, errors)) {
      ok = false;
      continue;
    }
    for (int i = 0; i < static_cast<int>(plan.steps.size()); ++i) {
      StepCheck c{plan, i, errors};
      c.run();
      ok = ok && !c.fatal;
    }
  }
  return ok;
}

}  // namespace collmm::check
