// shm_slots.hpp: the agreement's rounds through shared memory, for ranks on one host (a tensor-
// parallel group almost always is): a round costs a copy in and a poll, not a round trip to the
// store's server. StoreChannel sets it up over the store and checks that every rank maps the same
// memory (store_channel.hpp); this file holds the segment and its protocol only.
//
//   segment: nonce[P] | slot[P][2]      slot: stamp | length | in_store | bytes
//
//   round s, rank r:  write bytes into slot[r][s % 2], then stamp = s + 1 (release)
//                     wait until slot[q][s % 2].stamp == s + 1 for every q (acquire), read them
//
// Two buffers per rank are enough: rank r writes round s + 1 into the buffer of round s - 1 only
// after every rank stamped round s, which each did after reading round s - 1. Bytes longer than a
// slot go through the store instead (in_store marks them); the stamp still comes through here. A
// rank that gives up on round s (its wait ran out) stamps -(s + 1): the others see that it left.
//
// What a peer wrote is checked before it is used. While this rank waits in round s, rank q's
// buffer of round s holds s - 1 (round s - 2; 0 before the second round), s + 1 or -(s + 1). Its
// other buffer holds s or -s (round s - 1; 0 at the first round), s + 2 or -(s + 2) (q is one
// round ahead). A length is 0..slot_bytes and in_store 0 or 1. Anything else raises
// DistBackendError naming q.
#pragma once

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
  static constexpr size_t kMaxSlotBytes = size_t{16} << 20;

  // Rank 0 creates the segment `name` (shm_open's: "/collmm-..."; a name taken is refused) for
  // `size` ranks, slots of `slot_bytes` (at most kMaxSlotBytes). Its memory is reserved (a full
  // /dev/shm is refused here, not met later as SIGBUS). The others attach to it, checking its size.
  // Null where it cannot, with the reason in `why`. The name is unlinked by StoreChannel's setup
  // (store_channel.hpp); the mapping lives as long as this object.
  static std::unique_ptr<ShmSlots> create(const std::string& name, int size, size_t slot_bytes, std::string& why);
  static std::unique_ptr<ShmSlots> attach(const std::string& name, int rank, int size, size_t slot_bytes,
                                          std::string& why);
  static void unlink(const std::string& name);  // the name goes; every mapping stays valid
  ~ShmSlots();
  ShmSlots(const ShmSlots&) = delete;
  ShmSlots& operator=(const ShmSlots&) = delete;

  // The setup's proof that every rank maps the same memory: each writes a random number, all read.
  void set_nonce(uint64_t nonce);
  uint64_t nonce(int q) const;

  size_t slot_bytes() const { return slot_bytes_; }
  // The number of the first round through the segment (the stamps before it are 0).
  void set_first_round(int64_t round) { first_ = round; }
  // This rank's part of `round`: `bytes` (at most slot_bytes()), or, with in_store, a mark that its
  // bytes went through the store.
  void publish(int64_t round, const std::string& bytes, bool in_store);
  // This rank leaves `round` unfinished (its wait ran out): the others' waits for it end.
  void give_up(int64_t round);
  struct Wait {
    std::vector<int> missing;  // ranks that had not published `round` by the deadline
    std::vector<int> gone;     // ranks that gave up on it
  };
  // Waits until every rank published `round`, one gave up, or `deadline` passed. It polls, yields,
  // then sleeps 50 us between polls (a rank far behind costs little CPU).
  // A stamp outside the ones the protocol allows (above) raises DistBackendError naming the rank.
  Wait wait_round(int64_t round, Clock::time_point deadline) const;
  // Rank q's bytes of `round` (after wait_round), or nothing where they went through the store; a
  // length or in_store out of range raises DistBackendError naming q.
  std::optional<std::string> read(int q, int64_t round) const;

 private:
  struct Slot {  // in the segment; `bytes` follow it. stamp is accessed through std::atomic_ref
    int64_t stamp;
    int64_t length;
    int64_t in_store;
  };
  static size_t bytes_for(int size, size_t slot_bytes);
  static std::unique_ptr<ShmSlots> map(int fd, const std::string& name, int rank, int size, size_t slot_bytes,
                                       std::string& why);
  ShmSlots(void* base, size_t length, int rank, int size, size_t slot_bytes);
  Slot& slot(int q, int64_t round) const;
  uint64_t& nonce_ref(int q) const;
  int64_t stamp(int q, int64_t round) const;
  // Throws where rank q's stamps are none that `round` allows.
  void check_stamps(int q, int64_t round) const;
  [[noreturn]] void corrupt(int q, const std::string& what) const;

  void* base_;
  size_t length_;
  int rank_, size_;
  size_t slot_bytes_;
  int64_t first_ = 0;
};

}  // namespace collmm::torch_ext
