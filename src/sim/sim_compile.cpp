// sim_compile.cpp: turning Plans into the engine's compact form. Each step gets its nominal time
// from the cost model, its waits and its lane. Its messages (the k-th send r -> q matched with the
// k-th receive on q from r) and its collective (the k-th of every rank) are checked to agree.
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "send_queues.hpp"
#include "sim_engine.hpp"

namespace collmm::sim {
namespace {

std::string where(int rank, int step, const Plan* plan = nullptr) {
  std::ostringstream s;
  s << "rank " << rank << " step " << step;
  if (plan) s << " (" << describe(plan->steps[step]) << ")";
  return s.str();
}

}  // namespace

Engine::Engine(Dtype dtype, const Profile& profile, StepFilter filter, int world)
    : dtype_(dtype), prof_(profile), filter_(filter), world_(world) {
  ranks_.reserve(world);
  sends_.resize(world);
  recvs_.resize(world);
  is_touched_.assign(world, 0);
}

void Engine::add_rank(const Plan& plan) {
  const int r = static_cast<int>(ranks_.size());
  if (plan.rank != r || plan.problem.world != world_)
    throw std::runtime_error("simulate: plan " + std::to_string(r) + " is rank " + std::to_string(plan.rank) + " of " +
                             std::to_string(plan.problem.world) + ", expected rank " + std::to_string(r) + " of " +
                             std::to_string(world_));
  const LocalShape shape = local_shape(plan.problem, r);
  const Dtype out = output_dtype(prof_.gemm.library, dtype_);
  auto bytes_of = [&](const Slice& s) {
    const BufferSpec& b = plan.buffers.at(s.buf);
    return double(s.rows) * double(b.cols) * double(dtype_size(buffer_dtype(b.role, dtype_, out)));
  };
  const int klass_inter = 1;
  auto klass = [&](int peer) { return same_node(prof_, r, peer) ? 0 : klass_inter; };

  SimRank rank;
  rank.steps.resize(plan.steps.size());
  rank.times.assign(plan.steps.size(), StepTime{});
  rank.lane_steps.resize(std::max(plan.lanes, 1));
  int coll_k = 0;
  std::map<int, std::set<int>> received_on;  // per lane: the receives an add on it depended on
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& st = plan.steps[i];
    const int s = static_cast<int>(i);
    SimStep& x = rank.steps[i];
    x.kind = st.kind;
    x.lane = st.lane;
    x.index = st.index;
    x.chunk = st.chunk;
    x.skip = skips(filter_, st.kind);
    if (st.lane < 0) throw std::runtime_error("simulate: negative lane at " + where(r, s, &plan));
    if (st.lane >= static_cast<int>(rank.lane_steps.size())) rank.lane_steps.resize(st.lane + 1);
    rank.lane_steps[st.lane].push_back(s);
    x.waits_begin = static_cast<int>(rank.waits.size());
    for (int w : st.waits) {
      if (w < 0 || w >= s) throw std::runtime_error("simulate: wait on a later step at " + where(r, s, &plan));
      rank.waits.push_back(w);
    }
    x.waits_end = static_cast<int>(rank.waits.size());

    switch (st.kind) {
      case StepKind::gemm:
        if (!x.skip) {
          x.work_us = gemm_time_us(prof_, st.a.rows, shape.gemm_n, shape.gemm_k, dtype_);
        }
        break;
      case StepKind::copy:
        if (!x.skip) x.work_us = copy_time_us(prof_, bytes_of(st.out));
        break;
      case StepKind::add: {
        // Every add of a plan adds a sum it received. The first step on its lane that depends on a
        // receive (the step before it on the lane, or one it waits for) pays the hop after it;
        // a later one on that lane finds the receive done.
        const std::vector<int>& lane = rank.lane_steps[st.lane];
        std::vector<int> deps = st.waits;
        if (lane.size() >= 2) deps.push_back(lane[lane.size() - 2]);
        bool after_receive = false;
        for (int d : deps)
          if (plan.steps[d].kind == StepKind::sendrecv && !plan.steps[d].recvs.empty())
            after_receive |= received_on[st.lane].insert(d).second;
        if (!x.skip)
          x.work_us =
              after_receive ? add_after_receive_us(prof_, bytes_of(st.out)) : add_time_us(prof_, bytes_of(st.out));
        break;
      }
      case StepKind::sendrecv:
        x.msgs_begin = static_cast<int>(rank.msgs.size());
        if (!x.skip) {
          for (const Transfer& t : st.sends) {
            sends_[r].push_back({t.peer, s, static_cast<int>(rank.msgs.size()), bytes_of(t.slice)});
            rank.msgs.push_back(-1);
            x.share_send[klass(t.peer)]++;
          }
          for (const Transfer& t : st.recvs) {
            recvs_[r].push_back({t.peer, s, static_cast<int>(rank.msgs.size()), bytes_of(t.slice)});
            rank.msgs.push_back(-1);
            x.share_recv[klass(t.peer)]++;
          }
        }
        x.msgs_end = static_cast<int>(rank.msgs.size());
        x.pending = x.msgs_end - x.msgs_begin;
        break;
      case StepKind::allgather:
      case StepKind::reduce_scatter: {
        double most = 0;
        for (const Slice& q : st.parts) most = std::max(most, bytes_of(q));
        if (coll_k == static_cast<int>(colls_.size())) {
          Collective c;
          c.kind = st.kind;
          c.max_part_bytes = most;
          c.skip = x.skip;
          c.steps.assign(world_, -1);
          colls_.push_back(c);
        }
        Collective& c = colls_[coll_k];
        if (c.kind != st.kind || c.max_part_bytes != most)
          throw std::runtime_error("simulate: collective " + std::to_string(coll_k) + " of " + where(r, s, &plan) +
                                   " differs from rank 0's (" + to_string(c.kind) + ", largest part " +
                                   std::to_string(c.max_part_bytes) + " bytes)");
        c.steps[r] = s;
        x.coll = coll_k++;
        break;
      }
    }
  }
  rank.lane_head.assign(rank.lane_steps.size(), 0);
  ranks_.push_back(std::move(rank));
}

void Engine::match_messages() {
  if (static_cast<int>(ranks_.size()) != world_)
    throw std::runtime_error("simulate: " + std::to_string(ranks_.size()) + " plans for " + std::to_string(world_) +
                             " ranks");
  for (size_t c = 0; c < colls_.size(); ++c)
    for (int r = 0; r < world_; ++r)
      if (colls_[c].steps[r] < 0)
        throw std::runtime_error("simulate: rank " + std::to_string(r) + " never posts collective " +
                                 std::to_string(c) + " (" + to_string(colls_[c].kind) + ")");
  SendQueues queues;  // the k-th send r -> q meets the k-th receive on q from r
  for (int r = 0; r < world_; ++r)
    for (const End& e : sends_[r]) {
      if (e.peer < 0 || e.peer >= world_)
        throw std::runtime_error("simulate: " + where(r, e.step) + " sends to rank " + std::to_string(e.peer));
      SimMessage m;
      m.src = r, m.dst = e.peer, m.src_step = e.step, m.bytes = e.bytes;
      ranks_[r].msgs[e.slot] = static_cast<int>(msgs_.size());
      queues.send(r, e.peer, static_cast<int>(msgs_.size()));
      msgs_.push_back(m);
    }
  for (int q = 0; q < world_; ++q)
    for (const End& e : recvs_[q]) {
      const int id = queues.receive(e.peer, q).send;
      if (id < 0)
        throw std::runtime_error("simulate: " + where(q, e.step) + " receives from rank " + std::to_string(e.peer) +
                                 " a message that is never sent");
      SimMessage& m = msgs_[id];
      if (m.bytes != e.bytes)
        throw std::runtime_error("simulate: " + where(q, e.step) + " receives " + std::to_string(e.bytes) +
                                 " bytes from " + where(m.src, m.src_step) + " which sends " + std::to_string(m.bytes));
      m.dst_step = e.step;
      ranks_[q].msgs[e.slot] = id;
    }
  for (const SendQueues::Link& l : queues.links())
    if (l.received < l.sends.size())
      throw std::runtime_error("simulate: rank " + std::to_string(l.from) + " sends to rank " + std::to_string(l.to) +
                               " " + std::to_string(l.sends.size()) + " messages, which receives " +
                               std::to_string(l.received));
  sends_.clear();
  recvs_.clear();
}

}  // namespace collmm::sim
