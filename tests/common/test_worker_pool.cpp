// test_worker_pool.cpp: WorkerPool (src/common/worker_pool.hpp): every thread runs its part of
// every round, a round's first exception comes back from the wait once all threads are back (with
// on_error run once, on the failing thread), and a bounded wait says when the round outlives it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "worker_pool.hpp"

namespace collmm {
namespace {

TEST(WorkerPool, EveryThreadRunsItsPartOfEveryRound) {
  WorkerPool pool(4);
  ASSERT_EQ(pool.size(), 4);
  std::vector<int> calls(4, 0);
  for (int round = 1; round <= 3; ++round) {
    pool.start([&](int i) { calls[static_cast<size_t>(i)] += 1; });
    pool.wait();
    EXPECT_EQ(calls, std::vector<int>(4, round));
    ASSERT_EQ(pool.wall_us().size(), 4u);
    for (double w : pool.wall_us()) EXPECT_GE(w, 0.0);
  }
}

TEST(WorkerPool, TheFirstErrorComesBackOnceEveryThreadIsBack) {
  WorkerPool pool(3);
  std::atomic<int> finished{0}, on_error_calls{0};
  std::atomic<bool> released{false};
  pool.start(
      [&](int i) {
        if (i == 1) throw std::runtime_error("thread 1 failed");
        while (!released) std::this_thread::yield();  // held until on_error releases it
        ++finished;
      },
      [&] {
        ++on_error_calls;
        released = true;
      });
  try {
    pool.wait();
    ADD_FAILURE() << "the round's error was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "thread 1 failed");
  }
  EXPECT_EQ(finished, 2);  // the others were back before the wait returned
  EXPECT_EQ(on_error_calls, 1);
  pool.start([&](int) { ++finished; });  // the next round starts clean
  pool.wait();
  EXPECT_EQ(finished, 5);
}

TEST(WorkerPool, ABoundedWaitSaysWhenTheRoundOutlivesIt) {
  WorkerPool pool(2);
  std::atomic<bool> released{false};
  pool.start([&](int) {
    while (!released) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EXPECT_FALSE(pool.wait_until(WorkerPool::Clock::now() + std::chrono::milliseconds(20)));
  released = true;
  EXPECT_TRUE(pool.wait_until(WorkerPool::Clock::now() + std::chrono::seconds(30)));
}

}  // namespace
}  // namespace collmm
