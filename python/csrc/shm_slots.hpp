// shm_slots.hpp: the agreement's rounds through shared memory, for ranks on one host (a tensor-
// parallel group almost always is): a round costs a copy in and a poll, not a round trip to the
// store's server. StoreChannel sets it up over the store and checks that every rank maps the same
// memory (store_channel.hpp); this file holds the segment and its protocol only.
//
//   segment: nonce[P] | slot[P][2]      slot: stamp (round + 1, atomic) | length | in_store | bytes
//
//   round s, rank r:  write bytes into slot[r][s % 2], then stamp = s + 1 (release)
//                     wait until slot[q][s % 2].stamp == s + 1 for every q (acquire), read them
//
// Two buffers per rank are enough: rank r writes round s + 1 into the buffer of round s - 1 only
// after every rank stamped round s, which each did after reading round s - 1. Bytes longer than a
// slot go through the store instead (in_store marks them); the stamp still comes through here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace collmm::torch_ext {

class ShmSlots {
 public:
  using Clock = std::chrono::steady_clock;

  // Maps (creating where no rank did yet) the segment `name` (shm_open's: "/collmm-...") for `size`
  // ranks, slots of `slot_bytes` each; null where it cannot, with the reason in `why`.
  static std::unique_ptr<ShmSlots> open(const std::string& name, int rank, int size, size_t slot_bytes,
                                        std::string& why);
  static void unlink(const std::string& name);  // the name goes; every mapping stays valid
  ~ShmSlots();
  ShmSlots(const ShmSlots&) = delete;
  ShmSlots& operator=(const ShmSlots&) = delete;

  // The setup's proof that every rank maps the same memory: each writes a random number, all read.
  void set_nonce(uint64_t nonce);
  uint64_t nonce(int q) const;

  size_t slot_bytes() const { return slot_bytes_; }
  // This rank's part of `round`: `bytes` (at most slot_bytes()), or, with in_store, a mark that its
  // bytes went through the store.
  void publish(int64_t round, const std::string& bytes, bool in_store);
  // Waits until every rank published `round` or `deadline` passed: the ranks still missing (none:
  // every rank is there). It polls, yields, then sleeps 50 us between polls (a rank far behind
  // costs little CPU).
  std::vector<int> wait_round(int64_t round, Clock::time_point deadline) const;
  // Rank q's bytes of `round` (after wait_round), or nothing where they went through the store.
  std::optional<std::string> read(int q, int64_t round) const;

 private:
  struct Slot {  // in the segment; `bytes` follow it
    std::atomic<int64_t> stamp;
    int64_t length;
    int64_t in_store;
  };
  ShmSlots(void* base, size_t length, int rank, int size, size_t slot_bytes);
  Slot& slot(int q, int64_t round) const;

  void* base_;
  size_t length_;
  int rank_, size_;
  size_t slot_bytes_;
};

}  // namespace collmm::torch_ext
