// session.cpp: per-group executors for the ops, their prepared plan and "auto" choices.
#include "session.hpp"

#include <algorithm>

#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>

#include "aten_executor.hpp"
#include "c10d_transport.hpp"
#include "collmm/cost_model.hpp"
#include "collmm/tuning.hpp"
#include "gemm_engine.hpp"
#include "host_executor.hpp"

namespace collmm::torch_ext {
namespace {

bool same(const Problem& a, const Problem& b) {
  return a.op == b.op && a.m == b.m && a.n == b.n && a.k == b.k && a.world == b.world && a.b_layout == b.b_layout;
}

bool same(const PlanOptions& a, const PlanOptions& b) {
  return a.algo == b.algo && a.stages == b.stages && a.post == b.post && a.gemm_lanes == b.gemm_lanes &&
         a.merge == b.merge;
}

ExecutorKind g_cpu_kind = ExecutorKind::host;  // guarded by g_mutex
std::mutex g_mutex;

}  // namespace

Session::Session(c10d::ProcessGroup* group, c10::Device device, ExecutorKind kind)
    : cuda_(device.is_cuda()), rank_(group->getRank()), world_(group->getSize()) {
  auto host = std::make_unique<C10dHostComm>(group, device);
  if (kind == ExecutorKind::aten) {
    executor_ = make_aten_executor(group, device, std::move(host));
    return;
  }
  cpu::set_blas_threads(std::max(1, at::get_num_threads()));  // as many as torch's intra-op pool
  executor_ = cpu::make_host_executor(BackendOptions{}, std::move(host), std::make_unique<C10dTransport>(group));
}

PlanOptions Session::options(const Problem& problem, Dtype dtype, const std::string& algo_name) {
  if (algo_name != "auto") {
    PlanOptions o;
    o.algo = parse_algo(algo_name);
    return o;
  }
  const auto key = std::make_tuple(static_cast<int>(problem.op), problem.m, problem.n, problem.k,
                                   static_cast<int>(problem.b_layout), static_cast<int>(dtype));
  auto it = auto_.find(key);
  if (it == auto_.end()) {
    static const Profile cpu = builtin_profile("cpu-2core"), gpu = builtin_profile("h200-nvlink");
    it = auto_.emplace(key, choose(problem, dtype, cuda_ ? gpu : cpu).options()).first;
  }
  return it->second;
}

const Plan& Session::prepare(const Problem& problem, const PlanOptions& options, Dtype dtype) {
  if (prepared_ && same(plan_.problem, problem) && same(plan_.options, options) && dtype_ == dtype) return plan_;
  prepared_ = false;
  plan_ = make_plan(problem, options, rank_);
  dtype_ = dtype;
  executor_->prepare({plan_}, dtype);
  prepared_ = true;
  return plan_;
}

SessionLock session_for(const std::string& group_name, c10::Device device) {
  // Never destroyed: sessions (their lane threads) live until the process ends.
  static auto& sessions = *new std::map<std::pair<std::string, std::string>,
                                        std::pair<c10::weak_intrusive_ptr<c10d::ProcessGroup>, std::unique_ptr<Session>>>();
  std::unique_lock<std::mutex> lock(g_mutex);
  c10::intrusive_ptr<c10d::ProcessGroup> group = c10d::resolve_process_group(group_name);
  try {
    group->getBackend(device.type());
  } catch (const std::exception&) {  // c10::Error: no backend registered for this device type
    throw UsageError("the group '" + group_name + "' has no backend for " + c10::DeviceTypeName(device.type(), true) +
                     " tensors (gloo for CPU, NCCL for CUDA; both: init_process_group(\"cpu:gloo,cuda:nccl\"))");
  }
  const ExecutorKind kind = device.is_cpu() ? g_cpu_kind : ExecutorKind::aten;
  auto key = std::make_pair(group_name, device.str() + (kind == ExecutorKind::aten ? "/aten" : "/host"));
  auto it = sessions.find(key);
  // A weak reference: the group may be destroyed between calls; a new group under an old name
  // (or at an old address: the weak reference keeps the address taken) starts a new session.
  if (it == sessions.end() || it->second.first.lock().get() != group.get()) {
    it = sessions.insert_or_assign(key, std::make_pair(c10::weak_intrusive_ptr<c10d::ProcessGroup>(group), nullptr)).first;
    it->second.second = std::make_unique<Session>(group.get(), device, kind);
  }
  return SessionLock{std::move(lock), std::move(group), *it->second.second};
}

void set_cpu_executor(const std::string& kind) {
  if (kind != "host" && kind != "aten") throw UsageError("cpu executor must be host or aten (got " + kind + ")");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_cpu_kind = kind == "host" ? ExecutorKind::host : ExecutorKind::aten;
}

}  // namespace collmm::torch_ext
