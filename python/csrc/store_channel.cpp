// store_channel.cpp: the ops' agreement through the group's c10d Store (store_channel.hpp).
#include "store_channel.hpp"

#include <optional>
#include <sstream>

#include <c10/util/Exception.h>

namespace collmm::torch_ext {

StoreChannel::StoreChannel(c10::intrusive_ptr<c10d::Store> store, std::string prefix, int rank, int size)
    : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), size_(size) {}

std::string StoreChannel::key(int64_t round, int q) const {
  return prefix_ + "/" + std::to_string(round) + "/" + std::to_string(q);
}

std::vector<std::string> StoreChannel::allgather(const std::string& mine, std::chrono::milliseconds timeout,
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
