// shm_slots.cpp: the agreement's rounds through shared memory (shm_slots.hpp).
#include "shm_slots.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace collmm::torch_ext {

namespace {
static_assert(std::atomic<int64_t>::is_always_lock_free, "the stamps are shared between processes");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the nonces are shared between processes");

constexpr size_t kAlign = 64;  // a slot per cache line boundary
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

std::unique_ptr<ShmSlots> ShmSlots::open(const std::string& name, int rank, int size, size_t slot_bytes,
                                         std::string& why) {
  const size_t length = round_up(sizeof(uint64_t) * static_cast<size_t>(size)) +
                        static_cast<size_t>(2 * size) * round_up(sizeof(Slot) + slot_bytes);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) {
    why = "shm_open(" + name + "): " + std::strerror(errno);
    return nullptr;
  }
  // Every rank sizes it alike; the pages start zeroed (every stamp 0: no round published yet).
  if (ftruncate(fd, static_cast<off_t>(length)) != 0) {
    why = "ftruncate(" + name + ", " + std::to_string(length) + "): " + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    why = "mmap(" + name + "): " + std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<ShmSlots>(new ShmSlots(base, length, rank, size, slot_bytes));
}

void ShmSlots::unlink(const std::string& name) { shm_unlink(name.c_str()); }

ShmSlots::ShmSlots(void* base, size_t length, int rank, int size, size_t slot_bytes)
    : base_(base), length_(length), rank_(rank), size_(size), slot_bytes_(slot_bytes) {}

ShmSlots::~ShmSlots() { munmap(base_, length_); }

void ShmSlots::set_nonce(uint64_t nonce) {
  reinterpret_cast<std::atomic<uint64_t>*>(base_)[rank_].store(nonce, std::memory_order_release);
}

uint64_t ShmSlots::nonce(int q) const {
  return reinterpret_cast<const std::atomic<uint64_t>*>(base_)[q].load(std::memory_order_acquire);
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
  s.stamp.store(round + 1, std::memory_order_release);
}

std::vector<int> ShmSlots::wait_round(int64_t round, Clock::time_point deadline) const {
  std::vector<int> missing;
  for (long polls = 0;; ++polls) {
    missing.clear();
    for (int q = 0; q < size_; ++q)
      if (slot(q, round).stamp.load(std::memory_order_acquire) != round + 1) missing.push_back(q);
    if (missing.empty() || Clock::now() > deadline) return missing;
    if (polls < 2000)
      std::this_thread::yield();  // the others are usually microseconds away
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::optional<std::string> ShmSlots::read(int q, int64_t round) const {
  const Slot& s = slot(q, round);
  if (s.in_store) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(&s + 1), static_cast<size_t>(s.length));
}

}  // namespace collmm::torch_ext
