// session.hpp: what the ops keep per process group and device: an executor on that group (CPU
// tensors: the host executor, OpenBLAS GEMMs on lane threads with the group as its Transport, or,
// after set_cpu_executor("aten"), the ATen executor; CUDA tensors: the ATen executor), the plan
// last prepared on it, and the algorithms that "auto" chose per shape. The plan is prepared again only when the problem, options or dtype
// change; every call then binds the caller's tensors to the plan's buffers and runs it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "collmm/executor.hpp"
#include "collmm/plan.hpp"

namespace collmm::torch_ext {

enum class ExecutorKind { host, aten };

class Session {
 public:
  Session(c10d::ProcessGroup* group, c10::Device device, ExecutorKind kind);

  Executor& executor() { return *executor_; }
  HostComm& host() { return executor_->host(); }
  int rank() const { return rank_; }
  int world() const { return world_; }

  // The plan options for `algo_name` ("auto": the cost model's pick for this problem and dtype,
  // profile cpu-2core on CPU and h200-nvlink on CUDA, remembered per shape; else the algorithm
  // with its defaults).
  PlanOptions options(const Problem& problem, Dtype dtype, const std::string& algo_name);
  // Makes and prepares this rank's plan unless it is the one prepared last (collective: the
  // executor checks that every rank prepares the same problem). Returns it.
  const Plan& prepare(const Problem& problem, const PlanOptions& options, Dtype dtype);

 private:
  std::unique_ptr<Executor> executor_;
  bool cuda_ = false;
  int rank_ = 0, world_ = 1;
  Plan plan_;
  Dtype dtype_ = Dtype::f32;
  bool prepared_ = false;
  std::map<std::tuple<int, int64_t, int64_t, int64_t, int, int>, PlanOptions> auto_;
};

// The session of the group named `group_name` (c10d::resolve_process_group) for tensors on
// `device`, made on first use. Holds a lock for the call: one op at a time per process.
// The session keeps no reference to its group between calls (a group the user destroys is
// destroyed, its threads joined); the lock holds one for the call.
struct SessionLock {
  std::unique_lock<std::mutex> lock;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  Session& session;
};
SessionLock session_for(const std::string& group_name, c10::Device device);

// Which executor CPU tensors get from now on (sessions made later): "host" (the default) or "aten".
void set_cpu_executor(const std::string& kind);

}  // namespace collmm::torch_ext
