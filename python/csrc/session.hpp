// session.hpp: what the ops keep per process group and device: an executor on that group (CPU
// tensors: the host executor, OpenBLAS GEMMs on lane threads with the group as its Transport, or,
// after set_cpu_executor("aten"), the ATen executor; CUDA tensors: the ATen executor), the plan
// last prepared on it, and the algorithms that "auto" chose per shape. The plan is prepared again only when the
// problem, options or dtype change; every call then binds the caller's tensors to the plan's buffers and runs it.
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

// A plan made and prepared on an executor of its own, kept for the next call of that shape.
struct Prepared {
  std::unique_ptr<Executor> executor;
  Plan plan;
};

class Session {
 public:
  Session(c10d::ProcessGroup* group, c10::Device device, ExecutorKind kind);

  HostComm& host() { return *host_; }  // the ops' own agreement checks
  int rank() const { return rank_; }
  int world() const { return world_; }

  // The plan options for `algo_name` ("auto": the cost model's pick for this problem and dtype,
  // profile cpu-2core on CPU and h200-nvlink on CUDA, remembered per shape; else the algorithm
  // with its defaults and `pieces`).
  PlanOptions options(const Problem& problem, Dtype dtype, const std::string& algo_name, int64_t pieces = 1);
  // This rank's plan for (problem, options, dtype) on an executor prepared for it: made on first
  // use (collective: the executor checks that every rank prepares the same problem), then reused,
  // so a model whose layers alternate shapes (forward, backward) prepares each shape once. At most
  // kMaxPrepared are kept.
  Prepared& prepare(const Problem& problem, const PlanOptions& options, Dtype dtype);

 private:
  static constexpr size_t kMaxPrepared = 16;
  std::unique_ptr<Executor> make_executor();

  c10d::ProcessGroup* group_;  // alive during every call (session_for holds it)
  c10::Device device_;
  ExecutorKind kind_;
  std::unique_ptr<HostComm> host_;
  int rank_ = 0, world_ = 1;
  std::map<std::string, Prepared> prepared_;
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
