// issue_threads.cpp: IssueThreads (issue_threads.hpp).
#include "issue_threads.hpp"

#include <chrono>

namespace collmm::cuda {

IssueThreads::IssueThreads(int n) : walls_(static_cast<size_t>(n), 0.0) {
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { thread_main(static_cast<size_t>(i)); });
}

IssueThreads::~IssueThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::vector<double> IssueThreads::run_all(const std::function<void(size_t)>& work,
                                          const std::function<void()>& on_error) {
  std::unique_lock<std::mutex> lock(mutex_);
  work_ = &work;
  on_error_ = &on_error;
  error_ = nullptr;
  running_ = size();
  ++generation_;
  cv_.notify_all();
  cv_.wait(lock, [this] { return running_ == 0; });
  work_ = nullptr;
  on_error_ = nullptr;
  if (error_) std::rethrow_exception(error_);
  return walls_;
}

void IssueThreads::thread_main(size_t i) {
  long seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const std::function<void(size_t)>& work = *work_;
    const std::function<void()>& on_error = *on_error_;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    std::exception_ptr failed;
    try {
      work(i);
    } catch (...) {
      failed = std::current_exception();
    }
    const double wall = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    bool first = false;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      walls_[i] = wall;
      if (failed && !error_) error_ = failed, first = true;
    }
    if (first) on_error();  // outside the lock: it may wait for NCCL
    lock.lock();
    if (--running_ == 0) cv_.notify_all();
  }
}

}  // namespace collmm::cuda
