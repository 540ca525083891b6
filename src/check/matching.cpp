// matching.cpp: which receive each send meets, and which collectives go together. Sends meet
// receives by the plans' rule (send_queues.hpp): they must move the same number of elements, in
// rows of one width. Every rank's k-th collective is one operation: the same kind,
// the same rows for each rank's part on every rank, and each rank's own contribution (allgather)
// or output (reduce_scatter) the size of its part. Whatever is left without a partner is an error.
#include <algorithm>

#include "check_internal.hpp"
#include "send_queues.hpp"

namespace collmm::check {
namespace {

int64_t width(const Plan& plan, const Slice& s) { return plan.buffers[static_cast<size_t>(s.buf)].cols; }

const Transfer& send_of(const std::vector<Plan>& plans, const TransferRef& t) {
  return plans[t.rank].steps[t.step].sends[t.index];
}
const Transfer& recv_of(const std::vector<Plan>& plans, const TransferRef& t) {
  return plans[t.rank].steps[t.step].recvs[t.index];
}

void pair_transfers(const std::vector<Plan>& plans, Matching& m, Errors& errors) {
  SendQueues queues;
  std::vector<TransferRef> sent;  // by send id
  for (const Plan& plan : plans)
    for (int i = 0; i < static_cast<int>(plan.steps.size()); ++i) {
      const Step& s = plan.steps[static_cast<size_t>(i)];
      for (int t = 0; t < static_cast<int>(s.sends.size()); ++t) {
        queues.send(plan.rank, s.sends[t].peer, static_cast<int>(sent.size()));
        sent.push_back({plan.rank, i, t});
      }
    }
  auto unmatched = [&](const TransferRef& t, bool is_send, size_t k) {
    const Plan& plan = plans[t.rank];
    const int peer = is_send ? send_of(plans, t).peer : recv_of(plans, t).peer;
    errors.push_back(where(plan, t.step) + ": " + (is_send ? "send #" : "receive #") + std::to_string(k) +
                     (is_send ? " to rank " : " from rank ") + std::to_string(peer) + " has no matching " +
                     (is_send ? "receive" : "send") + " on rank " + std::to_string(peer));
  };
  for (const Plan& plan : plans)
    for (int i = 0; i < static_cast<int>(plan.steps.size()); ++i)
      for (int t = 0; t < static_cast<int>(plan.steps[static_cast<size_t>(i)].recvs.size()); ++t) {
        const TransferRef r{plan.rank, i, t};
        const SendQueues::Match match = queues.receive(recv_of(plans, r).peer, plan.rank);
        if (match.send < 0) {
          unmatched(r, false, match.k);
          continue;
        }
        const TransferRef& s = sent[static_cast<size_t>(match.send)];
        const Slice& from = send_of(plans, s).slice;
        const Slice& into = recv_of(plans, r).slice;
        const int64_t ws = width(plans[s.rank], from), wr = width(plans[r.rank], into);
        if (from.rows * ws != into.rows * wr || ws != wr)
          errors.push_back(where(plans[s.rank], s.step) + ": send #" + std::to_string(match.k) + " of " +
                           std::to_string(from.rows) + "x" + std::to_string(ws) + " elements meets " +
                           where(plans[r.rank], r.step) + " receiving " + std::to_string(into.rows) + "x" +
                           std::to_string(wr));
        m.send_pair[s.rank][s.step][s.index] = static_cast<int>(m.pairs.size());
        m.recv_pair[r.rank][r.step][r.index] = static_cast<int>(m.pairs.size());
        m.pairs.push_back({s, r});
      }
  for (const SendQueues::Link& link : queues.links())
    for (size_t k = link.received; k < link.sends.size(); ++k)
      unmatched(sent[static_cast<size_t>(link.sends[k])], true, k);
}

void pair_collectives(const std::vector<Plan>& plans, Matching& m, Errors& errors) {
  const int P = static_cast<int>(plans.size());
  size_t common = m.collectives[0].size();
  for (int q = 0; q < P; ++q) common = std::min(common, m.collectives[q].size());
  for (int q = 0; q < P; ++q)
    for (size_t k = common; k < m.collectives[q].size(); ++k)
      errors.push_back(where(plans[q], m.collectives[q][k]) + ": collective #" + std::to_string(k) +
                       " is not posted by every rank");
  m.common_collectives = common;
  for (size_t k = 0; k < common; ++k) {
    const Step& first = plans[0].steps[m.collectives[0][k]];
    for (int q = 0; q < P; ++q) {
      const int i = m.collectives[q][k];
      const Step& s = plans[q].steps[i];
      auto disagree = [&](const std::string& what) {
        errors.push_back(where(plans[q], i) + ": collective #" + std::to_string(k) + " " + what);
      };
      if (s.kind != first.kind) {
        disagree("is " + to_string(s.kind) + " here and " + to_string(first.kind) + " on rank 0");
        continue;
      }
      for (int x = 0; x < P; ++x)
        if (s.parts[x].rows != first.parts[x].rows)
          disagree("gives rank " + std::to_string(x) + " " + std::to_string(s.parts[x].rows) +
                   " rows; rank 0 gives it " + std::to_string(first.parts[x].rows));
      const Slice& mine = s.kind == StepKind::allgather ? s.a : s.out;
      if (mine.rows != first.parts[q].rows)
        disagree(std::string(s.kind == StepKind::allgather ? "contributes " : "expects ") + std::to_string(mine.rows) +
                 " rows here; rank 0 has " + std::to_string(first.parts[q].rows) + " for this rank");
      if (width(plans[q], s.parts[0]) != width(plans[0], first.parts[0]))
        disagree("has rows of another width than on rank 0");
    }
  }
}

}  // namespace

Matching match_comm(const std::vector<Plan>& plans, Errors& errors) {
  Matching m;
  const size_t P = plans.size();
  m.send_pair.resize(P);
  m.recv_pair.resize(P);
  m.collectives.resize(P);
  m.collective_ordinal.resize(P);
  for (size_t q = 0; q < P; ++q) {
    const std::vector<Step>& steps = plans[q].steps;
    m.collective_ordinal[q].assign(steps.size(), -1);
    for (size_t i = 0; i < steps.size(); ++i) {
      m.send_pair[q].emplace_back(steps[i].sends.size(), -1);
      m.recv_pair[q].emplace_back(steps[i].recvs.size(), -1);
      if (steps[i].kind == StepKind::allgather || steps[i].kind == StepKind::reduce_scatter) {
        m.collective_ordinal[q][i] = static_cast<int>(m.collectives[q].size());
        m.collectives[q].push_back(static_cast<int>(i));
      }
    }
  }
  pair_transfers(plans, m, errors);
  pair_collectives(plans, m, errors);
  return m;
}

}  // namespace collmm::check
