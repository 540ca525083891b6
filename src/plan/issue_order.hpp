// issue_order.hpp (internal to collmm): the order in which one host thread issues the steps of
// every rank of a job. The cuda local transport (all ranks emulated in one process) issues in it,
// and the simulator's shared issuer predicts that thread's time by walking the same order.
//
// Rounds over the ranks in order; in its turn a rank issues its local steps up to its next comm
// step, then tries that step's group. For a sendrecv, the group is the rank and its partners,
// transitively, all standing at a sendrecv whose sends to each peer match that peer's receives in
// number. For a collective, it is every rank standing at one of that kind. A group is issued
// whole, member by member in the order it was found. Skipped steps are passed over, not issued.
#pragma once

#include <string>
#include <vector>

#include "collmm/plan.hpp"

namespace collmm {

struct RankStep {
  int rank = 0;
  int step = 0;
};

// What the order reads of the ranks' plans, and the issuer it drives.
class IssueTarget {
 public:
  virtual ~IssueTarget() = default;
  virtual int ranks() const = 0;
  virtual int steps(int rank) const = 0;
  virtual StepKind kind(RankStep) const = 0;
  virtual bool skipped(RankStep) const = 0;
  // A sendrecv step's sends (send = true) or receives, in list order: how many, and the i-th's peer.
  virtual int transfers(RankStep, bool send) const = 0;
  virtual int peer(RankStep, bool send, int i) const = 0;

  virtual void issue_local(RankStep) = 0;                                        // a gemm, copy or add
  virtual void issue_group(StepKind, const std::vector<RankStep>& members) = 0;  // a sendrecv group or a collective
};

// Issues every step. Throws std::runtime_error, its message starting with `who`, when no rank can
// move or the ranks stand at different collectives.
void issue_in_order(IssueTarget&, const std::string& who);

}  // namespace collmm
