// shm_slots.cpp: the agreement's rounds through shared memory (shm_slots.hpp).
#include "shm_slots.hpp"
#include "poll.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <c10/util/Exception.h>

namespace collmm::torch_ext {

namespace {
constexpr size_t kAlign = 64;  // every slot starts a cache line
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
std::string failed(const std::string& call, const std::string& name, int err) {
  return call + "(" + name + "): " + std::strerror(err);
}
}  // namespace

size_t ShmSlots::bytes_for(int size, size_t slot_bytes) {
  return round_up(sizeof(uint64_t) * static_cast<size_t>(size)) +
         static_cast<size_t>(2 * size) * round_up(sizeof(Slot) + slot_bytes);
}

std::unique_ptr<ShmSlots> ShmSlots::create(const std::string& name, int size, size_t slot_bytes, std::string& why) {
  if (slot_bytes > kMaxSlotBytes) {
    why = "slots of " + std::to_string(slot_bytes) + " bytes (at most " + std::to_string(kMaxSlotBytes) + ")";
    return nullptr;
  }
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    why = failed("shm_open", name, errno);
    return nullptr;
  }
  // Zeroed pages (every stamp 0: no round published yet), reserved now.
  const size_t length = bytes_for(size, slot_bytes);
  if (ftruncate(fd, static_cast<off_t>(length)) != 0) {
    why = failed("ftruncate", name, errno);
  } else {
    int err = EINTR;
    while (err == EINTR) err = posix_fallocate(fd, 0, static_cast<off_t>(length));
    if (err != 0) why = failed("posix_fallocate", name, err);  // ENOSPC: /dev/shm is full
  }
  if (!why.empty()) {
    close(fd);
    unlink(name);
    return nullptr;
  }
  std::unique_ptr<ShmSlots> slots = map(fd, name, 0, size, slot_bytes, why);
  if (!slots) unlink(name);
  return slots;
}

std::unique_ptr<ShmSlots> ShmSlots::attach(const std::string& name, int rank, int size, size_t slot_bytes,
                                           std::string& why) {
  if (slot_bytes > kMaxSlotBytes) {  // rank 0's figure, as it came through the store
    why = "rank 0's slots of " + std::to_string(slot_bytes) + " bytes (at most " + std::to_string(kMaxSlotBytes) + ")";
    return nullptr;
  }
  const int fd = shm_open(name.c_str(), O_RDWR | O_NOFOLLOW, 0);
  if (fd < 0) {
    why = failed("shm_open", name, errno);  // ENOENT: rank 0's memory is not this rank's
    return nullptr;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0)
    why = failed("fstat", name, errno);
  else if (static_cast<size_t>(st.st_size) != bytes_for(size, slot_bytes))
    why = name + " is not the size rank 0 made it";
  if (!why.empty()) {
    close(fd);
    return nullptr;
  }
  return map(fd, name, rank, size, slot_bytes, why);
}

std::unique_ptr<ShmSlots> ShmSlots::map(int fd, const std::string& name, int rank, int size, size_t slot_bytes,
                                        std::string& why) {
  const size_t length = bytes_for(size, slot_bytes);
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    why = failed("mmap", name, err);
    return nullptr;
  }
  return std::unique_ptr<ShmSlots>(new ShmSlots(base, length, rank, size, slot_bytes));
}

void ShmSlots::unlink(const std::string& name) { shm_unlink(name.c_str()); }

ShmSlots::ShmSlots(void* base, size_t length, int rank, int size, size_t slot_bytes)
    : base_(base), length_(length), rank_(rank), size_(size), slot_bytes_(slot_bytes) {}

ShmSlots::~ShmSlots() { munmap(base_, length_); }

uint64_t& ShmSlots::nonce_ref(int q) const { return static_cast<uint64_t*>(base_)[q]; }

void ShmSlots::set_nonce(uint64_t nonce) {
  std::atomic_ref<uint64_t>(nonce_ref(rank_)).store(nonce, std::memory_order_release);
}

uint64_t ShmSlots::nonce(int q) const {
  return std::atomic_ref<uint64_t>(nonce_ref(q)).load(std::memory_order_acquire);
}

int64_t ShmSlots::stamp(int q, int64_t round) const {
  return std::atomic_ref<int64_t>(slot(q, round).stamp).load(std::memory_order_acquire);
}

void ShmSlots::corrupt(int q, const std::string& what) const {
  C10_THROW_ERROR(DistBackendError, "collmm: rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                                        ": rank " + std::to_string(q) + "'s shared-memory slot holds " + what +
                                        ": not collmm's protocol (something else wrote into the segment)");
}

void ShmSlots::check_stamps(int q, int64_t round) const {
  const int64_t here = stamp(q, round), before = round - 2 >= first_ ? round - 1 : 0;
  if (here != before && here != round + 1 && here != -(round + 1))
    corrupt(q, "stamp " + std::to_string(here) + " in round " + std::to_string(round) +
                   " (allowed: " + std::to_string(before) + ", " + std::to_string(round + 1) + " or " +
                   std::to_string(-(round + 1)) + ")");
  // round - 1's buffer: stamped `round` (0 before the first round)
  const int64_t other = stamp(q, round + 1), last = round - 1 >= first_ ? round : 0;
  if (other != last && other != -last && other != round + 2 && other != -(round + 2))
    corrupt(q, "stamp " + std::to_string(other) + " in its buffer of round " + std::to_string(round - 1) +
                   " while this rank waits in round " + std::to_string(round) + " (allowed: " + std::to_string(last) +
                   ", " + std::to_string(-last) + ", " + std::to_string(round + 2) + " or " +
                   std::to_string(-(round + 2)) + ")");
}

ShmSlots::Slot& ShmSlots::slot(int q, int64_t round) const {
  const size_t index = static_cast<size_t>(2 * q + static_cast<int>(round % 2));
  char* first = static_cast<char*>(base_) + round_up(sizeof(uint64_t) * static_cast<size_t>(size_));
  return *reinterpret_cast<Slot*>(first + index * round_up(sizeof(Slot) + slot_bytes_));
}

void ShmSlots::publish(int64_t round, const std::string& bytes, bool in_store) {
  Slot& s = slot(rank_, round);
  s.length = in_store ? 0 : static_cast<int64_t>(bytes.size());
  s.in_store = in_store ? 1 : 0;
  if (!in_store) std::memcpy(reinterpret_cast<char*>(&s + 1), bytes.data(), bytes.size());
  std::atomic_ref<int64_t>(s.stamp).store(round + 1, std::memory_order_release);
}

void ShmSlots::give_up(int64_t round) {
  std::atomic_ref<int64_t>(slot(rank_, round).stamp).store(-(round + 1), std::memory_order_release);
}

ShmSlots::Wait ShmSlots::wait_round(int64_t round, Clock::time_point deadline) const {
  // Rank q gave up on this round, or on the last one after this rank had finished it (its stamp
  // in the other buffer: a rank writing there now stamps round + 2, never -round).
  auto gone = [&](int q) { return stamp(q, round) == -(round + 1) || (round > 0 && stamp(q, round - 1) == -round); };
  Wait w;
  poll_until(
      [&] {
        w.missing.clear();
        for (int q = 0; q < size_; ++q) {
          check_stamps(q, round);
          if (gone(q)) w.gone.push_back(q);
          if (stamp(q, round) != round + 1) w.missing.push_back(q);
        }
        if (w.missing.empty())  // a second look: stamps never go back to round + 1, so what holds now held
          for (int q = 0; q < size_; ++q)
            if (gone(q)) w.gone.push_back(q);
        return w.missing.empty() || !w.gone.empty();
      },
      deadline, kSharedMemoryPace);
  return w;
}

std::optional<std::string> ShmSlots::read(int q, int64_t round) const {
  const Slot& s = slot(q, round);
  const int64_t length = s.length, in_store = s.in_store;  // read once: the checks hold for what is used
  if (in_store != 0 && in_store != 1) corrupt(q, "in_store " + std::to_string(in_store) + " (0 or 1)");
  if (length < 0 || static_cast<uint64_t>(length) > slot_bytes_ || (in_store && length != 0))
    corrupt(q, "length " + std::to_string(length) + (in_store ? " beside in_store" : "") + " (0.." +
                   std::to_string(in_store ? 0 : slot_bytes_) + ")");
  if (in_store) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(&s + 1), static_cast<size_t>(length));
}

}  // namespace collmm::torch_ext
