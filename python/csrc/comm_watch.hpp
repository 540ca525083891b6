// comm_watch.hpp: a bound on the NCCL transfers collmm enqueues itself (nccl_comm.hpp), which c10d's
// watchdog does not see. A run hands in an event recorded on the device after its last transfer.
// One thread per process polls the events: every 20 ms while there are some, without holding the
// lock the issuing thread takes; it sleeps while there are none. Where an event has not completed
// within its bound (a peer stopped or died: its transfers never come), the thread does three
// things. It prints why on stderr. It aborts the group's backend (c10d's abort: its communicators
// end, and the kernels waiting in them return, so the host's next synchronization returns). It
// leaves the message in the run's Failure, which every later call on that group raises as
// DistBackendError.
//
// Nothing is watched under CUDA graph capture (a replay's kernels belong to the graph), as c10d
// watches nothing there either.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace collmm::torch_ext {

// What a watched run's group ended with, shared by its session's executors; empty: nothing.
class Failure {
 public:
  void set(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (why_.empty()) why_ = why;
  }
  std::string why() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return why_;
  }

 private:
  mutable std::mutex mutex_;
  std::string why_;
};

// Watches `done` (recorded after a run's transfers) for `bound` from now: `what` names the run in the
// message. Returns at once.
void watch_comm(c10::Event done, std::chrono::milliseconds bound, std::string what,
                c10::weak_intrusive_ptr<c10d::Backend> backend, std::shared_ptr<Failure> failure);

// An event of `device` for watch_comm: one it has finished with where there is one (no cudaEventCreate).
c10::Event watch_event(c10::Device device);

}  // namespace collmm::torch_ext
