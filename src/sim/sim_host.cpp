// sim_host.cpp: the host's side of the simulation (Profile::host): when each step has been
// enqueued on its device. The host never waits for the device (every call the executors make while
// issuing an iteration is asynchronous), so the issue times follow from the plans alone and are
// worked out before the event loop; the engine then starts no step before its issued_us.
//   one issuer per rank: the rank's steps in list order, issue_cost_us(issue_ops(step)) each;
//   shared: one issuer for every rank, in the order of the cuda local transport's Scheduler
//   (src/cuda/local_transport.cpp, issue_local_iteration), mirrored below call for call: rounds
//   over the ranks in order; in its turn a rank issues its local steps up to its next comm step,
//   then tries that step's group (sendrecv: its partners, transitively, all standing at a sendrecv
//   whose sends and receives match in number; a collective: every rank standing at one), which is
//   issued whole, member by member, in the order the transport walks it. Skipped steps are not
//   issued (the executors pass over them).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "sim_engine.hpp"

namespace collmm {

int issue_ops(StepKind kind, int receives, int world) {
  switch (kind) {
    case StepKind::sendrecv:
      return std::max(1, receives);
    case StepKind::allgather:
    case StepKind::reduce_scatter:
      return std::max(1, world);
    default:
      return 1;
  }
}

double issue_cost_us(const HostCost& host, StepKind kind, int ops) {
  const double each = kind == StepKind::gemm && host.gemm_issue_us > 0 ? host.gemm_issue_us : host.issue_us;
  return each * ops;
}

namespace sim {
namespace {

int receives(const SimStep& x) { return x.share_recv[0] + x.share_recv[1]; }
int sends(const SimStep& x) { return x.share_send[0] + x.share_send[1]; }

// The local transport's Scheduler over the compact plans, with a clock for the host.
class SharedIssuer {
 public:
  SharedIssuer(std::vector<SimRank>& ranks, const std::vector<SimMessage>& msgs, const HostCost& host)
      : ranks_(ranks), msgs_(msgs), h_(host), P_(static_cast<int>(ranks.size())), cur_(ranks.size(), 0),
        mark_(ranks.size(), 0) {}

  void run() {
    for (;;) {
      bool progress = false, done = true;
      for (int r = 0; r < P_; ++r) {
        progress |= issue_until_comm(r);
        if (finished(r)) continue;
        done = false;
        const StepKind k = step(r).kind;
        progress |= k == StepKind::sendrecv ? try_sendrecv(r) : try_collective(k);
      }
      if (done) return;
      if (!progress) throw std::runtime_error("simulate: the shared host issuer cannot move (" + where() + ")");
    }
  }

 private:
  bool finished(int r) const { return cur_[r] >= ranks_[r].steps.size(); }
  SimStep& step(int r) { return ranks_[r].steps[cur_[r]]; }
  bool at(int r, StepKind k) { return !finished(r) && step(r).kind == k && !step(r).skip; }
  // The peer of rank x's i-th message slot of its current step (its sends come first).
  int peer(int x, int i) {
    const SimStep& s = step(x);
    const SimMessage& m = msgs_[ranks_[x].msgs[i]];
    return i < s.msgs_begin + sends(s) ? m.dst : m.src;
  }

  void issue(int r) {
    SimStep& x = step(r);
    t_ += issue_cost_us(h_, x.kind, issue_ops(x.kind, receives(x), P_));
    x.issued_us = t_;
    ++cur_[r];
  }

  bool issue_until_comm(int r) {
    bool moved = false;
    while (!finished(r)) {
      if (step(r).skip)
        ++cur_[r];
      else if (!is_comm(step(r).kind))
        issue(r);
      else
        break;
      moved = true;
    }
    return moved;
  }

  // Messages of rank x's current step with `q` as the peer: its sends (to q) or its receives (from q).
  int count_with(int x, int q, bool send) {
    const SimStep& s = step(x);
    const int split = s.msgs_begin + sends(s);
    int n = 0;
    for (int i = send ? s.msgs_begin : split; i < (send ? split : s.msgs_end); ++i) n += peer(x, i) == q;
    return n;
  }

  bool try_sendrecv(int r) {
    ++stamp_;
    group_.assign(1, r);
    mark_[r] = stamp_;
    for (size_t g = 0; g < group_.size(); ++g) {
      const int x = group_[g];
      const SimStep& s = step(x);
      for (int i = s.msgs_begin; i < s.msgs_end; ++i) {
        const int q = peer(x, i);
        if (!at(q, StepKind::sendrecv)) return false;
        if (mark_[q] != stamp_) mark_[q] = stamp_, group_.push_back(q);
      }
    }
    for (int x : group_) {
      const SimStep& s = step(x);
      for (int i = s.msgs_begin; i < s.msgs_begin + sends(s); ++i) {
        const int q = peer(x, i);
        if (count_with(x, q, true) != count_with(q, x, false)) return false;
      }
    }
    for (int x : group_) issue(x);
    return true;
  }

  bool try_collective(StepKind k) {
    for (int q = 0; q < P_; ++q)
      if (!at(q, k)) {
        if (!finished(q) && is_comm(step(q).kind) && step(q).kind != StepKind::sendrecv && !step(q).skip)
          throw std::runtime_error("simulate: ranks disagree on the next collective (" + where() + ")");
        return false;
      }
    for (int x = 0; x < P_; ++x) issue(x);
    return true;
  }

  std::string where() {
    std::string w;
    for (int r = 0; r < P_; ++r) {
      w += (r ? "; " : "") + std::string("rank ") + std::to_string(r) + " at ";
      w += finished(r) ? "end" : "step " + std::to_string(cur_[r]) + " " + to_string(step(r).kind);
    }
    return w;
  }

  std::vector<SimRank>& ranks_;
  const std::vector<SimMessage>& msgs_;
  HostCost h_;
  double t_ = 0;
  int P_;
  std::vector<size_t> cur_;
  std::vector<int> group_;
  std::vector<uint32_t> mark_;  // == stamp_: in the group being built
  uint32_t stamp_ = 0;
};

}  // namespace

void Engine::issue_times() {
  if (!(prof_.host.issue_us > 0)) return;  // no host term: every step counts as issued at 0
  if (prof_.host.shared) {
    SharedIssuer(ranks_, msgs_, prof_.host).run();
    return;
  }
  for (SimRank& rank : ranks_) {
    double t = 0;
    for (SimStep& x : rank.steps) {
      if (x.skip) continue;
      t += issue_cost_us(prof_.host, x.kind, issue_ops(x.kind, receives(x), world_));
      x.issued_us = t;
    }
  }
}

}  // namespace sim
}  // namespace collmm
