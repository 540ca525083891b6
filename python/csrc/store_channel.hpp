// store_channel.hpp: an allgather of small strings through the group's c10d Store (the key-value
// store the group was made with: TCPStore under torchrun, FileStore with file://), host only. The
// ops agree over it on an NCCL-only group, whose own collectives run on the device and would make
// the host wait for everything queued before the call. A store exchange waits only for the other
// ranks' hosts, and runs under CUDA graph capture too.
//
// Through the store, a round costs three requests (TCPStore: set, which is not answered, multiGet
// and delete: two round trips), the same on every rank:
//
//   round s, rank r:  set  <prefix>/<s>/<r> = mine
//                     multiGet <prefix>/<s>/<q> for every q (it waits for them, bounded by the
//                     timeout: the store's wait, then its get)
//                     delete <prefix>/<s-1>/<r> (every rank has read it: each wrote round s after
//                     finishing round s-1)
//
// A channel's first round tells every rank how the others mean to agree (set_channel's kind) and
// where they are: ranks that chose different kinds raise UsageError, all of them, at that first
// call. Where every rank is on this host (SharedMemory::where_local, the default, or ::required),
// three more store rounds set up shared memory (shm_slots.hpp) and every later round goes through
// it: a copy and a poll, no request to the store's server (long strings still travel through the
// store). The setup checks that every rank maps the same memory: hostname and boot id alike, then
// a random number rank 0 wrote and every rank read back. So ranks in separate containers or
// namespaces on one machine fall back to the store (or, ::required, are refused). Rank 0 makes the
// segment only once every rank knows its name, and every rank unlinks the name when the setup ends
// however it ends: no segment stays in /dev/shm after any rank dies or stops during the setup. The
// mapping goes with the channel (its session goes when its group is destroyed: session.hpp).
//
// Every request to the store runs on a thread of the channel's own, bounded by the call's timeout
// (bounded_store.hpp): a store whose server stopped (rank 0 SIGSTOPped, under torchrun the
// TCPStore's host) cannot hold a rank past it.
//
// A wait that runs out throws c10::DistBackendError (torch.distributed.DistBackendError in
// Python) naming the ranks that did not answer and `what` (the call it waited in). The rank then
// marks that round as given up (in shared memory and in its key). So a rank that comes late raises
// too instead of taking the round for finished. Every later call of the channel raises, as a
// timed-out NCCL communicator is aborted: the ranks' rounds no longer match (make a new group).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "bounded_store.hpp"
#include "shm_slots.hpp"

namespace collmm::torch_ext {

enum class SharedMemory { never, where_local, required };  // set_channel's store, auto, shm

class StoreChannel {
 public:
  StoreChannel(c10::intrusive_ptr<c10d::Store> store, std::string prefix, int rank, int size,
               SharedMemory shared = SharedMemory::where_local);
  std::vector<std::string> allgather(const std::string& mine, std::chrono::milliseconds timeout,
                                     const std::string& what);
  // After the first allgather: whether the rounds go through shared memory.
  bool shared_memory() const { return shm_ != nullptr; }

 private:
  std::string key(int64_t round, int q) const;
  std::vector<std::string> store_round(const std::string& mine, std::chrono::milliseconds timeout,
                                       const std::string& what);
  std::vector<std::string> shm_round(const std::string& mine, std::chrono::milliseconds timeout,
                                     const std::string& what);
  std::vector<std::string> shm_round(int64_t round, const std::string& mine, std::chrono::milliseconds timeout,
                                     const std::string& what);
  void forget(const std::string& key);  // deletes a key of a finished round, if the store can
  // Sets this rank's key; a store that fails or does not answer raises DistBackendError.
  void set_key(const std::string& key, const std::string& value, std::chrono::milliseconds timeout,
               const std::string& what);
  // The messages of a store that did not answer by the call's deadline, and of one that failed.
  std::string store_silent(std::chrono::milliseconds timeout, const std::string& what, const std::string& why) const;
  std::string store_gone(const std::string& what, const std::string& why) const;
  // The strings `ranks` set for `round` in their keys, read by one multiGet bounded by `timeout`.
  std::vector<std::string> gather_keys(int64_t round, const std::vector<int>& ranks, std::chrono::milliseconds timeout,
                                       const std::string& what);
  std::string who() const;  // "collmm: rank r of P: ", the start of every message
  // Others gave up on `round`: so does this rank, and it raises.
  [[noreturn]] void raise_gone(int64_t round, const std::vector<int>& gone, const std::string& what);
  void start(std::chrono::milliseconds timeout, const std::string& what);
  // This rank leaves `round` unfinished: marked in shared memory and in its key, so a rank still on
  // its way does not take the round for finished; every later call raises (the ranks are out of step).
  void give_up(int64_t round, const std::string& why);

  BoundedStore store_;
  ShmSlots::Clock::time_point requests_until_;  // the deadline of every store request of the call
  std::string prefix_;
  int rank_, size_;
  SharedMemory shared_;
  bool set_up_ = false;
  std::unique_ptr<ShmSlots> shm_;
  int64_t round_ = 0;
  bool stored_last_ = false;  // this rank's key of the last round is to be deleted (shared-memory rounds)
  std::string out_of_step_;   // why the ranks' rounds no longer match, once they do not
};

// The message of a wait that ran out, the same for every channel: "collmm: rank r of P: no answer
// from rank(s) ... within T s in <what> (collmm.set_timeout)".
std::string no_answer(int rank, int size, const std::vector<int>& silent, std::chrono::milliseconds timeout,
                      const std::string& what);

}  // namespace collmm::torch_ext
