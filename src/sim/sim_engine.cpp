// sim_engine.cpp: the event loop. Activities (local steps, messages, collectives) have a remaining
// nominal time and a speed (1, or 1/slowdown under SM contention). The heap holds their end
// times. An activity whose speed changes gets a new version and a new heap entry (the old one is
// skipped when it surfaces). Steps start when their lane is free, their waits are done and the host
// has issued them (a wake activity brings a ready step back at its issue time), the earlier-listed
// first; see collmm/sim.hpp for the rules.
#include <algorithm>
#include <stdexcept>

#include "sim_engine.hpp"

namespace collmm::sim {

bool Engine::sm_comm(StepKind k) const { return prof_.contention.transport_uses_sms && k != StepKind::gemm; }

double Engine::speed_of(const Activity& a) const {
  if (a.type == Activity::wake) return 1;
  const Contention& c = prof_.contention;
  if (a.type == Activity::local && a.gemm) {  // GEMMs on one rank share its compute
    const SimRank& rank = ranks_[a.rank];
    const double share = 1.0 / std::max(1, rank.gemm_running);
    const bool comm = c.transport_uses_sms && (rank.comm_running > 0 || colls_running_ > 0);
    return comm ? share / c.gemm_slowdown : share;
  }
  if (!c.transport_uses_sms) return 1;
  switch (a.type) {
    case Activity::local: return ranks_[a.rank].gemm_running > 0 ? 1 / c.comm_slowdown : 1;
    case Activity::message: {
      const SimMessage& m = msgs_[a.id];
      return (ranks_[m.src].gemm_running > 0 || ranks_[m.dst].gemm_running > 0) ? 1 / c.comm_slowdown : 1;
    }
    case Activity::collective: return gemm_total_ > 0 ? 1 / c.comm_slowdown : 1;
    case Activity::wake: return 1;
  }
  return 1;
}

void Engine::schedule(int act) {
  const Activity& a = acts_[act];
  heap_.push({a.last + a.remaining / a.speed, seq_++, act, a.version});
}

void Engine::rerate(int act, double t) {
  Activity& a = acts_[act];
  if (a.finished) return;
  a.remaining = std::max(0.0, a.remaining - (t - a.last) * a.speed);
  a.last = t;
  const double s = speed_of(a);
  if (s != a.speed) {
    a.speed = s;
    ++a.version;
    schedule(act);
  }
}

void Engine::rerate_rank(int r, double t) {
  for (int act : ranks_[r].active) rerate(act, t);
}

void Engine::rerate_all(double t) {
  for (int r = 0; r < world_; ++r) rerate_rank(r, t);
  for (int c : active_colls_) rerate(c, t);
}

// Adds (delta = +1) or removes (-1) a counted activity from its rank's contention state,
// re-rating the activities whose speed may change (GEMMs always count; comm only when it contends
// for SMs).
void Engine::set_counts(const Activity& a, int delta, double t) {
  if (!a.counted) return;
  auto bump = [&](int r) {
    SimRank& rank = ranks_[r];
    const bool was = rank.comm_running > 0;
    rank.comm_running += delta;
    if ((rank.comm_running > 0) != was) rerate_rank(r, t);
  };
  switch (a.type) {
    case Activity::local:
      if (a.gemm) {
        ranks_[a.rank].gemm_running += delta;
        rerate_rank(a.rank, t);  // every change re-rates: GEMMs share the rank
        const bool was = gemm_total_ > 0;
        gemm_total_ += delta;
        if ((gemm_total_ > 0) != was && colls_running_ > 0) rerate_all(t);
      } else {
        bump(a.rank);
      }
      break;
    case Activity::message: {
      const SimMessage& m = msgs_[a.id];
      bump(m.src);
      if (m.dst != m.src) bump(m.dst);
      break;
    }
    case Activity::collective: {
      const bool was = colls_running_ > 0;
      colls_running_ += delta;
      if ((colls_running_ > 0) != was) rerate_all(t);
      break;
    }
    case Activity::wake: break;
  }
}

void Engine::start_activity(Activity a, double t) {
  const int id = static_cast<int>(acts_.size());
  a.last = t;
  // GEMMs always count (they share the rank's compute); comm only where it contends for SMs.
  a.counted = a.type != Activity::wake && a.remaining > 0 && (a.gemm || prof_.contention.transport_uses_sms);
  acts_.push_back(a);
  set_counts(acts_[id], +1, t);  // re-rates the others first
  acts_[id].speed = speed_of(acts_[id]);
  auto enlist = [&](int r) { ranks_[r].active.push_back(id); };
  if (a.type == Activity::local) enlist(a.rank);
  if (a.type == Activity::collective) active_colls_.push_back(id);
  if (a.type == Activity::message) {
    enlist(msgs_[a.id].src);
    if (msgs_[a.id].dst != msgs_[a.id].src) enlist(msgs_[a.id].dst);
  }
  schedule(id);
}

void Engine::start(int r, int s, double t) {
  SimRank& rank = ranks_[r];
  SimStep& x = rank.steps[s];
  x.started = true;
  rank.times[s].start_us = t;
  Activity a;
  a.rank = r;
  a.id = s;
  switch (x.kind) {
    case StepKind::gemm:
    case StepKind::copy:
    case StepKind::add:
      a.gemm = x.kind == StepKind::gemm;
      a.remaining = x.skip ? 0 : x.work_us;
      start_activity(a, t);
      return;
    case StepKind::sendrecv:
      if (x.pending == 0) return start_activity(a, t);  // nothing to move: done at once
      for (int i = x.msgs_begin; i < x.msgs_end; ++i) {
        SimMessage& m = msgs_[rank.msgs[i]];
        const bool sender = m.src == r && m.src_step == s && !m.src_posted;
        (sender ? m.src_posted : m.dst_posted) = true;
        if (!(m.src_posted && m.dst_posted)) continue;
        const SimStep& from = ranks_[m.src].steps[m.src_step];
        const SimStep& to = ranks_[m.dst].steps[m.dst_step];
        const int k = same_node(prof_, m.src, m.dst) ? 0 : 1;
        const int share = std::max(from.share_send[k], to.share_recv[k]);
        Activity msg;
        msg.type = Activity::message;
        msg.id = rank.msgs[i];
        msg.remaining = message_time_us(prof_, m.src, m.dst, m.bytes, share);
        start_activity(msg, t);
      }
      return;
    case StepKind::allgather:
    case StepKind::reduce_scatter: {
      Collective& c = colls_[x.coll];
      if (++c.posted == world_) start_collective(x.coll, t);  // every member posted: the collective runs
      return;
    }
  }
}

void Engine::start_collective(int id, double t) {
  const Collective& c = colls_[id];
  Activity coll;
  coll.type = Activity::collective;
  coll.id = id;
  coll.remaining = c.skip ? 0 : collective_time_us(prof_, world_, c.max_part_bytes, c.kind == StepKind::reduce_scatter);
  start_activity(coll, t);
}

void Engine::try_start(int r, double t) {
  SimRank& rank = ranks_[r];
  std::vector<int>& ready = ready_;
  ready.clear();
  for (size_t l = 0; l < rank.lane_steps.size(); ++l) {
    if (rank.lane_head[l] >= rank.lane_steps[l].size()) continue;
    const int s = rank.lane_steps[l][rank.lane_head[l]];
    const SimStep& x = rank.steps[s];
    if (x.started) continue;
    bool waits_done = true;
    for (int w = x.waits_begin; w < x.waits_end && waits_done; ++w) waits_done = rank.steps[rank.waits[w]].done;
    if (!waits_done) continue;
    if (x.issued_us > t + 1e-9 * std::max(1.0, t)) {  // not enqueued yet: come back when it is
      if (!x.wake) wake_at(r, s, t);
      continue;
    }
    ready.push_back(s);
  }
  std::sort(ready.begin(), ready.end());
  const bool order = prof_.contention.transport_uses_sms && prof_.contention.launch_order;
  bool comm_waits_for_sms = false;
  for (int s : ready) {
    const SimStep& x = rank.steps[s];
    if (order && !x.skip) {
      if (sm_comm(x.kind) && rank.gemm_running > 0) {
        comm_waits_for_sms = true;  // a running GEMM holds the SMs; starts when it ends
        continue;
      }
      if (x.kind == StepKind::gemm && comm_waits_for_sms) continue;  // queued behind that comm
    }
    start(r, s, t);
  }
}

void Engine::wake_at(int r, int s, double t) {
  ranks_[r].steps[s].wake = true;
  Activity a;
  a.type = Activity::wake;
  a.rank = r;
  a.id = s;
  a.remaining = ranks_[r].steps[s].issued_us - t;
  start_activity(a, t);
}

void Engine::step_done(int r, int s, double t) {
  SimRank& rank = ranks_[r];
  SimStep& x = rank.steps[s];
  x.done = true;
  rank.times[s].end_us = t;
  ++rank.lane_head[x.lane];
  if (!is_touched_[r]) is_touched_[r] = 1, touched_.push_back(r);
}

void Engine::finish(int act, double t) {
  Activity& a = acts_[act];
  a.finished = true;
  auto delist = [&](int r) {
    auto& v = ranks_[r].active;
    auto it = std::find(v.begin(), v.end(), act);
    if (it != v.end()) *it = v.back(), v.pop_back();
  };
  switch (a.type) {
    case Activity::local:
      delist(a.rank);
      set_counts(a, -1, t);
      step_done(a.rank, a.id, t);
      break;
    case Activity::message: {
      const SimMessage& m = msgs_[a.id];
      delist(m.src);
      if (m.dst != m.src) delist(m.dst);
      set_counts(a, -1, t);
      if (--ranks_[m.src].steps[m.src_step].pending == 0) step_done(m.src, m.src_step, t);
      if (--ranks_[m.dst].steps[m.dst_step].pending == 0) step_done(m.dst, m.dst_step, t);
      break;
    }
    case Activity::collective: {
      active_colls_.erase(std::find(active_colls_.begin(), active_colls_.end(), act));
      set_counts(a, -1, t);
      const Collective& c = colls_[a.id];
      for (int r = 0; r < world_; ++r) step_done(r, c.steps[r], t);
      break;
    }
    case Activity::wake:
      ranks_[a.rank].steps[a.id].wake = false;
      if (!is_touched_[a.rank]) is_touched_[a.rank] = 1, touched_.push_back(a.rank);
      break;
  }
}

void Engine::run() {
  match_messages();
  issue_times();
  for (int r = 0; r < world_; ++r) try_start(r, 0);
  while (!heap_.empty()) {
    const double t = heap_.top().t;
    // Everything ending at this instant first, then whatever that lets start.
    while (!heap_.empty() && heap_.top().t <= t + 1e-9 * std::max(1.0, t)) {
      const Event e = heap_.top();
      heap_.pop();
      if (acts_[e.act].finished || acts_[e.act].version != e.version) continue;
      finish(e.act, t);
    }
    std::vector<int>& touched = touched_now_;  // the ranks whose steps may start now (buffers kept)
    touched.swap(touched_);
    touched_.clear();
    std::sort(touched.begin(), touched.end());
    for (int r : touched) is_touched_[r] = 0;
    for (int r : touched) try_start(r, t);
  }
  for (int r = 0; r < world_; ++r)
    for (size_t s = 0; s < ranks_[r].steps.size(); ++s)
      if (!ranks_[r].steps[s].done)
        throw std::runtime_error("simulate: deadlock: rank " + std::to_string(r) + " step " + std::to_string(s) + " (" +
                                 to_string(ranks_[r].steps[s].kind) + ") never " +
                                 (ranks_[r].steps[s].started ? "ends" : "starts"));
}

std::vector<RankRun> Engine::rank_runs() const {
  std::vector<RankRun> runs(world_);
  for (int r = 0; r < world_; ++r) {
    runs[r].rank = r;
    runs[r].steps = ranks_[r].times;
    for (size_t s = 0; s < runs[r].steps.size(); ++s) {
      if (ranks_[r].steps[s].skip)
        runs[r].steps[s] = StepTime{};  // not run
      else
        runs[r].total_us = std::max(runs[r].total_us, runs[r].steps[s].end_us);
    }
  }
  return runs;
}

Timeline Engine::timeline(Op op, Algo algo) const {
  Timeline tl;
  tl.op = op;
  tl.algo = algo;
  tl.world = world_;
  for (int r = 0; r < world_; ++r)
    for (size_t s = 0; s < ranks_[r].steps.size(); ++s) {
      const SimStep& x = ranks_[r].steps[s];
      if (x.skip) continue;
      tl.events.push_back(
          {r, x.lane, x.kind, x.index, x.chunk, ranks_[r].times[s].start_us, ranks_[r].times[s].end_us});
    }
  return tl;
}

}  // namespace collmm::sim
