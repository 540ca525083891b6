// c10d_transport.hpp: a c10d ProcessGroup (the user's group: gloo for CPU tensors) as what the host
// executor needs: its Transport for the plan's comm steps and its HostComm for the agreement
// checks. Host memory travels as tensors that view it (at::from_blob): nothing is copied on the way
// in or out, except where gloo needs equal parts (an allgather or reduce-scatter of uneven parts goes
// through padded scratch tensors).
#pragma once

#include <map>
#include <memory>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "comm_watch.hpp"  // Failure
#include "peer_messages.hpp"
#include "store_channel.hpp"
#include "torch_util.hpp"
#include "transport.hpp"

namespace collmm::torch_ext {

class C10dTransport : public cpu::Transport {
 public:
  explicit C10dTransport(c10d::ProcessGroup* group);
  int rank() const override;
  int size() const override;
  // recv and send of every message posted (ProcessGroup::recv/send; the tag counts this pair's
  // messages, so the k-th send to q meets q's k-th receive from us), then every Work waited for.
  void sendrecv(const std::vector<cpu::Message>& sends, const std::vector<cpu::Message>& recvs) override;
  void allgather(const void* mine, int64_t mine_rows, unsigned char* base, size_t row_bytes,
                 const std::vector<cpu::RowRange>& parts) override;
  void reduce_scatter(const void* send, void* recv, Dtype dtype, const std::vector<int64_t>& counts) override;
  bool barrier_until(std::chrono::steady_clock::time_point deadline) override;

 private:
  c10d::ProcessGroup* group_;  // alive during every call (session_for holds it)
  PeerTags tags_;
};

// The group as the process-level HostComm. Its exchanges go through `channel`, the group's Store,
// where given (host only: no wait for the device, capturable). Else they go through the group's
// own collectives: on CPU tensors where the group has a CPU backend (gloo; "cpu:gloo,cuda:nccl"),
// else on tensors of `device` (an NCCL-only group: then each one waits for the device). Every wait
// is bounded by wait_bound() and one that runs out throws c10::DistBackendError naming phase() (the
// call it waited in). Such a wait leaves the group out of step (bounded_wait) in `failure`, the
// group's. From then on every exchange raises it without posting anything. So a late rank's
// exchange meets the one still posted, or times out, never a later exchange of another size (gloo
// ends a process whose message has another size than the one posted). abort() ends this process
// (std::abort): the host executor's watchdog calls it when a run hangs past its timeout.
class C10dHostComm : public HostComm {
 public:
  C10dHostComm(c10d::ProcessGroup* group, c10::Device device, std::shared_ptr<StoreChannel> channel,
               std::shared_ptr<Failure> failure);
  int proc() const override;
  int procs() const override;
  void barrier() override;
  std::vector<std::string> allgather(const std::string& mine) override;
  std::vector<double> allgather(const std::vector<double>& mine) override;
  [[noreturn]] void abort(int code) override;

 private:
  void raise_if_failed() const;
  c10d::AllgatherOptions bounded_options() const;  // its exchanges' options: the bound, on gloo
  // Rank q's numbers, as they came: each finite and within +-2^53, else DistBackendError naming q.
  void check_numbers(int q, const double* numbers, size_t count) const;
  [[noreturn]] void bad_number(int q, const std::string& what) const;

  c10d::ProcessGroup* group_;  // alive during every call (session_for holds it)
  c10::Device device_;
  std::shared_ptr<StoreChannel> channel_;  // null: the group's collectives
  std::shared_ptr<Failure> failure_;
};

// How long the ops' waits for other ranks may last: collmm.set_timeout's value, else the group's
// own timeout (its Store's), else 30 minutes (c10d's default).
std::chrono::milliseconds wait_bound(c10d::ProcessGroup& group);

// Waits for a host-side Work of `group` (gloo) for at most wait_bound(group), for exchanges whose
// tensors the Work owns. One that runs out (or whose peer left) stays posted: c10d cannot take it
// back, so the group's collectives are out of step from then on. That is left in `failure`, the
// group's (every session on the group shares its collectives), which every later call on the group
// raises, and DistBackendError names `what` (the call it waited in).
void bounded_wait(c10d::ProcessGroup& group, c10d::Work& work, const std::string& what, Failure& failure);

// Why a wait for the other ranks on the group failed after `waited` of its `bound`. "no answer ...
// within T s" where it ran out, else "... failed after t s: <error's first line> (a peer left ...)"
// (gloo reports a peer's death at once: connection reset or closed). `peers`: the ranks the wait
// was for, where known (a stuck transfer's peers), named as the silent ones; else "the other ranks".
std::string wait_failed(int rank, int size, std::chrono::milliseconds bound, std::chrono::duration<double> waited,
                        const std::string& what, const std::string& error, const std::vector<int>& peers = {});

// What a transfer given up leaves to the group's backend: its Works and the memory they read or
// write (the call's tensors, the plan's scratch), kept until the process ends. So a transfer that
// lands late (c10d cannot take one back) writes into memory that is still owned, never into memory
// freed or handed out again.
void keep_after_give_up(std::vector<at::Tensor> tensors, std::vector<c10::intrusive_ptr<c10d::Work>> works);

}  // namespace collmm::torch_ext
