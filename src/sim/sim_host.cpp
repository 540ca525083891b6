// sim_host.cpp: the host's side of the simulation (Profile::host): when each step has been
// enqueued on its device. The host never waits for the device (every call the executors make while
// issuing an iteration is asynchronous). So the issue times follow from the plans alone and are
// worked out before the event loop; the engine then starts no step before its issued_us.
//   one issuer per rank: the rank's steps in list order, issue_cost_us(issue_ops(step)) each;
//   shared: one issuer for every rank, in the order the cuda local transport issues in
//   (issue_order.hpp, which both walk). Skipped steps are not issued (the executors pass over
//   them).
#include <algorithm>

#include "host_issue.hpp"
#include "issue_order.hpp"
#include "sim_engine.hpp"

namespace collmm {

int issue_ops(StepKind kind, int receives, int world) {
  switch (kind) {
    case StepKind::sendrecv: return std::max(1, receives);
    case StepKind::allgather:
    case StepKind::reduce_scatter: return std::max(1, world);
    default: return 1;
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

// The shared issuer: the one-thread issue order (issue_order.hpp) over the compact steps, with a
// clock for the host.
class SharedIssuer : public IssueTarget {
 public:
  SharedIssuer(std::vector<SimRank>& ranks, const std::vector<SimMessage>& msgs, const HostCost& host)
      : ranks_(ranks), msgs_(msgs), h_(host) {}

  int ranks() const override { return static_cast<int>(ranks_.size()); }
  int steps(int r) const override { return static_cast<int>(ranks_[r].steps.size()); }
  StepKind kind(RankStep s) const override { return step(s).kind; }
  bool skipped(RankStep s) const override { return step(s).skip; }
  int transfers(RankStep s, bool send) const override { return send ? sends(step(s)) : receives(step(s)); }
  // A step's message slots hold its sends first, then its receives.
  int peer(RankStep s, bool send, int i) const override {
    const SimStep& x = step(s);
    const SimMessage& m = msgs_[ranks_[s.rank].msgs[x.msgs_begin + (send ? 0 : sends(x)) + i]];
    return send ? m.dst : m.src;
  }
  void issue_local(RankStep s) override { issue(s); }
  void issue_group(StepKind, const std::vector<RankStep>& members) override {
    for (RankStep s : members) issue(s);
  }

 private:
  const SimStep& step(RankStep s) const { return ranks_[s.rank].steps[s.step]; }

  void issue(RankStep s) {
    SimStep& x = ranks_[s.rank].steps[s.step];
    t_ += issue_cost_us(h_, x.kind, issue_ops(x.kind, receives(x), ranks()));
    x.issued_us = t_;
  }

  std::vector<SimRank>& ranks_;
  const std::vector<SimMessage>& msgs_;
  HostCost h_;
  double t_ = 0;
};

}  // namespace

void Engine::issue_times() {
  if (!(prof_.host.issue_us > 0)) return;  // no host term: every step counts as issued at 0
  if (prof_.host.shared) {
    SharedIssuer issuer(ranks_, msgs_, prof_.host);
    issue_in_order(issuer, "simulate: the shared host issuer");
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
