// calibration_hooks.hpp: what a backend may offer `collmm-bench --calibrate` beyond the
// Executor interface: how its host threads issue the steps, and a way to time the device's own
// work apart from that issue. A backend whose steps a host thread enqueues on a device (cuda)
// implements this beside Executor and returns itself from Executor::calibration_hooks(); one whose
// lane threads run the steps themselves (cpu) keeps that accessor's nullptr.
#pragma once

namespace collmm {

class CalibrationHooks {
 public:
  virtual ~CalibrationHooks() = default;
  // Whether one host thread issues the steps of every local rank (cuda --transport local) rather
  // than one thread per rank (the cost model's Profile::host.shared).
  virtual bool single_issuer() const = 0;
  // Host wall time (us) the last run() spent enqueueing its steps on the device (the longest of
  // its issuing threads; with a CUDA graph, the graph's launch).
  virtual double last_issue_us() const = 0;
  // From now on, run() replays a graph of the iteration captured once per filter (as --graph
  // does) when `on`, or issues it step by step when not; returns false where the backend has no
  // graphs. Calibration times the device's own work this way, with the host's issue out of its way.
  virtual bool replay_graphs(bool on) = 0;
};

}  // namespace collmm
