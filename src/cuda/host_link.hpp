// host_link.hpp: the link of the host transport (--transport host): one real rank on this GPU
// whose P-1 peers are played by pinned host memory. Before the timed loop, what the rank will
// receive is staged in host memory (check::peer_traffic says what, PeerInputs makes it); what it
// sends lands in host memory, where check_sent() compares it with what its receivers needed.
//
// A sendrecv step, between the rank's open_step and close_step:
//
//   lane    | open: waits, start event ................................ wait sent, received | close
//   send    |        wait start | D2H send 0 | D2H send 1 ... | sent  (device -> host buffer)
//   receive |        wait start | H2D recv 0 | H2D recv 1 ... | received  (host buffer -> device)
//
// Sends and receives run on their own streams, so both directions of the link are busy at once;
// each is a cudaMemcpyAsync (a copy engine) or, in the kernel-copy mode, an SM copy kernel over
// mapped pinned memory. A receive starts no earlier than the step's start: the peers run the same
// schedule in lockstep, so that is when the real predecessor could send it (for gemm_rs after its
// add, which the step waits for). Nothing blocks the host inside an iteration.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <vector>

#include "collmm/backend_options.hpp"
#include "data.hpp"
#include "peer_inputs.hpp"
#include "rank_device.hpp"

namespace collmm::cuda {

// Pinned host memory kept across cases (pinning is slow): grows, never shrinks.
class PinnedArena {
 public:
  ~PinnedArena();
  char* get(size_t bytes);  // at least `bytes`, 256-byte aligned; earlier pointers become invalid

 private:
  char* p_ = nullptr;
  size_t size_ = 0;
};

class HostLink {
 public:
  HostLink(RankDevice& rank, check::PeerTraffic traffic, PinnedArena& arena, LinkCopy copy, bool high_priority);
  ~HostLink();
  HostLink(const HostLink&) = delete;
  HostLink& operator=(const HostLink&) = delete;

  void stage(PeerInputs& inputs);  // every receive's host buffer, as the peer would send it
  void issue(int step);            // sendrecv step `step` of the rank's plan
  void poison_sent();              // NaN (bytes 0xff) into what the sends fill
  // What the rank sent in the last run against what its receivers needed (tolerance as for C).
  Comparison check_sent(PeerInputs& inputs) const;

 private:
  struct Buffer {
    const check::LinkTransfer* transfer;
    char* host;
    size_t bytes;
  };
  void copy(void* dst, const void* src, size_t bytes, cudaStream_t st) const;

  RankDevice& rank_;
  check::PeerTraffic traffic_;
  LinkCopy copy_;
  std::vector<Buffer> received_, sent_;
  std::map<int, std::vector<const Buffer*>> recvs_of_, sends_of_;  // by step
  cudaStream_t send_st_ = nullptr, recv_st_ = nullptr;
  std::map<int, cudaEvent_t> sent_ev_, received_ev_;
};

}  // namespace collmm::cuda
