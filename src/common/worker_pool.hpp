// worker_pool.hpp: N persistent threads that run rounds of work together, made once and kept
// (the cpu backend's lanes, the cuda backend's issue threads of -g G, as nccl-tests has one per
// GPU). A round hands thread i the call work(i) and ends when every thread is back from it.
//
//   start(work, on_error) ── thread 0: work(0) ──┐
//                         ── thread 1: work(1) ──┴── wait() / wait_until(deadline), wall_us()
//
// A thread whose work throws ends its own part of the round; the first exception of a round is
// rethrown by the wait, once every thread is back. `on_error` runs once, on the failing thread,
// right after that first failure and outside the pool's lock. There a caller wakes what the other
// threads wait for (the cuda backend aborts its NCCL communicators, whose peers would wait for the
// failed rank).
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace collmm {

class WorkerPool {
 public:
  using Clock = std::chrono::steady_clock;
  using Work = std::function<void(int)>;
  using OnError = std::function<void()>;

  explicit WorkerPool(int threads);
  ~WorkerPool();  // stops and joins the threads (after the current round, if one runs)
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  // Starts a round: thread i runs work(i). Call when no round runs (before the first, or after a
  // wait that returned).
  void start(Work work, OnError on_error = {});
  // Waits for the round to end; rethrows its first exception.
  void wait();
  // The same, bounded: false when the deadline passed first (the round still runs).
  bool wait_until(Clock::time_point deadline);
  // After a wait: each thread's wall time in the round (us).
  const std::vector<double>& wall_us() const { return walls_; }

 private:
  void thread_main(int i);
  bool round_over() const { return running_ == 0; }
  void rethrow_round_error();

  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  long generation_ = 0;  // bumped by start()
  int running_ = 0;      // threads still inside the round's work
  Work work_;
  OnError on_error_;
  std::exception_ptr error_;
  std::vector<double> walls_;
  std::vector<std::thread> threads_;
};

}  // namespace collmm
