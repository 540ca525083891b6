// symbolic.cpp (run_symbolic): runs all ranks' plans under the execution rules of plan.hpp, with no notion of
// time: a step starts once the step before it on its lane has ended and every step it waits for
// has ended. GEMMs, copies and adds end as soon as they start. A sendrecv group ends once each of
// its sends has met its posted receive and each receive its posted send (a transfer happens when
// both sides are posted; the sender's rows are stable then, which the race check guarantees). A
// collective ends once every rank has posted it. When nothing can move and steps are left, that is
// a deadlock, reported with each rank's stuck steps and what each of them waits for.
#include "check_internal.hpp"

namespace collmm::check {
namespace {

struct RankState {
  std::vector<char> started, done;
  std::vector<int> pending;                  // transfers of a sendrecv not yet met
  std::vector<std::vector<int>> lane_steps;  // [lane] -> its steps in order
  std::vector<size_t> head;                  // [lane] -> first step of the lane not ended
};

class Simulation {
 public:
  Simulation(const std::vector<Plan>& plans, const Matching& m, DataFlow& flow)
      : plans_(plans), m_(m), flow_(flow), pair_done_(m.pairs.size(), 0), collective_posted_(m.common_collectives, 0) {
    for (const Plan& plan : plans) {
      RankState st;
      const size_t n = plan.steps.size();
      st.started.assign(n, 0);
      st.done.assign(n, 0);
      st.pending.assign(n, 0);
      st.lane_steps.resize(static_cast<size_t>(plan.lanes));
      st.head.assign(static_cast<size_t>(plan.lanes), 0);
      for (size_t i = 0; i < n; ++i) st.lane_steps[plan.steps[i].lane].push_back(static_cast<int>(i));
      ranks_.push_back(std::move(st));
    }
  }

  // Starts whatever can start until nothing moves; true when every step has ended.
  bool run() {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t r = 0; r < ranks_.size(); ++r)
        for (size_t lane = 0; lane < ranks_[r].lane_steps.size(); ++lane)
          moved = advance(static_cast<int>(r), lane) || moved;
    }
    for (const RankState& st : ranks_)
      for (char d : st.done)
        if (!d) return false;
    return true;
  }

  void report_stuck(Errors& errors) const {
    errors.push_back("deadlock: the plans stall with steps left; each rank's stuck steps follow");
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const RankState& st = ranks_[r];
      for (size_t lane = 0; lane < st.lane_steps.size(); ++lane) {
        if (st.head[lane] >= st.lane_steps[lane].size()) continue;
        const int i = st.lane_steps[lane][st.head[lane]];
        errors.push_back("deadlock: " + where(plans_[r], i) + " " + why_stuck(static_cast<int>(r), i));
      }
    }
  }

 private:
  // Moves lane `lane` of rank r as far as it goes; true when something started or ended.
  bool advance(int r, size_t lane) {
    RankState& st = ranks_[r];
    bool moved = false;
    while (st.head[lane] < st.lane_steps[lane].size()) {
      const int i = st.lane_steps[lane][st.head[lane]];
      if (st.done[i]) {
        ++st.head[lane];
        continue;
      }
      if (st.started[i]) break;
      for (int w : plans_[r].steps[i].waits)
        if (!st.done[w]) return moved;
      start(r, i);
      moved = true;
    }
    return moved;
  }

  void start(int r, int i) {
    RankState& st = ranks_[r];
    const Step& s = plans_[r].steps[i];
    st.started[i] = 1;
    switch (s.kind) {
      case StepKind::gemm:
      case StepKind::copy:
      case StepKind::add:
        flow_.run_local(r, i);
        st.done[i] = 1;
        break;
      case StepKind::sendrecv:
        st.pending[i] = static_cast<int>(s.sends.size() + s.recvs.size());
        if (st.pending[i] == 0) st.done[i] = 1;
        for (int p : m_.send_pair[r][i]) try_transfer(p);
        for (int p : m_.recv_pair[r][i]) try_transfer(p);
        break;
      case StepKind::allgather:
      case StepKind::reduce_scatter: {
        const int k = m_.collective_ordinal[r][i];
        if (k >= static_cast<int>(m_.common_collectives)) break;  // unmatched: never ends
        if (++collective_posted_[k] < static_cast<int>(plans_.size())) break;
        flow_.collective(static_cast<size_t>(k), m_);
        for (size_t q = 0; q < ranks_.size(); ++q) ranks_[q].done[m_.collectives[q][k]] = 1;
        break;
      }
    }
  }

  void try_transfer(int p) {
    if (p < 0 || pair_done_[p]) return;
    const Pair& pair = m_.pairs[p];
    RankState& from = ranks_[pair.send.rank];
    RankState& into = ranks_[pair.recv.rank];
    if (!from.started[pair.send.step] || !into.started[pair.recv.step]) return;
    pair_done_[p] = 1;
    flow_.transfer(pair);
    if (--from.pending[pair.send.step] == 0) from.done[pair.send.step] = 1;
    if (--into.pending[pair.recv.step] == 0) into.done[pair.recv.step] = 1;
  }

  std::string why_stuck(int r, int i) const {
    const RankState& st = ranks_[r];
    const Step& s = plans_[r].steps[i];
    std::string why;
    if (!st.started[i]) {
      for (int w : s.waits)
        if (!st.done[w]) why += (why.empty() ? "" : ", ") + std::string("step ") + std::to_string(w);
      return "has not started: it waits for " + why;
    }
    if (s.kind == StepKind::allgather || s.kind == StepKind::reduce_scatter) {
      const int k = m_.collective_ordinal[r][i];
      if (k >= static_cast<int>(m_.common_collectives))
        return "is posted; no other rank has a collective #" + std::to_string(k);
      for (size_t q = 0; q < ranks_.size(); ++q)
        if (!ranks_[q].started[m_.collectives[q][k]]) why += (why.empty() ? "" : ", ") + std::to_string(q);
      return "is posted; collective #" + std::to_string(k) + " waits for rank(s) " + why;
    }
    for (int dir = 0; dir < 2; ++dir) {
      const std::vector<Transfer>& list = dir == 0 ? s.sends : s.recvs;
      const std::vector<int>& pairs = dir == 0 ? m_.send_pair[r][i] : m_.recv_pair[r][i];
      for (size_t t = 0; t < list.size(); ++t) {
        if (pairs[t] >= 0 && pair_done_[pairs[t]]) continue;
        why += (why.empty() ? "" : "; ") + std::string(dir == 0 ? "send to " : "receive from ") +
               std::to_string(list[t].peer);
        if (pairs[t] < 0) {
          why += " has no partner";
        } else {
          const TransferRef& other = dir == 0 ? m_.pairs[pairs[t]].recv : m_.pairs[pairs[t]].send;
          why +=
              " waits for its partner, step " + std::to_string(other.step) + " of rank " + std::to_string(other.rank);
        }
      }
    }
    return "is posted; " + why;
  }

  const std::vector<Plan>& plans_;
  const Matching& m_;
  DataFlow& flow_;
  std::vector<RankState> ranks_;
  std::vector<char> pair_done_;
  std::vector<int> collective_posted_;
};

}  // namespace

bool run_symbolic(const std::vector<Plan>& plans, const Matching& m, DataFlow& flow, Errors& errors) {
  Simulation sim(plans, m, flow);
  if (sim.run()) return true;
  sim.report_stuck(errors);
  return false;
}

}  // namespace collmm::check
