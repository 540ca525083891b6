// poll.hpp: the one bounded poll of collmm's waits: ask whether a thing is done, yield the core
// while the answer is usually microseconds away, then nap with doubling naps, until a deadline.
// Every wait on something that has no blocking call of its own (an MPI request, a CUDA event or
// stream, a slot in shared memory) is this loop with one of the paces below.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace collmm {

// How a wait polls: `yield_for` of yielding the core between polls (a peer that is there answers
// within it), then naps from kFirstNap doubling up to `max_nap` (a waiting rank then costs a few
// percent of a core; docs/reliability.md).
struct PollPace {
  std::chrono::microseconds yield_for{0};
  std::chrono::microseconds max_nap{1000};
};
constexpr std::chrono::microseconds kFirstNap{20};

// The paces collmm's waits use, each said once.
// A wait on the host's bookkeeping (an agreement, a barrier, a collective of the job's own).
constexpr PollPace kHostPace{std::chrono::milliseconds(1), std::chrono::milliseconds(1)};
// The barrier before a run: ranks reach it within milliseconds of each other, so yield that long
// and every rank starts its clock at once; nap when one is late (stopped or gone).
constexpr PollPace kRunStartPace{std::chrono::milliseconds(200), std::chrono::milliseconds(1)};
// A wait on a peer's transfer on the cpu backend. Spinning keeps a core the BLAS threads were
// given, and a GEMM split statically over its threads runs at its slowest thread's pace (4 ranks x
// 4 cores: chunk GEMMs up to 2x slower beside a spinning comm thread). Napping from the start was
// worse: the MPI shared-memory transport moves a large message only while it is polled, and the
// transfers slowed 2x. So: yield for 20 ms (a transfer whose peer is there ends within it), then
// nap; a rank still waiting uses a few percent of a core (docs/reliability.md).
constexpr PollPace kTransferPace{std::chrono::milliseconds(20), std::chrono::milliseconds(1)};
// A wait for the device's end of a run or of a host exchange on a stream: short naps, so the end
// is seen within ~0.2 ms.
constexpr PollPace kDevicePace{std::chrono::microseconds(0), std::chrono::microseconds(200)};
// A wait on the other processes of one host through shared memory: they are usually microseconds
// away, so yield for 2 ms, then nap briefly (up to 50 us).
constexpr PollPace kSharedMemoryPace{std::chrono::milliseconds(2), std::chrono::microseconds(50)};
// Another job's lock on a shared file (a tuning cache): held for milliseconds to seconds.
constexpr PollPace kLockPace{std::chrono::microseconds(0), std::chrono::milliseconds(20)};

// Polls `done()` until it returns true (returns true) or `deadline` has passed (returns false,
// after one last poll). `done` may throw: the exception passes through.
template <class Done>
bool poll_until(Done&& done, std::chrono::steady_clock::time_point deadline, PollPace pace) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point yield_end = Clock::now() + pace.yield_for;
  std::chrono::microseconds nap = kFirstNap;
  for (;;) {
    if (done()) return true;
    const Clock::time_point now = Clock::now();
    if (now > deadline) return false;
    if (now < yield_end) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, pace.max_nap);
    }
  }
}

// The same with no deadline (a wait that a watchdog of its own bounds).
template <class Done>
void poll_until_done(Done&& done, PollPace pace) {
  poll_until(done, std::chrono::steady_clock::time_point::max(), pace);
}

}  // namespace collmm
