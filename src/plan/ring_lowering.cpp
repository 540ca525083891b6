// ring_lowering.cpp: a plan's collectives rewritten as the ring a ring collective runs, in
// sendrecv, copy and add steps (lower_collectives in plan.hpp). A transport that only moves chunks
// between neighbours (the host transport: one GPU rank whose peers live in host memory) runs the
// lowered plan; the plan checker proves the lowered plans as it proves every other.
//
// allgather on rank r of P (parts[q]: where rank q's rows land; a: this rank's rows):
//   copy parts[r] = a                                (unless a is parts[r]: in place)
//   sub-step s = 0 .. P-2:  send parts[(r - s) mod P] (a itself at s = 0) -> r+1
//                           recv parts[(r - s - 1) mod P] <- r-1
// reduce_scatter on rank r (parts[b]: this rank's partial of block b; out: the sum of block r):
//   copy out = parts[r]
//   sub-step s = 0 .. P-2:  send the running sum of block (r - s - 1) mod P -> r+1
//                           (parts[r - 1] at s = 0, else acc[(s - 1) % 2])
//                           recv the running sum of block (r - s - 2) mod P <- r-1 into acc[s % 2]
//                           add acc[s % 2] += parts[(r - s - 2) mod P]   (s < P-2)
//                           add out += acc[s % 2]                        (s = P-2: the block is r's)
// Each rank sends P-1 parts and receives P-1, as the ring collective does; empty parts (rows = 0,
// the same on every rank) are left out on both sides alike.
#include <algorithm>

#include "collmm/plan.hpp"

namespace collmm {
namespace {

class Lowering {
 public:
  explicit Lowering(const Plan& in) : in_(in) {
    out_.plan = in;
    out_.plan.steps.clear();
    int64_t rows = 0, cols = 0;  // the reduce_scatter accumulators: the largest part
    for (const Step& s : in.steps)
      if (s.kind == StepKind::reduce_scatter)
        for (const Slice& part : s.parts) {
          rows = std::max(rows, part.rows);
          cols = in.buffers[part.buf].cols;
        }
    if (rows > 0)
      acc_[0] = out_.plan.add_buffer(Role::work, rows, cols), acc_[1] = out_.plan.add_buffer(Role::work, rows, cols);
  }

  Lowered run() {
    for (size_t i = 0; i < in_.steps.size(); ++i) {
      const Step& s = in_.steps[i];
      first_ = true;
      waits_.clear();
      for (int w : s.waits) waits_.insert(waits_.end(), end_.at(w).begin(), end_.at(w).end());
      origin_ = static_cast<int>(i);
      if (s.kind == StepKind::allgather)
        allgather(s);
      else if (s.kind == StepKind::reduce_scatter)
        reduce_scatter(s);
      else
        push(s);
      // What waiting for step i means now: its last lowered step, or, for a collective with no
      // rows anywhere (nothing pushed), what it waited for itself.
      end_.push_back(first_ ? waits_ : std::vector<int>{static_cast<int>(out_.plan.steps.size()) - 1});
    }
    return std::move(out_);
  }

 private:
  int P() const { return in_.problem.world; }
  int r() const { return in_.rank; }

  // Appends a step of the collective (or the step itself); the first one takes the waits.
  void push(Step s) {
    if (first_) s.waits = waits_;
    first_ = false;
    out_.plan.steps.push_back(std::move(s));
    out_.origin.push_back(origin_);
  }

  void local(StepKind kind, const Step& c, Slice out, Slice a, int chunk) {
    if (a.rows > 0) push(local_step(kind, c.lane, out, a, c.index, chunk));
  }

  void sendrecv(const Step& c, Slice send, Slice recv, int chunk) {
    Step t;
    t.kind = StepKind::sendrecv;
    t.lane = c.lane;
    t.index = c.index;
    t.chunk = chunk;
    if (send.rows > 0) t.sends.push_back({ring_mod(r() + 1, P()), send});
    if (recv.rows > 0) t.recvs.push_back({ring_mod(r() - 1, P()), recv});
    if (!t.sends.empty() || !t.recvs.empty()) push(std::move(t));
  }

  void allgather(const Step& c) {
    const Slice& own = c.parts.at(r());
    if (own.buf != c.a.buf || own.row != c.a.row) local(StepKind::copy, c, own, c.a, r());  // not in place
    for (int s = 0; s + 1 < P(); ++s) {
      const int sent = ring_mod(r() - s, P()), got = ring_mod(r() - s - 1, P());
      sendrecv(c, s == 0 ? c.a : c.parts.at(sent), c.parts.at(got), got);
    }
  }

  void reduce_scatter(const Step& c) {
    local(StepKind::copy, c, c.out, c.parts.at(r()), r());
    for (int s = 0; s + 1 < P(); ++s) {
      const int sent = ring_mod(r() - s - 1, P()), got = ring_mod(r() - s - 2, P());
      const Slice send = s == 0 ? c.parts.at(sent) : Slice{acc_[(s - 1) % 2], 0, c.parts.at(sent).rows};
      const Slice acc{acc_[s % 2], 0, c.parts.at(got).rows};
      sendrecv(c, send, acc, got);
      if (s + 2 < P())
        local(StepKind::add, c, acc, c.parts.at(got), got);
      else
        local(StepKind::add, c, c.out, acc, got);
    }
  }

  const Plan& in_;
  Lowered out_;
  int acc_[2] = {-1, -1};
  std::vector<std::vector<int>> end_;  // [step of the input] -> the steps waiting for it waits for
  std::vector<int> waits_;
  int origin_ = -1;
  bool first_ = true;
};

}  // namespace

Lowered lower_collectives(const Plan& plan) { return Lowering(plan).run(); }

}  // namespace collmm
