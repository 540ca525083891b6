// worker_pool.cpp: WorkerPool (worker_pool.hpp).
#include "worker_pool.hpp"

namespace collmm {

WorkerPool::WorkerPool(int threads) : walls_(static_cast<size_t>(threads), 0.0) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { thread_main(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::start(Work work, OnError on_error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    work_ = std::move(work);
    on_error_ = std::move(on_error);
    error_ = nullptr;
    running_ = size();
    ++generation_;
  }
  cv_.notify_all();
}

void WorkerPool::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return round_over(); });
  rethrow_round_error();
}

bool WorkerPool::wait_until(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_until(lock, deadline, [this] { return round_over(); })) return false;
  rethrow_round_error();
  return true;
}

void WorkerPool::rethrow_round_error() {
  if (error_) std::rethrow_exception(error_);
}

void WorkerPool::thread_main(int i) {
  long seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    lock.unlock();  // work_ and on_error_ stay as they are until the round is over
    const Clock::time_point start = Clock::now();
    std::exception_ptr failed;
    try {
      work_(i);
    } catch (...) {
      failed = std::current_exception();
    }
    const double wall = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    lock.lock();
    walls_[static_cast<size_t>(i)] = wall;
    if (failed && !error_) {
      error_ = failed;
      if (on_error_) {
        lock.unlock();  // it may wait (for NCCL)
        on_error_();
        lock.lock();
      }
    }
    if (--running_ == 0) cv_.notify_all();
  }
}

}  // namespace collmm
