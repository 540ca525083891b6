// session.cpp: per-group executors for the ops, their prepared plan and "auto" choices.
#include "session.hpp"

#include <algorithm>
#include <sstream>

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

// Everything a prepared plan depends on, as one key.
std::string key_of(const Problem& p, const PlanOptions& o, Dtype d) {
  std::ostringstream k;
  k << to_string(p.op) << ' ' << p.m << ' ' << p.n << ' ' << p.k << ' ' << p.world << ' ' << to_string(p.b_layout)
    << ' ' << to_string(o) << ' ' << to_string(d);
  return k.str();
}

ExecutorKind g_cpu_kind = ExecutorKind::host;  // guarded by g_mutex
std::mutex g_mutex;

}  // namespace

Session::Session(c10d::ProcessGroup* group, c10::Device device, ExecutorKind kind)
    : group_(group),
      device_(device),
      kind_(kind),
      host_(std::make_unique<C10dHostComm>(group, device)),
      rank_(group->getRank()),
      world_(group->getSize()) {
  if (kind == ExecutorKind::host) cpu::set_blas_threads(std::max(1, at::get_num_threads()));  // torch's intra-op pool
}

std::unique_ptr<Executor> Session::make_executor() {
  auto host = std::make_unique<C10dHostComm>(group_, device_);
  if (kind_ == ExecutorKind::aten) return make_aten_executor(group_, device_, std::move(host));
  return cpu::make_host_executor(BackendOptions{}, std::move(host), std::make_unique<C10dTransport>(group_));
}

PlanOptions Session::options(const Problem& problem, Dtype dtype, const std::string& algo_name, int64_t pieces) {
  if (algo_name != "auto") {
    PlanOptions o;
    o.algo = parse_algo(algo_name);
    o.pieces = static_cast<int>(pieces);
    return o;
  }
  const auto key = std::make_tuple(static_cast<int>(problem.op), problem.m, problem.n, problem.k,
                                   static_cast<int>(problem.b_layout), static_cast<int>(dtype));
  auto it = auto_.find(key);
  if (it == auto_.end()) {
    Profile profile = builtin_profile(device_.is_cuda() ? "h200-nvlink" : "cpu-2core");
    profile.gemm.library = kind_ == ExecutorKind::aten ? GemmLibrary::aten : GemmLibrary::openblas;
    it = auto_.emplace(key, choose(problem, dtype, profile).options).first;
  }
  return it->second;
}

Prepared& Session::prepare(const Problem& problem, const PlanOptions& options, Dtype dtype) {
  const std::string key = key_of(problem, options, dtype);
  auto it = prepared_.find(key);
  if (it != prepared_.end()) return it->second;
  if (prepared_.size() >= kMaxPrepared) prepared_.erase(prepared_.begin());  // the same one on every rank
  Prepared p{make_executor(), make_plan(problem, options, rank_)};
  p.executor->prepare({p.plan}, dtype);
  return prepared_.emplace(key, std::move(p)).first->second;
}

SessionLock session_for(const std::string& group_name, c10::Device device) {
  // Never destroyed: sessions (their lane threads) live until the process ends.
  static auto& sessions =
      *new std::map<std::pair<std::string, std::string>,
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
    it = sessions.insert_or_assign(key, std::make_pair(c10::weak_intrusive_ptr<c10d::ProcessGroup>(group), nullptr))
             .first;
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
