// lane_pool.cpp: the lane threads of the cpu backend and their step-by-step synchronization.
#include "lane_pool.hpp"

#include <algorithm>
#include <sstream>

namespace collmm::cpu {
namespace {

double us_since(LanePool::Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(LanePool::Clock::now() - t0).count();
}

}  // namespace

LanePool::LanePool(const Plan& plan, StepFn run_step)
    : plan_(plan),
      run_step_(std::move(run_step)),
      lane_steps_(static_cast<size_t>(plan.lanes)),
      state_(static_cast<size_t>(plan.lanes)),
      lanes_(plan.lanes) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (s.lane < 0 || s.lane >= plan.lanes)
      throw std::runtime_error("cpu backend: step " + std::to_string(i) + " is on lane " + std::to_string(s.lane) +
                               " of a plan with " + std::to_string(plan.lanes));
    for (int w : s.waits)
      if (w < 0 || static_cast<size_t>(w) >= i)
        throw std::runtime_error("cpu backend: step " + std::to_string(i) + " waits for step " + std::to_string(w) +
                                 ", which is not an earlier step");
    lane_steps_[static_cast<size_t>(s.lane)].push_back(static_cast<int>(i));
  }
}

void LanePool::start(Clock::time_point t0, std::vector<bool> skip) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    skip_ = std::move(skip);
    skip_.resize(plan_.steps.size(), false);
    done_.assign(plan_.steps.size(), 0);
    times_.assign(plan_.steps.size(), StepTime{});
    failed_ = false;
    total_us_ = 0;
    t0_ = t0;
  }
  lanes_.start([this](int lane) { run_lane(lane); });
}

bool LanePool::wait_until(Clock::time_point deadline) { return lanes_.wait_until(deadline); }

std::string LanePool::where() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  for (int lane = 0; lane < plan_.lanes; ++lane) {
    const LaneState& s = state_[static_cast<size_t>(lane)];
    out << "\n  lane " << lane << ": ";
    if (s.step < 0) {
      out << "finished";
      continue;
    }
    out << (s.running ? "inside" : "waiting to start") << " step " << s.step << " ("
        << describe(plan_.steps[static_cast<size_t>(s.step)]) << ")";
  }
  return out.str();
}

bool LanePool::inside_own_work() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const LaneState& s : state_)
    if (s.step >= 0 && s.running && !is_transfer(plan_.steps[static_cast<size_t>(s.step)].kind)) return true;
  return false;
}

void LanePool::run_lane(int lane) {
  run_lane_steps(lane);
  std::lock_guard<std::mutex> lock(mutex_);
  state_[static_cast<size_t>(lane)] = LaneState{};
  total_us_ = std::max(total_us_, us_since(t0_));
}

bool LanePool::run_lane_steps(int lane) {
  for (int i : lane_steps_[static_cast<size_t>(lane)]) {
    const Step& step = plan_.steps[static_cast<size_t>(i)];
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (skip_[static_cast<size_t>(i)]) {
        done_[static_cast<size_t>(i)] = 1;
        cv_.notify_all();
        continue;
      }
      state_[static_cast<size_t>(lane)] = LaneState{i, false};
      cv_.wait(lock, [&] {
        return failed_ || std::all_of(step.waits.begin(), step.waits.end(),
                                      [&](int w) { return done_[static_cast<size_t>(w)] != 0; });
      });
      if (failed_) return false;
      state_[static_cast<size_t>(lane)].running = true;
    }
    const double start = us_since(t0_);
    try {
      run_step_(step);
    } catch (...) {  // the other lanes stop at their next wait; the pool rethrows the first error
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failed_ = true;
        state_[static_cast<size_t>(lane)] = LaneState{};
      }
      cv_.notify_all();
      throw;
    }
    const double end = us_since(t0_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      times_[static_cast<size_t>(i)] = StepTime{start, end};
      done_[static_cast<size_t>(i)] = 1;
    }
    cv_.notify_all();
  }
  return true;
}

}  // namespace collmm::cpu
