// issue_order.cpp: one host thread's order over every rank's steps (issue_order.hpp).
#include "issue_order.hpp"

#include <cstdint>
#include <stdexcept>

namespace collmm {
namespace {

class Walk {
 public:
  Walk(IssueTarget& t, const std::string& who)
      : t_(t), who_(who), P_(t.ranks()), cur_(static_cast<size_t>(P_), 0), mark_(static_cast<size_t>(P_), 0) {}

  void run() {
    for (;;) {
      bool progress = false, done = true;
      for (int r = 0; r < P_; ++r) {
        progress |= issue_until_comm(r);
        if (finished(r)) continue;
        done = false;
        const StepKind k = t_.kind(at(r));
        progress |= k == StepKind::sendrecv ? try_sendrecv(r) : try_collective(k);
      }
      if (done) return;
      if (!progress) throw std::runtime_error(who_ + ": no rank can move (" + where() + ")");
    }
  }

 private:
  bool finished(int r) const { return cur_[r] >= t_.steps(r); }
  RankStep at(int r) const { return {r, cur_[r]}; }
  bool standing_at(int r, StepKind k) const { return !finished(r) && t_.kind(at(r)) == k && !t_.skipped(at(r)); }

  // Issues rank r's local steps, and passes over its skipped ones, up to its next comm step.
  bool issue_until_comm(int r) {
    bool moved = false;
    while (!finished(r)) {
      if (t_.skipped(at(r))) {
        ++cur_[r];
      } else if (!is_transfer(t_.kind(at(r)))) {
        t_.issue_local(at(r));
        ++cur_[r];
      } else {
        break;
      }
      moved = true;
    }
    return moved;
  }

  // Rank x's transfers with peer q in its current step: sends to q, or receives from q.
  int count_with(int x, int q, bool send) const {
    int n = 0;
    for (int i = 0; i < t_.transfers(at(x), send); ++i) n += t_.peer(at(x), send, i) == q;
    return n;
  }

  // The sendrecv group of rank r: r and its partners, transitively, if all stand at a sendrecv.
  bool try_sendrecv(int r) {
    ++stamp_;
    std::vector<int> group{r};
    mark_[r] = stamp_;
    for (size_t g = 0; g < group.size(); ++g)
      for (bool send : {true, false})
        for (int i = 0; i < t_.transfers(at(group[g]), send); ++i) {
          const int q = t_.peer(at(group[g]), send, i);
          if (!standing_at(q, StepKind::sendrecv)) return false;
          if (mark_[q] != stamp_) mark_[q] = stamp_, group.push_back(q);
        }
    for (int x : group)  // the sends x -> q of this step must match q's receives from x, one to one
      for (int i = 0; i < t_.transfers(at(x), true); ++i) {
        const int q = t_.peer(at(x), true, i);
        if (count_with(x, q, true) != count_with(q, x, false)) return false;
      }
    issue(StepKind::sendrecv, group);
    return true;
  }

  // A collective: every rank must stand at one of the same kind.
  bool try_collective(StepKind k) {
    for (int q = 0; q < P_; ++q)
      if (!standing_at(q, k)) {
        if (!finished(q) && is_transfer(t_.kind(at(q))) && t_.kind(at(q)) != StepKind::sendrecv && !t_.skipped(at(q)))
          throw std::runtime_error(who_ + ": ranks disagree on the next collective (" + where() + ")");
        return false;
      }
    std::vector<int> all(static_cast<size_t>(P_));
    for (int q = 0; q < P_; ++q) all[q] = q;
    issue(k, all);
    return true;
  }

  void issue(StepKind k, const std::vector<int>& group) {
    std::vector<RankStep> members;
    for (int x : group) members.push_back(at(x));
    t_.issue_group(k, members);
    for (int x : group) ++cur_[x];
  }

  std::string where() const {
    std::string w;
    for (int r = 0; r < P_; ++r) {
      w += (r ? "; " : "") + std::string("rank ") + std::to_string(r) + " at ";
      w += finished(r) ? "end" : "step " + std::to_string(cur_[r]) + " " + to_string(t_.kind(at(r)));
    }
    return w;
  }

  IssueTarget& t_;
  std::string who_;
  int P_;
  std::vector<int> cur_;        // each rank's next step
  std::vector<uint32_t> mark_;  // == stamp_: in the sendrecv group being built
  uint32_t stamp_ = 0;
};

}  // namespace

void issue_in_order(IssueTarget& target, const std::string& who) { Walk(target, who).run(); }

}  // namespace collmm
