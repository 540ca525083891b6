// store_channel.hpp: an allgather of small strings through the group's c10d Store (the key-value
// store the group was made with: TCPStore under torchrun, FileStore with file://), host only. The
// ops agree over it on an NCCL-only group, whose own collectives run on the device and would make
// the host wait for everything queued before the call: a store exchange waits only for the other
// ranks' hosts, and runs under CUDA graph capture too. A round costs four round trips to the store
// (TCPStore: set, wait, get, delete), the same on every rank.
//
//   round s, rank r:  set  <prefix>/<s>/<r> = mine
//                     multiGet <prefix>/<s>/<q> for every q (it waits for them, bounded by the
//                     timeout: the store's wait, then its get)
//                     delete <prefix>/<s-1>/<r> (every rank has read it: each wrote round s after
//                     finishing round s-1)
//
// A wait that runs out throws c10::DistBackendError (torch.distributed.DistBackendError in
// Python) naming the ranks that did not answer and `what` (the call it waited in).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace collmm::torch_ext {

class StoreChannel {
 public:
  StoreChannel(c10::intrusive_ptr<c10d::Store> store, std::string prefix, int rank, int size);
  std::vector<std::string> allgather(const std::string& mine, std::chrono::milliseconds timeout,
                                     const std::string& what);

 private:
  std::string key(int64_t round, int q) const;

  c10::intrusive_ptr<c10d::Store> store_;
  std::string prefix_;
  int rank_, size_;
  int64_t round_ = 0;
};

// The message of a wait that ran out, the same for every channel: "collmm: rank r of P: no answer
// from rank(s) ... within T s in <what> (collmm.set_timeout)".
std::string no_answer(int rank, int size, const std::vector<int>& silent, std::chrono::milliseconds timeout,
                      const std::string& what);

}  // namespace collmm::torch_ext
