// plan_cache.hpp: the plans a session keeps (Prepared: a plan prepared on an executor of its own),
// keyed by what a plan depends on (PlanKey: the problem, dtype and options, field by field), and
// what "auto" chose per shape (src/sim/measured_choice.hpp). A plan is prepared again only when the
// problem, options or dtype change; every call then binds the caller's tensors to its buffers.
#pragma once

#include <compare>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "collmm/plan.hpp"
#include "comm_watch.hpp"
#include "executor.hpp"
#include "measured_choice.hpp"

namespace collmm::torch_ext {

// The executor of a session's plans: the ATen executor, or (CPU tensors after
// set_cpu_executor("host")) the host executor: OpenBLAS GEMMs on lane threads, the group its Transport.
enum class ExecutorKind { host, aten };

// A plan made and prepared on an executor of its own, kept for the next call of that shape.
struct Prepared {
  std::unique_ptr<Executor> executor;
  Plan plan;
};

// What a prepared plan depends on. Ordered field by field: the shape as ProblemKey orders it, then
// PlanOptions' field list (for_each_field) in its order.
struct PlanKey {
  ProblemKey shape;
  PlanOptions options;
};
std::strong_ordering operator<=>(const PlanKey&, const PlanKey&);
// "op=ag_gemm m=64 ... dtype=f32 algo=ring stages=0 ...", for messages.
std::string to_string(const PlanKey&);

class PlanCache {
 public:
  // A new executor on the session's group, for one plan.
  using MakeExecutor = std::function<std::unique_ptr<Executor>()>;
  // `host`: the session's exchanges (auto's decision on a shape's first call is collective);
  // `exchanges`: the group's failure of its collectives (a run that gave up keeps its inputs);
  // `dropping`: called before a plan is dropped (what points into the plans must go).
  PlanCache(c10::Device device, ExecutorKind kind, int rank, HostComm& host, std::shared_ptr<Failure> exchanges,
            MakeExecutor make_executor, std::function<void()> dropping);

  // The plan options for `algo`. "auto": the measured choice. The cost model's best few candidates
  // for this problem and dtype are ranked with the cpu-2core profile on CPU and h200-nvlink on CUDA,
  // then timed on this device on the shape's first call; the fastest is kept per shape. Else the
  // entry's algorithm and options, the rest at their defaults (entry_options, algo_entries.hpp).
  PlanOptions options(const Problem& problem, Dtype dtype, const std::string& algo);
  // The last options()' decision as last_auto() reports it ("" unless its algo was "auto").
  const std::string& auto_report() const { return auto_report_; }

  // This rank's plan for (problem, options, dtype) on an executor prepared for it. Made on first
  // use (collective: the executor checks that every rank prepares the same problem), then reused.
  // So a model whose layers alternate shapes (forward, backward) prepares each shape once. At most
  // kMaxPrepared are kept: one more drops the first in PlanKey's order (the same on every rank).
  // Under CUDA graph capture (`capturing`) a plan not kept throws UsageError (capture forbids
  // preparing one).
  Prepared& prepare(const Problem& problem, const PlanOptions& options, Dtype dtype, bool capturing);

 private:
  static constexpr size_t kMaxPrepared = 16;
  // This rank's median time of `options`' plan on an executor of its own, on random inputs of the
  // problem's shapes on this device (the device synchronized after each run): auto's TimeCandidate.
  double time_candidate(const Problem& problem, const PlanOptions& options, Dtype dtype, int warmup, int iters);

  c10::Device device_;
  ExecutorKind kind_;
  int rank_;
  HostComm& host_;
  std::shared_ptr<Failure> exchanges_;
  MakeExecutor make_executor_;
  std::function<void()> dropping_;
  std::map<PlanKey, Prepared> prepared_;
  AutoChooser auto_;
  std::string auto_report_;
};

}  // namespace collmm::torch_ext
