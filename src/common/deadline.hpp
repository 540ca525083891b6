// deadline.hpp: a watchdog for a call that has no timeout of its own (NCCL communicator
// setup waits for every rank, forever). It is a thread that acts once the deadline passes, unless
// the guard is gone first. It prints a message naming the rank and what it was doing, then ends
// the job through `on_timeout` (which must not return: MPI_Abort, or _Exit where there is no MPI).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace collmm {

// CPU seconds (user + system) this thread has used so far (what a wait cost, in messages and tests).
double thread_cpu_seconds();
// CPU seconds (user + system) the whole process has used so far.
double process_cpu_seconds();

class DeadlineGuard {
 public:
  DeadlineGuard(int timeout_s, std::string message, std::function<void()> on_timeout);
  ~DeadlineGuard();  // the guarded call finished: the watchdog stands down
  DeadlineGuard(const DeadlineGuard&) = delete;
  DeadlineGuard& operator=(const DeadlineGuard&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace collmm
