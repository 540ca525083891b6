// lane_pool.hpp: lanes as threads. One persistent thread per lane of a Plan (a WorkerPool whose
// rounds are the iterations). In each iteration a lane runs its steps in list order, each after
// the steps in its `waits` are done (done flags and a condition variable). It times them with the
// steady clock. The pool knows nothing of BLAS or MPI: it calls back for every step it runs.
//
//   main:    start(t0, skip) ──────────────── wait_until(deadline) ── times()
//   lane 0:       | comm 0 |  | comm 1 |  | add |
//   lane 1:       | gemm 0        | gemm 1    |        (gemm 1 waits for comm 0)
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "collmm/plan.hpp"
#include "collmm/rank_run.hpp"
#include "worker_pool.hpp"

namespace collmm::cpu {

class LanePool {
 public:
  using Clock = std::chrono::steady_clock;
  using StepFn = std::function<void(const Step&)>;

  // Starts plan.lanes threads; `plan` must outlive the pool.
  LanePool(const Plan& plan, StepFn run_step);
  LanePool(const LanePool&) = delete;
  LanePool& operator=(const LanePool&) = delete;

  // Releases the lanes for one iteration. Steps with skip[i] count as done at once and get no times.
  void start(Clock::time_point t0, std::vector<bool> skip);
  // Waits for every lane to finish the iteration; false if the deadline passed first. Rethrows the
  // first exception a step threw (the other lanes stop at their next wait).
  bool wait_until(Clock::time_point deadline);
  // After wait_until: per-step times (us from t0, -1 where not run) and the last end (us).
  const std::vector<StepTime>& times() const { return times_; }
  double total_us() const { return total_us_; }
  // What every lane is doing now, for a watchdog's message.
  std::string where() const;
  // True when a lane is inside a step of this rank's own work (a GEMM, a copy, an add): the
  // iteration is still being computed here, whatever its comm lane waits for.
  bool inside_own_work() const;

 private:
  void run_lane(int lane);        // one iteration of one lane
  bool run_lane_steps(int lane);  // false when another lane failed; throws what its own step threw

  const Plan& plan_;
  StepFn run_step_;
  std::vector<std::vector<int>> lane_steps_;  // step indices of each lane, in list order

  mutable std::mutex mutex_;  // the steps' state below; the lanes' rounds are the workers'
  std::condition_variable cv_;
  std::vector<bool> skip_;
  std::vector<char> done_;
  bool failed_ = false;
  struct LaneState {
    int step = -1;
    bool running = false;
  };
  std::vector<LaneState> state_;  // current step of each lane (-1: idle)
  Clock::time_point t0_;
  std::vector<StepTime> times_;
  double total_us_ = 0;
  WorkerPool lanes_;  // last: its threads go first, before the state they use
};

}  // namespace collmm::cpu
