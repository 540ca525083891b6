// step_marks.hpp: what the ATen executor leaves of each step outside itself: a range named like the
// bench's trace boxes in every profile (StepRange), and, when a caller asks, the step's times
// (StepClock).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <ATen/record_function.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include "collmm/rank_run.hpp"  // StepTime

namespace collmm::torch_ext {

// A step's range in every profile: RECORD_FUNCTION's (torch.profiler) and, where built with the
// NVTX headers, an NVTX range (nsys).
class StepRange {
 public:
  explicit StepRange(const std::string& name);
  ~StepRange();
  StepRange(const StepRange&) = delete;
  StepRange& operator=(const StepRange&) = delete;

 private:
  at::RecordFunction record_;
};

// Step times of one run, only when asked for. On CPU, the host clock (a comm step ends when its wait
// returns). On CUDA, timing events on the device's current stream: a comm step's start is where the
// stream reached its issue, its end where the stream may go on after it.
class StepClock {
 public:
  StepClock(c10::Device device, size_t steps);
  void start(size_t i) { times_[i].start_us = now(); }
  void end(size_t i) { times_[i].end_us = now(); }
  // The times in microseconds from the run's start (waits for the device's events).
  std::vector<StepTime> finish();

 private:
  double now();   // CPU: microseconds; CUDA: the index of an event recorded now
  size_t mark();  // records an event on the device's current stream
  c10::Device device_;
  std::vector<StepTime> times_;
  std::vector<c10::Event> marks_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace collmm::torch_ext
