// deadline.cpp: DeadlineGuard (src/common/deadline.hpp).
#include "deadline.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

namespace collmm {

double thread_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

DeadlineGuard::DeadlineGuard(int timeout_s, std::string message, std::function<void()> on_timeout) {
  thread_ = std::thread([this, timeout_s, message = std::move(message), on_timeout = std::move(on_timeout)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (cv_.wait_for(lock, std::chrono::seconds(timeout_s), [this] { return done_; })) return;
    std::cerr << (message + "\n") << std::flush;
    on_timeout();
    std::_Exit(3);  // on_timeout must not return; never leave the job waiting if it does
  });
}

DeadlineGuard::~DeadlineGuard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace collmm
