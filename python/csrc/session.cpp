// session.cpp: the ops' sessions per group and device, their executors and runs, and the settings.
#include "session.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>

#include "algo_entries.hpp"
#include "aten_executor.hpp"
#include "blas_gemm.hpp"
#include "c10d_transport.hpp"
#include "chrome_trace.hpp"
#include "host_executor.hpp"
#include "torch_util.hpp"
#include "trace.hpp"

namespace collmm::torch_ext {
namespace {

// The group's Store where the session agrees over it, else null.
std::shared_ptr<StoreChannel> channel_for(c10d::ProcessGroup& group, c10::Device device, Channel channel,
                                          const std::string& name) {
  bool store = channel == Channel::store || channel == Channel::shm;
  if (channel == Channel::automatic && device.is_cuda()) {
    try {
      group.getBackend(c10::DeviceType::CPU);
    } catch (const std::exception&) {  // no CPU backend: the group's collectives would wait for the device
      store = true;
    }
  }
  if (!store || !group.getStore()) {
    if (channel == Channel::shm)
      throw UsageError("channel shm: the group '" + name + "' has no c10d Store to set it up");
    return nullptr;
  }
  // Sessions remade for a key (a new group under an old name) count up, the same on every rank.
  static auto& generations = *new std::map<std::string, int>();
  const std::string prefix = "collmm/" + name;
  const SharedMemory shared = channel == Channel::store ? SharedMemory::never
                              : channel == Channel::shm ? SharedMemory::required
                                                        : SharedMemory::where_local;
  return std::make_shared<StoreChannel>(group.getStore(), prefix + "/" + std::to_string(generations[prefix]++),
                                        group.getRank(), group.getSize(), shared);
}

// CPU tensors default to the ATen executor: torch's own BLAS ran 5-7x faster than the system
// OpenBLAS of the host executor at M = 2048, K = N = 1024 on the CI machine
// (docs/perf/log-2026-12.md, 2026-12-03).
ExecutorKind g_cpu_kind = ExecutorKind::aten;  // guarded by g_mutex
Channel g_channel = Channel::automatic;        // guarded by g_mutex
std::atomic<double> g_timeout_s{0};
std::mutex g_mutex;

}  // namespace

Session::Session(c10d::ProcessGroup* group, c10::Device device, ExecutorKind kind, Channel channel,
                 const std::string& name, std::shared_ptr<Failure> exchanges)
    : group_(group),
      device_(device),
      kind_(kind),
      exchanges_(std::move(exchanges)),
      channel_(channel_for(*group, device, channel, name)),
      host_(std::make_unique<C10dHostComm>(group, device, channel_, exchanges_)),
      rank_(group->getRank()),
      world_(group->getSize()),
      calls_(*host_, device),
      plans_(
          device, kind, rank_, *host_, exchanges_, [this] { return make_executor(); }, [this] { calls_.forget(); }) {
  comm_->exchanges = exchanges_;
  if (kind == ExecutorKind::host) cpu::set_blas_threads(std::max(1, at::get_num_threads()));  // torch's intra-op pool
}

std::unique_ptr<Executor> Session::make_executor() {
  auto host = std::make_unique<C10dHostComm>(group_, device_, channel_, exchanges_);
  host->set_phase((calls_.call().empty() ? std::string("a call") : calls_.call()) +
                  "'s plan setup (the ranks' check that they prepare the same plan)");
  if (kind_ == ExecutorKind::aten) return make_aten_executor(group_, device_, std::move(host), comm_);
  BackendOptions options;
  if (g_timeout_s > 0) options.timeout_s = std::max(1, static_cast<int>(g_timeout_s + 0.5));
  return cpu::make_host_executor(options, std::move(host), std::make_unique<C10dTransport>(group_));
}

void Session::run(Prepared& prepared, Dtype dtype, int64_t rows, const std::vector<at::Tensor>& bound) {
  if (const std::string why = exchanges_->why(); !why.empty()) C10_THROW_ERROR(DistBackendError, why);
  std::vector<RankRun> runs;
  const bool traced = tracing();
  try {
    runs = prepared.executor->run(StepFilter::all, traced);
  } catch (...) {
    // A run that gave up its transfers (the group's failure set) leaves them posted into the
    // caller's memory: kept with them (keep_after_give_up).
    if (!device_.is_cuda() && !exchanges_->why().empty()) keep_after_give_up(bound, {});
    throw;
  }
  if (!traced) return;
  host_->set_phase("collmm.trace's gather of the steps");
  const Problem& p = prepared.plan.problem;
  trace_add({gather_timeline(*host_, make_timeline({prepared.plan}, runs)), rows, p.n, p.k, p.m, dtype, ""});
}

namespace {

// The failure of a group's collectives, one per group: every session on it (CPU and CUDA tensors,
// either executor) shares the group's sequence of collectives. Called under g_mutex.
std::shared_ptr<Failure> exchange_failure_of(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  static auto& failures =
      *new std::map<c10d::ProcessGroup*,
                    std::pair<c10::weak_intrusive_ptr<c10d::ProcessGroup>, std::shared_ptr<Failure>>>();
  // The weak references keep the groups' addresses taken (no new group at an old one); those of
  // destroyed groups go when a new group comes.
  auto it = failures.find(group.get());
  if (it != failures.end()) return it->second.second;
  std::erase_if(failures, [](const auto& entry) { return entry.second.first.expired(); });
  return failures
      .emplace(group.get(),
               std::make_pair(c10::weak_intrusive_ptr<c10d::ProcessGroup>(group), std::make_shared<Failure>()))
      .first->second.second;
}

}  // namespace

SessionLock session_for(const std::string& group_name, c10::Device device) {
  // Never destroyed: sessions (their lane threads) live until the process ends, or until the next
  // call after their group was destroyed.
  static auto& sessions =
      *new std::map<std::pair<std::string, std::string>,
                    std::pair<c10::weak_intrusive_ptr<c10d::ProcessGroup>, std::unique_ptr<Session>>>();
  std::unique_lock<std::mutex> lock(g_mutex);
  // The sessions of destroyed groups go (their executors, their channel's shared memory mapping).
  std::erase_if(sessions, [](const auto& entry) { return entry.second.first.expired(); });
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  try {
    group = c10d::resolve_process_group(group_name);
  } catch (const std::exception&) {  // c10::Error: not registered. Refused here, before any exchange.
    throw UsageError("no process group is named '" + group_name +
                     "' (pass the group itself or its group_name; dist.group.WORLD.group_name is the default group's)");
  }
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
    auto session = std::make_unique<Session>(group.get(), device, kind, g_channel, group_name + "/" + key.second,
                                             exchange_failure_of(group));
    it = sessions.insert_or_assign(key, std::make_pair(c10::weak_intrusive_ptr<c10d::ProcessGroup>(group), nullptr))
             .first;
    it->second.second = std::move(session);
  }
  return SessionLock{std::move(lock), std::move(group), *it->second.second};
}

void set_cpu_executor(const std::string& kind) {
  if (kind != "host" && kind != "aten") throw UsageError("cpu executor must be host or aten (got " + kind + ")");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_cpu_kind = kind == "host" ? ExecutorKind::host : ExecutorKind::aten;
}

void set_channel(const std::string& channel) {
  if (channel != "auto" && channel != "store" && channel != "shm" && channel != "group")
    throw UsageError("channel must be auto, shm, store or group (got " + channel + ")");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_channel = channel == "store"   ? Channel::store
              : channel == "shm"   ? Channel::shm
              : channel == "group" ? Channel::group
                                   : Channel::automatic;
}

void set_timeout(double seconds) {
  if (!(seconds >= 0)) throw UsageError("timeout must be >= 0 s (got " + std::to_string(seconds) + ")");
  g_timeout_s = seconds;
}

double timeout_seconds() { return g_timeout_s; }

std::chrono::milliseconds wait_bound(c10d::ProcessGroup& group) {
  if (g_timeout_s > 0) return std::chrono::milliseconds(static_cast<int64_t>(g_timeout_s * 1000));
  if (group.getStore()) return group.getStore()->getTimeout();
  return std::chrono::minutes(30);
}

}  // namespace collmm::torch_ext
