// local_transport.cpp: the round-robin issue of P emulated ranks' plans, with comm steps done
// as device copies between the ranks' buffers (see local_transport.hpp). The cost model mirrors
// the Scheduler's issue order (src/sim/sim_host.cpp, SharedIssuer, over the simulator's compact
// steps, without CUDA): a change to the order here belongs there too.
#include "local_transport.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "elementwise.hpp"

namespace collmm::cuda {
namespace {

void copy(RankDevice& to, void* dst, RankDevice& from, const void* src, size_t bytes, cudaStream_t st) {
  if (bytes == 0) return;
  if (to.device() == from.device())
    COLLMM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
  else
    COLLMM_CUDA(cudaMemcpyPeerAsync(dst, to.device(), src, from.device(), bytes, st));
}

// The k-th transfer with `peer` in a list (k counted among those with that peer).
const Transfer& nth_with(const std::vector<Transfer>& list, int peer, int k) {
  for (const Transfer& t : list)
    if (t.peer == peer && k-- == 0) return t;
  throw std::runtime_error("local transport: unmatched transfer with rank " + std::to_string(peer));
}

int count_with(const std::vector<Transfer>& list, int peer) {
  return static_cast<int>(std::count_if(list.begin(), list.end(), [&](const Transfer& t) { return t.peer == peer; }));
}

class Scheduler {
 public:
  explicit Scheduler(const std::vector<RankDevice*>& ranks) : ranks_(ranks), cur_(ranks.size(), 0) {
    for (size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r]->rank() != static_cast<int>(r)) throw std::runtime_error("local transport: ranks out of order");
  }

  void run() {
    const int P = static_cast<int>(ranks_.size());
    for (;;) {
      bool progress = false, done = true;
      for (int r = 0; r < P; ++r) {
        progress |= issue_until_comm(r);
        if (finished(r)) continue;
        done = false;
        const StepKind k = step(r).kind;
        progress |= k == StepKind::sendrecv ? try_sendrecv(r) : try_collective(k);
      }
      if (done) return;
      if (!progress) throw std::runtime_error("local transport: no rank can move (" + where() + ")");
    }
  }

 private:
  bool finished(int r) const { return cur_[r] >= ranks_[r]->plan().steps.size(); }
  int index(int r) const { return static_cast<int>(cur_[r]); }
  const Step& step(int r) const { return ranks_[r]->plan().steps[cur_[r]]; }
  cudaStream_t stream(int r) const { return ranks_[r]->lane(step(r).lane); }

  // Issues rank r's local and skipped steps up to its next comm step.
  bool issue_until_comm(int r) {
    bool moved = false;
    while (!finished(r)) {
      if (ranks_[r]->skipped(index(r))) {
        ++cur_[r];
      } else if (!is_comm(step(r).kind)) {
        ranks_[r]->issue_local_step(index(r));
        ++cur_[r];
      } else {
        break;
      }
      moved = true;
    }
    return moved;
  }

  bool at(int r, StepKind k) const { return !finished(r) && step(r).kind == k && !ranks_[r]->skipped(index(r)); }

  // The sendrecv group of rank r: r and its partners, transitively, if all stand at a sendrecv.
  bool try_sendrecv(int r) {
    std::vector<int> group{r};
    for (size_t g = 0; g < group.size(); ++g) {
      const Step& s = step(group[g]);
      for (const auto* list : {&s.sends, &s.recvs})
        for (const Transfer& t : *list) {
          if (!at(t.peer, StepKind::sendrecv)) return false;
          if (std::find(group.begin(), group.end(), t.peer) == group.end()) group.push_back(t.peer);
        }
    }
    for (int x : group)  // the sends x -> q of this step must match q's receives from x, one to one
      for (const Transfer& t : step(x).sends)
        if (count_with(step(x).sends, t.peer) != count_with(step(t.peer).recvs, x)) return false;
    for (int x : group) ranks_[x]->open_step(index(x));
    for (int x : group) {
      RankDevice& to = *ranks_[x];
      COLLMM_CUDA(cudaSetDevice(to.device()));
      std::map<int, int> seen;
      for (const Transfer& t : step(x).recvs) {
        const Transfer& s = nth_with(step(t.peer).sends, x, seen[t.peer]++);
        RankDevice& from = *ranks_[t.peer];
        if (from.bytes(s.slice) != to.bytes(t.slice))
          throw std::runtime_error("local transport: rank " + std::to_string(t.peer) + " sends " +
                                   std::to_string(from.bytes(s.slice)) + " bytes, rank " + std::to_string(x) +
                                   " receives " + std::to_string(to.bytes(t.slice)));
        COLLMM_CUDA(cudaStreamWaitEvent(stream(x), from.events(index(t.peer)).start, 0));
        copy(to, to.ptr(t.slice), from, from.ptr(s.slice), to.bytes(t.slice), stream(x));
      }
      COLLMM_CUDA(cudaEventRecord(to.events(index(x)).copied, stream(x)));
    }
    for (int x : group) {
      COLLMM_CUDA(cudaSetDevice(ranks_[x]->device()));
      for (const Transfer& t : step(x).sends)
        COLLMM_CUDA(cudaStreamWaitEvent(stream(x), ranks_[t.peer]->events(index(t.peer)).copied, 0));
      ranks_[x]->close_step(index(x));
    }
    for (int x : group) ++cur_[x];
    return true;
  }

  // A collective: every rank must stand at the same kind of collective.
  bool try_collective(StepKind k) {
    const int P = static_cast<int>(ranks_.size());
    for (int q = 0; q < P; ++q)
      if (!at(q, k)) {
        if (!finished(q) && is_comm(step(q).kind) && step(q).kind != StepKind::sendrecv && !ranks_[q]->skipped(index(q)))
          throw std::runtime_error("local transport: ranks disagree on the next collective (" + where() + ")");
        return false;
      }
    for (int x = 0; x < P; ++x) ranks_[x]->open_step(index(x));
    for (int x = 0; x < P; ++x) {
      RankDevice& to = *ranks_[x];
      const Step& s = step(x);
      COLLMM_CUDA(cudaSetDevice(to.device()));
      if (k == StepKind::allgather) {
        for (int q = 0; q < P; ++q) {
          RankDevice& from = *ranks_[q];
          const Slice& src = step(q).a;
          if (from.bytes(src) != to.bytes(s.parts.at(q)))
            throw std::runtime_error("local transport: allgather part " + std::to_string(q) + " differs in size");
          if (q != x) COLLMM_CUDA(cudaStreamWaitEvent(stream(x), from.events(index(q)).start, 0));
          copy(to, to.ptr(s.parts[q]), from, from.ptr(src), to.bytes(src), stream(x));
        }
      } else {  // reduce_scatter: out = sum over q of rank q's parts[x]
        const Dtype out = to.dtype_of(s.out.buf);
        if (to.bytes(s.out) != to.bytes(s.parts.at(x)))
          throw std::runtime_error("local transport: reduce_scatter output and part differ in size");
        copy(to, to.ptr(s.out), to, to.ptr(s.parts[x]), to.bytes(s.out), stream(x));
        for (int q = 0; q < P; ++q) {
          if (q == x) continue;
          RankDevice& from = *ranks_[q];
          const Slice& part = step(q).parts.at(x);
          if (from.bytes(part) != to.bytes(s.out))
            throw std::runtime_error("local transport: reduce_scatter part of rank " + std::to_string(q) + " differs in size");
          COLLMM_CUDA(cudaStreamWaitEvent(stream(x), from.events(index(q)).start, 0));
          add_into(to.ptr(s.out), from.ptr(part), to.bytes(s.out) / dtype_size(out), out, stream(x));
        }
      }
      COLLMM_CUDA(cudaEventRecord(to.events(index(x)).copied, stream(x)));
    }
    for (int x = 0; x < P; ++x) {
      COLLMM_CUDA(cudaSetDevice(ranks_[x]->device()));
      for (int q = 0; q < P; ++q)
        if (q != x) COLLMM_CUDA(cudaStreamWaitEvent(stream(x), ranks_[q]->events(index(q)).copied, 0));
      ranks_[x]->close_step(index(x));
    }
    for (int x = 0; x < P; ++x) ++cur_[x];
    return true;
  }

  std::string where() const {
    std::string w;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      w += (r ? "; " : "") + std::string("rank ") + std::to_string(r) + " at ";
      w += finished(static_cast<int>(r)) ? "end" : "step " + std::to_string(cur_[r]) + " " + to_string(step(static_cast<int>(r)).kind);
    }
    return w;
  }

  const std::vector<RankDevice*>& ranks_;
  std::vector<size_t> cur_;
};

}  // namespace

void issue_local_iteration(const std::vector<RankDevice*>& ranks) { Scheduler(ranks).run(); }

}  // namespace collmm::cuda
