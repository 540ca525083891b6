// step_marks.cpp: a step's profile range and its times (step_marks.hpp).
#include "step_marks.hpp"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#if defined(COLLMM_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace collmm::torch_ext {

StepRange::StepRange(const std::string& name) : record_(at::RecordScope::USER_SCOPE) {
  if (record_.isActive()) record_.before(name.c_str());
#if defined(COLLMM_NVTX)
  nvtxRangePushA(name.c_str());
#endif
}

StepRange::~StepRange() {
#if defined(COLLMM_NVTX)
  nvtxRangePop();
#endif
}

StepClock::StepClock(c10::Device device, size_t steps) : device_(device), times_(steps) {
  if (device_.is_cuda()) {
    marks_.reserve(2 * steps + 1);
    mark();
  }
  t0_ = std::chrono::steady_clock::now();
}

std::vector<StepTime> StepClock::finish() {
  if (!device_.is_cuda()) return times_;
  marks_.back().synchronize();
  for (StepTime& t : times_) {
    if (t.start_us >= 0) t.start_us = 1000 * marks_[0].elapsedTime(marks_[static_cast<size_t>(t.start_us)]);
    if (t.end_us >= 0) t.end_us = 1000 * marks_[0].elapsedTime(marks_[static_cast<size_t>(t.end_us)]);
  }
  return times_;
}

double StepClock::now() {
  if (!device_.is_cuda())
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
  return static_cast<double>(mark());
}

size_t StepClock::mark() {
  marks_.emplace_back(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
  marks_.back().record(c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_));
  return marks_.size() - 1;
}

}  // namespace collmm::torch_ext
