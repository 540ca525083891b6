// test_deadline.cpp: DeadlineGuard (src/common/deadline.hpp), in child processes: past its deadline it
// prints its message and ends the process through on_timeout; gone before it, it does nothing.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "deadline.hpp"

namespace collmm {
namespace {

// Runs `body` in a child; its exit code (128 + signal when killed) and the seconds it took.
std::pair<int, double> in_child(void (*body)()) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    std::_Exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), s};
}

TEST(DeadlineGuard, EndsAStuckCallAtItsDeadline) {
  const auto [rc, seconds] = in_child([] {
    DeadlineGuard guard(1, "stuck on purpose", [] { std::_Exit(7); });
    std::this_thread::sleep_for(std::chrono::seconds(10));  // a call with no timeout of its own
  });
  EXPECT_EQ(rc, 7);
  EXPECT_GE(seconds, 0.9);
  EXPECT_LT(seconds, 5.0);
}

TEST(DeadlineGuard, StandsDownWhenTheCallFinishes) {
  const auto [rc, seconds] = in_child([] {
    {
      DeadlineGuard guard(1, "not reached", [] { std::_Exit(7); });
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the deadline: nothing fires
  });
  EXPECT_EQ(rc, 0);
  EXPECT_LT(seconds, 1.0 + 1.5 + 2.0);
}

}  // namespace
}  // namespace collmm
