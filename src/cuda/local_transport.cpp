// local_transport.cpp: the issue of P emulated ranks' plans from one thread, in the order of
// issue_order.hpp (which the cost model's shared issuer walks too), with comm steps done as device
// copies between the ranks' buffers (see local_transport.hpp).
#include "local_transport.hpp"

#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "elementwise.hpp"
#include "issue_order.hpp"
#include "send_queues.hpp"

namespace collmm::cuda {
namespace {

void copy(RankDevice& to, void* dst, RankDevice& from, const void* src, size_t bytes, cudaStream_t st) {
  if (bytes == 0) return;
  if (to.device() == from.device())
    COLLMM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
  else
    COLLMM_CUDA(cudaMemcpyPeerAsync(dst, to.device(), src, from.device(), bytes, st));
}

// Issues the ranks' steps in the one-thread order (issue_order.hpp); a group's comm as copies.
class Scheduler : public IssueTarget {
 public:
  explicit Scheduler(const std::vector<RankDevice*>& ranks) : ranks_(ranks) {
    for (size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r]->rank() != static_cast<int>(r)) throw std::runtime_error("local transport: ranks out of order");
  }

  int ranks() const override { return static_cast<int>(ranks_.size()); }
  int steps(int r) const override { return static_cast<int>(ranks_[r]->plan().steps.size()); }
  StepKind kind(RankStep s) const override { return step(s).kind; }
  bool skipped(RankStep s) const override { return ranks_[s.rank]->skipped(s.step); }
  int transfers(RankStep s, bool send) const override {
    return static_cast<int>((send ? step(s).sends : step(s).recvs).size());
  }
  int peer(RankStep s, bool send, int i) const override { return (send ? step(s).sends : step(s).recvs)[i].peer; }
  void issue_local(RankStep s) override { ranks_[s.rank]->issue_local_step(s.step); }
  void issue_group(StepKind k, const std::vector<RankStep>& members) override {
    if (k == StepKind::sendrecv)
      sendrecv(members);
    else
      collective(k, members);
  }

 private:
  const Step& step(RankStep s) const { return ranks_[s.rank]->plan().steps[s.step]; }
  cudaStream_t stream(RankStep s) const { return ranks_[s.rank]->lane(step(s).lane); }

  void sendrecv(const std::vector<RankStep>& group) {
    std::vector<int> at(ranks_.size(), -1);  // each member's step
    SendQueues queues;
    for (RankStep x : group) {
      at[x.rank] = x.step;
      for (size_t i = 0; i < step(x).sends.size(); ++i) queues.send(x.rank, step(x).sends[i].peer, static_cast<int>(i));
    }
    for (RankStep x : group) ranks_[x.rank]->open_step(x.step);
    for (RankStep x : group) {
      RankDevice& to = *ranks_[x.rank];
      COLLMM_CUDA(cudaSetDevice(to.device()));
      for (const Transfer& t : step(x).recvs) {
        const RankStep sender{t.peer, at[t.peer]};
        const int i = queues.receive(t.peer, x.rank).send;
        if (i < 0) throw std::runtime_error("local transport: unmatched transfer with rank " + std::to_string(t.peer));
        const Transfer& s = step(sender).sends[i];
        RankDevice& from = *ranks_[t.peer];
        if (from.bytes(s.slice) != to.bytes(t.slice))
          throw std::runtime_error("local transport: rank " + std::to_string(t.peer) + " sends " +
                                   std::to_string(from.bytes(s.slice)) + " bytes, rank " + std::to_string(x.rank) +
                                   " receives " + std::to_string(to.bytes(t.slice)));
        COLLMM_CUDA(cudaStreamWaitEvent(stream(x), from.events(sender.step).start, 0));
        copy(to, to.ptr(t.slice), from, from.ptr(s.slice), to.bytes(t.slice), stream(x));
      }
      COLLMM_CUDA(cudaEventRecord(to.events(x.step).copied, stream(x)));
    }
    for (RankStep x : group) {
      COLLMM_CUDA(cudaSetDevice(ranks_[x.rank]->device()));
      for (const Transfer& t : step(x).sends)
        COLLMM_CUDA(cudaStreamWaitEvent(stream(x), ranks_[t.peer]->events(at[t.peer]).copied, 0));
      ranks_[x.rank]->close_step(x.step);
    }
  }

  // all[q] is rank q's step.
  void collective(StepKind k, const std::vector<RankStep>& all) {
    const int P = static_cast<int>(ranks_.size());
    for (RankStep x : all) ranks_[x.rank]->open_step(x.step);
    for (RankStep x : all) {
      RankDevice& to = *ranks_[x.rank];
      const Step& s = step(x);
      COLLMM_CUDA(cudaSetDevice(to.device()));
      if (k == StepKind::allgather) {
        for (int q = 0; q < P; ++q) {
          RankDevice& from = *ranks_[q];
          const Slice& src = step(all[q]).a;
          if (from.bytes(src) != to.bytes(s.parts.at(q)))
            throw std::runtime_error("local transport: allgather part " + std::to_string(q) + " differs in size");
          if (q != x.rank) COLLMM_CUDA(cudaStreamWaitEvent(stream(x), from.events(all[q].step).start, 0));
          if (q == x.rank && to.ptr(s.parts[q]) == from.ptr(src)) continue;  // in place (gemm_ar)
          copy(to, to.ptr(s.parts[q]), from, from.ptr(src), to.bytes(src), stream(x));
        }
      } else {  // reduce_scatter: out = sum over q of rank q's parts[x]
        const Dtype out = to.dtype_of(s.out.buf);
        if (to.bytes(s.out) != to.bytes(s.parts.at(x.rank)))
          throw std::runtime_error("local transport: reduce_scatter output and part differ in size");
        copy(to, to.ptr(s.out), to, to.ptr(s.parts[x.rank]), to.bytes(s.out), stream(x));
        for (int q = 0; q < P; ++q) {
          if (q == x.rank) continue;
          RankDevice& from = *ranks_[q];
          const Slice& part = step(all[q]).parts.at(x.rank);
          if (from.bytes(part) != to.bytes(s.out))
            throw std::runtime_error("local transport: reduce_scatter part of rank " + std::to_string(q) +
                                     " differs in size");
          COLLMM_CUDA(cudaStreamWaitEvent(stream(x), from.events(all[q].step).start, 0));
          add_into(to.ptr(s.out), from.ptr(part), to.bytes(s.out) / dtype_size(out), out, stream(x));
        }
      }
      COLLMM_CUDA(cudaEventRecord(to.events(x.step).copied, stream(x)));
    }
    for (RankStep x : all) {
      COLLMM_CUDA(cudaSetDevice(ranks_[x.rank]->device()));
      for (int q = 0; q < P; ++q)
        if (q != x.rank) COLLMM_CUDA(cudaStreamWaitEvent(stream(x), ranks_[q]->events(all[q].step).copied, 0));
      ranks_[x.rank]->close_step(x.step);
    }
  }

  const std::vector<RankDevice*>& ranks_;
};

}  // namespace

void issue_local_iteration(const std::vector<RankDevice*>& ranks) {
  Scheduler scheduler(ranks);
  issue_in_order(scheduler, "local transport");
}

}  // namespace collmm::cuda
