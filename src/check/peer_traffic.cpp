// peer_traffic.cpp: one rank's transfers, read off the dataflow of the whole job (see
// peer_traffic.hpp), and the replay of that rank alone against them.
#include "peer_traffic.hpp"

#include <stdexcept>

#include "check_internal.hpp"

namespace collmm::check {
namespace {

bool is_lowered(const Plan& plan) {
  for (const Step& s : plan.steps)
    if (s.kind == StepKind::allgather || s.kind == StepKind::reduce_scatter) return false;
  return true;
}

}  // namespace

PeerTraffic peer_traffic(const std::vector<Plan>& plans, int rank) {
  for (const Plan& plan : plans)
    if (!is_lowered(plan))
      throw std::runtime_error("peer_traffic: rank " + std::to_string(plan.rank) +
                               "'s plan has a collective; lower it first");
  Errors errors;
  if (!check_structure(plans, errors)) throw std::runtime_error("peer_traffic: " + errors.at(0));
  const Matching matching = match_comm(plans, errors);
  PeerTraffic traffic;
  DataFlow flow(plans);
  flow.on_transfer = [&](const Pair& p, const std::vector<Terms>& rows) {
    if (p.recv.rank == rank) {
      const Transfer& t = plans[rank].steps[p.recv.step].recvs[p.recv.index];
      traffic.received.push_back({p.recv.step, p.recv.index, t.peer, p.send.step, t.slice, rows});
    }
    if (p.send.rank == rank) {
      const Transfer& t = plans[rank].steps[p.send.step].sends[p.send.index];
      traffic.sent.push_back({p.send.step, p.send.index, t.peer, p.recv.step, t.slice, rows});
    }
  };
  if (run_symbolic(plans, matching, flow, errors)) flow.check_final(errors);
  if (!errors.empty()) throw std::runtime_error("peer_traffic: the plans do not check: " + errors.at(0));
  return traffic;
}

std::vector<std::string> replay_alone(const std::vector<Plan>& plans, int rank, const PeerTraffic& traffic) {
  Errors errors;
  DataFlow flow(plans);
  const Plan& plan = plans.at(rank);
  auto find = [&](const std::vector<LinkTransfer>& list, int step, int index) -> const LinkTransfer* {
    for (const LinkTransfer& t : list)
      if (t.step == step && t.index == index) return &t;
    return nullptr;
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const int step = static_cast<int>(i);
    if (s.kind != StepKind::sendrecv) {
      if (is_transfer(s.kind))
        errors.push_back(where(plan, step) + ": a collective; lower it first");
      else
        flow.run_local(rank, step);
      continue;
    }
    for (size_t k = 0; k < s.sends.size(); ++k) {  // sends read what the rank holds when the step starts
      const LinkTransfer* want = find(traffic.sent, step, static_cast<int>(k));
      if (!want)
        errors.push_back(where(plan, step) + ": send " + std::to_string(k) + " is not in the traffic");
      else if (flow.read(rank, s.sends[k].slice) != want->rows)
        errors.push_back(where(plan, step) + ": send " + std::to_string(k) +
                         " carries other rows than its receiver needs");
    }
    for (size_t k = 0; k < s.recvs.size(); ++k) {
      const LinkTransfer* got = find(traffic.received, step, static_cast<int>(k));
      if (!got)
        errors.push_back(where(plan, step) + ": receive " + std::to_string(k) + " is not staged");
      else
        flow.receive(rank, step, s.recvs[k].slice, got->rows);
    }
  }
  flow.check_rank(rank, errors);
  return errors;
}

}  // namespace collmm::check
