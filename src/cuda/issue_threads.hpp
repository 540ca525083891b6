// issue_threads.hpp: the host threads of cuda -g G, one per GPU this process drives (as
// nccl-tests), made once and kept: each run hands every thread its rank's issue and waits for all.
// A failure in one thread is reported to the caller at once (run_all's `on_error`, e.g. aborting the
// NCCL communicators so that the other threads, waiting in NCCL for the failed rank, return), and
// the first exception is rethrown once every thread is back.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace collmm::cuda {

class IssueThreads {
 public:
  explicit IssueThreads(int n);
  ~IssueThreads();
  IssueThreads(const IssueThreads&) = delete;
  IssueThreads& operator=(const IssueThreads&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  // Runs work(i) on thread i for every i; returns each thread's wall time (us). `on_error` runs
  // once, on the failing thread, right after the first failure.
  std::vector<double> run_all(const std::function<void(size_t)>& work, const std::function<void()>& on_error);

 private:
  void thread_main(size_t i);

  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  long generation_ = 0;
  int running_ = 0;
  const std::function<void(size_t)>* work_ = nullptr;
  const std::function<void()>* on_error_ = nullptr;
  std::exception_ptr error_;
  std::vector<double> walls_;
  std::vector<std::thread> threads_;
};

}  // namespace collmm::cuda
