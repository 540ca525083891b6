// store_channel.cpp: the ops' agreement through the group's c10d Store (store_channel.hpp).
#include "store_channel.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include <c10/util/Exception.h>

#include "collmm/types.hpp"

namespace collmm::torch_ext {

namespace {

// Bytes of a shared-memory slot: what a round's string may hold before it goes through the store.
// COLLMM_SHM_SLOT_BYTES sets another (the tests make every string travel through the store).
size_t slot_bytes() {
  const char* env = std::getenv("COLLMM_SHM_SLOT_BYTES");
  return env && *env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : 64 * 1024;
}

// This machine and this boot: ranks alike here may share memory (the nonce check proves it).
// COLLMM_SHM_HOST, where set, stands for it (ranks given different values never share memory).
std::string host_identity() {
  if (const char* env = std::getenv("COLLMM_SHM_HOST"); env && *env) return env;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string boot;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
  return std::string(name) + "/" + boot;
}

uint64_t random_u64() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

StoreChannel::StoreChannel(c10::intrusive_ptr<c10d::Store> store, std::string prefix, int rank, int size,
                           SharedMemory shared)
    : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), size_(size), shared_(shared) {}

std::string StoreChannel::key(int64_t round, int q) const {
  return prefix_ + "/" + std::to_string(round) + "/" + std::to_string(q);
}

std::vector<std::string> StoreChannel::allgather(const std::string& mine, std::chrono::milliseconds timeout,
                                                 const std::string& what) {
  if (!set_up_) {
    set_up_ = true;
    if (size_ > 1) start(timeout, what);
  }
  return shm_ ? shm_round(mine, timeout, what) : store_round(mine, timeout, what);
}

void StoreChannel::start(std::chrono::milliseconds timeout, const std::string& what) {
  // 1: how each rank means to agree and where it is; process 0 names the segment. Every channel
  // over the store begins so, whatever its kind: ranks that chose different kinds learn it here,
  // all of them, instead of reading each other's rounds as their own.
  static const char* const kKinds[] = {"store", "auto", "shm"};
  const std::string kind = kKinds[static_cast<int>(shared_)];
  const bool wants_shm = shared_ != SharedMemory::never;
  const std::string name =
      rank_ == 0 && wants_shm ? "/collmm-" + std::to_string(getpid()) + "-" + std::to_string(random_u64()) : "";
  const std::vector<std::string> hello =
      store_round(kind + "\n" + (wants_shm ? host_identity() : "") + "\n" + name, timeout, what);
  auto field = [&](int q, int i) {
    std::istringstream in(hello[static_cast<size_t>(q)]);
    std::string f;
    for (int j = 0; j <= i; ++j) std::getline(in, f);
    return f;
  };
  for (int q = 0; q < size_; ++q)
    if (field(q, 0) != kind)
      throw UsageError("the ranks chose different channels for this group: rank " + std::to_string(rank_) + " " + kind +
                       ", rank " + std::to_string(q) + " " + field(q, 0) +
                       " (collmm.set_channel, the same on every rank before the group's first call)");
  if (!wants_shm) return;
  bool one_host = true;
  for (int q = 0; q < size_; ++q) one_host = one_host && field(q, 1) == field(0, 1);
  if (!one_host) {
    if (shared_ == SharedMemory::required)
      throw UsageError(
          "channel shm: the ranks are not all on one host (their hostnames or boot ids differ); "
          "use the channel auto or store");
    return;
  }
  // 2: every rank maps the segment and writes a random number into it; 3: each says whether it
  // read every other's number there (ranks in other containers map another segment of that name).
  const std::string segment = field(0, 2);
  std::string why;
  std::unique_ptr<ShmSlots> slots = ShmSlots::open(segment, rank_, size_, slot_bytes(), why);
  const uint64_t nonce = random_u64();
  if (slots) slots->set_nonce(nonce);
  const std::vector<std::string> nonces = store_round(std::to_string(nonce), timeout, what);
  if (slots) {
    for (int q = 0; q < size_ && why.empty(); ++q)
      if (std::to_string(slots->nonce(q)) != nonces[static_cast<size_t>(q)])
        why = "rank " + std::to_string(q) + "'s memory is not this rank's (another container or namespace)";
  }
  const std::vector<std::string> verdicts = store_round(why, timeout, what);
  if (rank_ == 0) ShmSlots::unlink(segment);  // every rank has mapped it: nothing is left behind
  for (int q = 0; q < size_; ++q) {
    const std::string& v = verdicts[static_cast<size_t>(q)];
    if (v.empty()) continue;
    if (shared_ == SharedMemory::required)
      throw UsageError("channel shm: rank " + std::to_string(q) + " cannot share memory with the others: " + v +
                       "; use the channel auto or store");
    return;
  }
  shm_ = std::move(slots);
}

std::vector<std::string> StoreChannel::shm_round(const std::string& mine, std::chrono::milliseconds timeout,
                                                 const std::string& what) {
  const int64_t round = round_++;
  const bool in_store = mine.size() > shm_->slot_bytes();
  if (in_store) store_->set(key(round, rank_), std::vector<uint8_t>(mine.begin(), mine.end()));
  shm_->publish(round, mine, in_store);
  const std::vector<int> silent = shm_->wait_round(round, ShmSlots::Clock::now() + timeout);
  if (!silent.empty()) C10_THROW_ERROR(DistBackendError, no_answer(rank_, size_, silent, timeout, what));
  std::vector<std::string> all;
  for (int q = 0; q < size_; ++q) {
    std::optional<std::string> bytes = shm_->read(q, round);
    if (!bytes) {  // set before its stamp; the store's get waits for it all the same
      const std::vector<uint8_t> v = store_->get(key(round, q));
      bytes.emplace(v.begin(), v.end());
    }
    all.push_back(std::move(*bytes));
  }
  // Every rank stamped this round, so every rank has read the previous one: its key can go.
  if (stored_last_) store_->deleteKey(key(round - 1, rank_));
  stored_last_ = in_store;
  return all;
}

std::vector<std::string> StoreChannel::store_round(const std::string& mine, std::chrono::milliseconds timeout,
                                                   const std::string& what) {
  const int64_t round = round_++;
  store_->set(key(round, rank_), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> keys;
  for (int q = 0; q < size_; ++q) keys.push_back(key(round, q));
  std::vector<std::vector<uint8_t>> values;
  try {
    // multiGet waits for the keys itself, bounded by the store's timeout (set for the call where
    // collmm.set_timeout asked for another): no separate wait, one round trip to the store less.
    std::optional<c10d::StoreTimeoutGuard> bound;
    if (timeout != store_->getTimeout()) bound.emplace(*store_, timeout);
    values = store_->multiGet(keys);
  } catch (const c10::Error&) {  // DistStoreError: the wait ran out (or the store went away)
    std::vector<int> silent;
    for (int q = 0; q < size_; ++q)
      if (!store_->check({keys[static_cast<size_t>(q)]})) silent.push_back(q);
    C10_THROW_ERROR(DistBackendError, no_answer(rank_, size_, silent, timeout, what));
  }
  std::vector<std::string> all;
  for (const std::vector<uint8_t>& v : values) all.emplace_back(v.begin(), v.end());
  if (round > 0) store_->deleteKey(key(round - 1, rank_));
  return all;
}

std::string no_answer(int rank, int size, const std::vector<int>& silent, std::chrono::milliseconds timeout,
                      const std::string& what) {
  std::ostringstream m;
  m << "collmm: rank " << rank << " of " << size << ": no answer from ";
  if (silent.empty()) m << "every rank";
  for (size_t i = 0; i < silent.size(); ++i) m << (i ? ", " : "rank ") << silent[i];
  m << " within " << static_cast<double>(timeout.count()) / 1000 << " s in " << what
    << " (a rank skipped the call, stopped or died; collmm.set_timeout sets the bound)";
  return m.str();
}

}  // namespace collmm::torch_ext
