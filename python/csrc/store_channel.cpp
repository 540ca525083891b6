// store_channel.cpp: the ops' agreement through the group's c10d Store (store_channel.hpp).
#include "store_channel.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

#include <c10/util/Exception.h>

#include "collmm/types.hpp"

namespace collmm::torch_ext {

namespace {

// Bytes of a shared-memory slot: what a round's string may hold before it goes through the store.
// COLLMM_SHM_SLOT_BYTES sets another (the tests make every string travel through the store).
// Rank 0's value counts (sent in the first round), so the ranks cannot size the segment apart.
size_t slot_bytes() {
  const char* env = std::getenv("COLLMM_SHM_SLOT_BYTES");
  return env && *env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : 64 * 1024;
}

// How long a request to the store may outlast the call's timeout: FileStore's wait ends 1 s after
// it (measured: a 2 s timeout raises after 3.0 s), TCPStore's within milliseconds.
constexpr std::chrono::seconds kStoreGrace{2};

// What a rank that gave up on a round (its wait ran out) leaves in its key of that round.
const std::string kGaveUp = std::string("\0collmm: gave up", 17);

// The deadline `timeout` from now; 0 (a store's "no timeout") or years: none.
ShmSlots::Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0 || timeout > std::chrono::hours(24 * 365)) return ShmSlots::Clock::time_point::max();
  return ShmSlots::Clock::now() + timeout;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string t = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) t += (i ? ", " : "") + std::to_string(ranks[i]);
  return t;
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

void StoreChannel::set_key(const std::string& k, const std::string& value, std::chrono::milliseconds timeout,
                           const std::string& what) {
  try {
    store_.call([k, v = std::vector<uint8_t>(value.begin(), value.end())](c10d::Store& s) { s.set(k, v); },
                requests_until_);
  } catch (const StoreStuck& e) {
    C10_THROW_ERROR(DistBackendError, store_silent(timeout, what, e.what()));
  } catch (const c10::DistNetworkError& e) {
    C10_THROW_ERROR(DistBackendError, store_gone(what, e.what()));
  }
}

std::string StoreChannel::store_silent(std::chrono::milliseconds timeout, const std::string& what,
                                       const std::string& why) const {
  std::ostringstream m;
  m << who() << "the group's Store did not answer within " << static_cast<double>(timeout.count()) / 1000 << " s (+"
    << kStoreGrace.count() << " s) in " << what << " (" << why
    << "): its server stopped or is unreachable (under torchrun or init_method tcp:// rank 0's process hosts it; "
       "collmm.set_timeout sets the bound)";
  return m.str();
}

std::string StoreChannel::store_gone(const std::string& what, const std::string& why) const {
  return who() + "the group's Store failed in " + what + ": " + why.substr(0, why.find('\n')) +
         " (its server's process left: under torchrun or init_method tcp:// that is rank 0's)";
}

std::string StoreChannel::key(int64_t round, int q) const {
  return prefix_ + "/" + std::to_string(round) + "/" + std::to_string(q);
}

std::vector<std::string> StoreChannel::allgather(const std::string& mine, std::chrono::milliseconds timeout,
                                                 const std::string& what) {
  if (!out_of_step_.empty())
    C10_THROW_ERROR(DistBackendError, who() + "the group's agreement is out of step since " + out_of_step_ + " (in " +
                                          what + "): make a new group for the ops (dist.new_group)");
  // Every request to the store in this call ends by its timeout, plus kStoreGrace for the store's
  // own error, where it has one, to come first (it names the silent ranks).
  requests_until_ = deadline_after(timeout);
  if (requests_until_ != ShmSlots::Clock::time_point::max()) requests_until_ += kStoreGrace;
  if (!set_up_) {
    set_up_ = true;
    if (size_ > 1) try {
        start(timeout, what);
      } catch (const UsageError&) {  // decided alike on every rank: the store from here on
        throw;
      } catch (const std::exception& e) {  // a wait or the store failed, maybe on this rank only
        const std::string why = e.what();
        out_of_step_ = "its setup failed at the first call (" + why.substr(0, why.find('\n')) + ")";
        throw;
      }
  }
  return shm_ ? shm_round(mine, timeout, what) : store_round(mine, timeout, what);
}

void StoreChannel::start(std::chrono::milliseconds timeout, const std::string& what) {
  // 1: how each rank means to agree and where it is; rank 0 names a segment (a random name, not
  // made yet) and sends its slot size. Every channel over the store begins so, whatever its kind:
  // ranks that chose different kinds learn it here, all of them, instead of reading each other's
  // rounds as their own.
  const std::string kind = shared_ == SharedMemory::never      ? "store"
                           : shared_ == SharedMemory::required ? "shm"
                                                               : "auto";
  const bool wants_shm = shared_ != SharedMemory::never;
  const std::string name =
      rank_ == 0 && wants_shm ? "/collmm-" + std::to_string(getpid()) + "-" + std::to_string(random_u64()) : "";
  const std::vector<std::string> hello =
      store_round(kind + "\n" + (wants_shm ? host_identity() : "") + "\n" + name + "\n" + std::to_string(slot_bytes()),
                  timeout, what);
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
  // Every rank knows the segment's name from here on, and every rank unlinks it when the setup
  // ends, however it ends (its mapping stays). So a segment rank 0 made is gone from /dev/shm once
  // any rank is through, whichever rank died or stopped on the way.
  const std::string segment = field(0, 2);
  if (segment.rfind("/collmm-", 0) != 0 || segment.find('/', 1) != std::string::npos)
    C10_THROW_ERROR(DistBackendError, who() + "rank 0 named the shared memory '" + segment + "', not /collmm-...");
  struct Unlink {
    const std::string& name;
    ~Unlink() { ShmSlots::unlink(name); }
  } unlink_segment{segment};
  // 2: every rank says it has read the name; only then does rank 0 make the segment (a rank that
  // dies later leaves a name that every other rank knows). 3: rank 0 sends the random number it
  // wrote there (or why it could not make it). Each rank maps the segment and checks that it reads
  // that number (ranks in other containers or namespaces find no segment of that name, or another
  // one). 4: each says whether it could.
  store_round("", timeout, what);
  std::string why;
  std::unique_ptr<ShmSlots> slots;
  const uint64_t nonce = random_u64();
  if (rank_ == 0) {
    slots = ShmSlots::create(segment, size_, slot_bytes(), why);
    if (slots) slots->set_nonce(nonce);
  }
  const std::vector<std::string> made = store_round(slots ? std::to_string(nonce) : "!" + why, timeout, what);
  if (rank_ != 0) {
    const std::string& zero = made[0];
    errno = 0;
    char* end = nullptr;
    const std::string bytes = field(0, 3);
    const unsigned long long slot = std::strtoull(bytes.c_str(), &end, 10);
    if (!zero.empty() && zero[0] == '!')
      why = "rank 0 could not make the shared memory: " + zero.substr(1);
    else if (bytes.empty() || *end != '\0' || errno != 0)
      why = "rank 0 sent the slot size '" + bytes + "'";
    else
      slots = ShmSlots::attach(segment, rank_, size_, slot, why);
    if (slots && std::to_string(slots->nonce(0)) != zero)
      why = "rank 0's memory is not this rank's (another container or namespace)";
  }
  const std::vector<std::string> verdicts = store_round(why, timeout, what);
  for (int q = 0; q < size_; ++q) {
    const std::string& v = verdicts[static_cast<size_t>(q)];
    if (v.empty()) continue;
    if (shared_ == SharedMemory::required)
      throw UsageError("channel shm: rank " + std::to_string(q) + " cannot share memory with the others: " + v +
                       "; use the channel auto or store");
    return;
  }
  slots->set_first_round(round_);
  shm_ = std::move(slots);
  stored_last_ = true;  // the verdicts' key: the first shared-memory round deletes it
}

std::string StoreChannel::who() const {
  return "collmm: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": ";
}

void StoreChannel::raise_gone(int64_t round, const std::vector<int>& gone, const std::string& what) {
  give_up(round, ranks_text(gone) + " gave up on a call");
  C10_THROW_ERROR(DistBackendError, who() + ranks_text(gone) + " gave up waiting in " + what +
                                        " (its wait ran out: the ranks are out of step)");
}

void StoreChannel::forget(const std::string& k) {
  try {  // every rank is past the round: a key left behind costs the store a few bytes, no more
    store_.call([k](c10d::Store& s) { return s.deleteKey(k); }, requests_until_);
  } catch (const std::exception&) {  // the next request finds out what went wrong
  }
}

void StoreChannel::give_up(int64_t round, const std::string& why) {
  out_of_step_ = why;
  try {  // so that a rank still on its way to this round does not take it for finished
    if (shm_) shm_->give_up(round);
    // Posted: it runs after a request of this rank's that the store has not answered yet, if any
    // (then it is not waited for).
    const bool stuck = store_.stuck();
    const auto soon = ShmSlots::Clock::now() + std::chrono::seconds(1);
    std::future<void> marked = store_.post(
        [k = key(round, rank_)](c10d::Store& s) { s.set(k, std::vector<uint8_t>(kGaveUp.begin(), kGaveUp.end())); },
        soon);
    if (!stuck) marked.wait_until(soon);
  } catch (const std::exception&) {  // the store went away or stopped: nothing more to tell
  }
}

std::vector<std::string> StoreChannel::shm_round(const std::string& mine, std::chrono::milliseconds timeout,
                                                 const std::string& what) {
  const int64_t round = round_++;
  try {
    return shm_round(round, mine, timeout, what);
  } catch (...) {  // whatever failed (the store's set, a wait), the others must not wait for this rank
    if (out_of_step_.empty()) give_up(round, "a call's agreement failed on this rank");
    throw;
  }
}

std::vector<std::string> StoreChannel::shm_round(int64_t round, const std::string& mine,
                                                 std::chrono::milliseconds timeout, const std::string& what) {
  const bool in_store = mine.size() > shm_->slot_bytes();
  if (in_store) set_key(key(round, rank_), mine, timeout, what);
  shm_->publish(round, mine, in_store);
  const ShmSlots::Wait w = shm_->wait_round(round, deadline_after(timeout));
  if (!w.gone.empty()) raise_gone(round, w.gone, what);
  if (!w.missing.empty()) {
    give_up(round, "a wait ran out");
    C10_THROW_ERROR(DistBackendError, no_answer(rank_, size_, w.missing, timeout, what));
  }
  std::vector<std::string> all(static_cast<size_t>(size_));
  std::vector<int> in_store_ranks;
  for (int q = 0; q < size_; ++q) {
    std::optional<std::string> bytes = shm_->read(q, round);
    if (bytes)
      all[static_cast<size_t>(q)] = std::move(*bytes);
    else
      in_store_ranks.push_back(q);
  }
  if (!in_store_ranks.empty()) {  // set before their stamps; multiGet waits for any not at the server yet
    const std::vector<std::string> values = gather_keys(round, in_store_ranks, timeout, what);
    for (size_t i = 0; i < values.size(); ++i) all[static_cast<size_t>(in_store_ranks[i])] = values[i];
  }
  // Every rank stamped this round, so every rank has read the previous one: its key can go.
  const bool delete_last = stored_last_;
  stored_last_ = in_store;
  if (delete_last) forget(key(round - 1, rank_));
  return all;
}

std::vector<std::string> StoreChannel::gather_keys(int64_t round, const std::vector<int>& ranks,
                                                   std::chrono::milliseconds timeout, const std::string& what) {
  std::vector<std::string> keys;
  for (int q : ranks) keys.push_back(key(round, q));
  std::vector<std::vector<uint8_t>> values;
  try {
    // multiGet waits for the keys itself, bounded by the store's timeout (set for the call where
    // collmm.set_timeout asked for another): no separate wait, one round trip to the store less.
    values = store_.call(
        [keys, timeout](c10d::Store& s) {
          std::optional<c10d::StoreTimeoutGuard> bound;
          if (timeout.count() > 0 && timeout != s.getTimeout()) bound.emplace(s, timeout);
          return s.multiGet(keys);
        },
        requests_until_);
  } catch (const StoreStuck& e) {  // the server did not answer: a peer's silence cannot be told apart
    give_up(round, "the group's Store did not answer");
    C10_THROW_ERROR(DistBackendError, store_silent(timeout, what, e.what()));
  } catch (const c10::DistNetworkError& e) {  // the connection to the server broke
    give_up(round, "the group's Store failed");
    C10_THROW_ERROR(DistBackendError, store_gone(what, e.what()));
  } catch (const c10::Error&) {        // DistStoreError: the wait ran out
    give_up(round, "a wait ran out");  // first: a rank on its way must find the mark soon
    std::vector<int> silent;
    try {
      const std::vector<bool> there = store_.call(
          [keys](c10d::Store& s) {
            std::vector<bool> there;
            for (const std::string& k : keys) there.push_back(s.check({k}));
            return there;
          },
          ShmSlots::Clock::now() + std::chrono::seconds(1));
      for (size_t i = 0; i < keys.size(); ++i)
        if (!there[i]) silent.push_back(ranks[i]);
    } catch (const std::exception&) {  // the store itself is gone: no rank to name
    }
    C10_THROW_ERROR(DistBackendError, no_answer(rank_, size_, silent, timeout, what));
  }
  std::vector<std::string> all;
  std::vector<int> gone;
  for (size_t i = 0; i < values.size(); ++i) {
    all.emplace_back(values[i].begin(), values[i].end());
    if (all.back() == kGaveUp) gone.push_back(ranks[i]);
  }
  if (!gone.empty()) raise_gone(round, gone, what);
  return all;
}

std::vector<std::string> StoreChannel::store_round(const std::string& mine, std::chrono::milliseconds timeout,
                                                   const std::string& what) {
  const int64_t round = round_++;
  try {
    set_key(key(round, rank_), mine, timeout, what);
  } catch (...) {
    give_up(round, "a call's agreement failed on this rank");
    throw;
  }
  std::vector<int> ranks(static_cast<size_t>(size_));
  std::iota(ranks.begin(), ranks.end(), 0);
  std::vector<std::string> all = gather_keys(round, ranks, timeout, what);
  if (round > 0) forget(key(round - 1, rank_));
  return all;
}

std::string no_answer(int rank, int size, const std::vector<int>& silent, std::chrono::milliseconds timeout,
                      const std::string& what) {
  std::ostringstream m;
  m << "collmm: rank " << rank << " of " << size << ": no answer from ";
  m << (silent.empty() ? "the other ranks" : ranks_text(silent));
  m << " within " << static_cast<double>(timeout.count()) / 1000 << " s in " << what
    << " (a rank skipped the call, stopped or died; collmm.set_timeout sets the bound)";
  return m.str();
}

}  // namespace collmm::torch_ext
