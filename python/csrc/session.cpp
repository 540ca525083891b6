// session.cpp: per-group executors for the ops, their prepared plan and "auto" choices.
#include "session.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>

#include "algo_entries.hpp"
#include "aten_executor.hpp"
#include "blas_gemm.hpp"
#include "c10d_transport.hpp"
#include "chrome_trace.hpp"
#include "collmm/agreement.hpp"
#include "collmm/cost_model.hpp"
#include "collmm/tuning.hpp"
#include "host_executor.hpp"
#include "torch_util.hpp"
#include "trace.hpp"

namespace collmm::torch_ext {
namespace {

// The seed of auto's measured candidates' random inputs (any fixed number: the values do not matter).
constexpr uint64_t kCandidateSeed = 20240607;

// Everything a prepared plan depends on, as one key.
std::string key_of(const Problem& p, const PlanOptions& o, Dtype d) {
  return to_string(ProblemKey{p, d}) + ' ' + to_string(o);
}

// CPU tensors default to the ATen executor: torch's own BLAS ran 5-7x faster than the system
// OpenBLAS of the host executor at M = 2048, K = N = 1024 on the CI machine (docs/perf.md).
ExecutorKind g_cpu_kind = ExecutorKind::aten;  // guarded by g_mutex
// "key=value" lines and this rank's numbers: what a call's agreement depends on.
std::string fingerprint(const std::string& call, const std::vector<std::pair<std::string, std::string>>& keys,
                        const std::vector<double>& mine) {
  std::ostringstream f;
  f << call << '\n';
  for (const auto& [k, v] : keys) f << k << '=' << v << '\n';
  for (double d : mine) f << d << ' ';
  return f.str();
}

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

Channel g_channel = Channel::automatic;  // guarded by g_mutex
std::atomic<bool> g_check_first{false};
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
      world_(group->getSize()) {
  comm_->exchanges = exchanges_;
  if (kind == ExecutorKind::host) cpu::set_blas_threads(std::max(1, at::get_num_threads()));  // torch's intra-op pool
}

std::unique_ptr<Executor> Session::make_executor() {
  auto host = std::make_unique<C10dHostComm>(group_, device_, channel_, exchanges_);
  host->set_phase((sent_.call.empty() ? std::string("a call") : sent_.call) +
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

bool Session::capturing() const {
  return device_.is_cuda() && stream_capturing(c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_));
}

std::vector<std::vector<double>> Session::agree(const std::string& call, const std::string& misfit,
                                                const std::vector<std::pair<std::string, std::string>>& keys,
                                                const std::vector<double>& mine) {
  host_->set_phase(call + "'s agreement");
  const bool capture = capturing();
  if (capture && !misfit.empty()) throw UsageError(misfit);
  const std::string print = fingerprint(call, keys, mine);
  sent_ = CallMemo{{}, nullptr, call, print, keys, mine, ""};
  if (misfit.empty() && (capture || g_check_first)) {  // a rank with an error always tells the others
    auto it = known_.find(print);
    if (it != known_.end()) return it->second;
  }
  if (capture)
    throw UsageError(call + " under CUDA graph capture with a problem this session never ran eagerly (" +
                     std::to_string(known_.size()) +
                     " known): run one eager call of every shape, dtype, layout and algo before capturing");
  auto all = agree_and_gather(*host_, misfit, keys, mine);
  note_agreed(print, all);
  return all;
}

void Session::note_agreed(const std::string& print, const Agreed& all) {
  if (known_.size() >= kMaxKnown) known_.clear(), memos_.clear();  // the same on every rank
  // A fingerprint agreed again with other ranks' numbers (a rank's sizes changed under the same keys
  // of this rank, e.g. gather_dim -2 for 0): the memos, which hold the old numbers and their plan, go.
  auto it = known_.find(print);
  if (it != known_.end() && it->second != all) memos_.clear();
  known_.insert_or_assign(print, all);
}

const CallMemo* Session::recall(const CallKey& key, std::optional<Agreed>& agreed) {
  auto it = memos_.find(key);
  if (it == memos_.end()) return nullptr;
  const CallMemo& memo = it->second;
  if (g_check_first || capturing()) {
    if (!memo.auto_report.empty()) note_last_auto(memo.auto_report);
    return &memo;
  }
  host_->set_phase(memo.call + "'s agreement");
  Agreed all = agree_and_gather(*host_, "", memo.keys, memo.mine);
  // A full known_ is cleared by note_agreed on every rank alike (the exchange of a rank that missed
  // the memo notes its numbers): so here too, and the call goes on as a miss.
  if (all == memo.all && known_.size() < kMaxKnown) {
    if (!memo.auto_report.empty()) note_last_auto(memo.auto_report);
    return &memo;
  }
  sent_ = memo;  // copied first: note_agreed may clear the memos
  note_agreed(sent_.print, all);
  agreed = std::move(all);
  return nullptr;
}

void Session::remember(const CallKey& key, const std::vector<std::vector<double>>& all, Prepared& prepared) {
  if (memos_.size() >= kMaxKnown) memos_.clear();
  CallMemo memo = sent_;
  memo.all = all;
  memo.prepared = &prepared;
  memo.auto_report = auto_report_;
  memos_.insert_or_assign(key, std::move(memo));
}

PlanOptions Session::options(const Problem& problem, Dtype dtype, const std::string& algo) {
  auto_report_.clear();
  if (algo != "auto") return entry_options(problem.op, algo);
  Profile profile = builtin_profile(device_.is_cuda() ? "h200-nvlink" : "cpu-2core");
  profile.gemm.library = kind_ == ExecutorKind::aten ? GemmLibrary::aten : GemmLibrary::openblas;
  auto time = [&](const PlanOptions& o, int warmup, int iters) {
    return time_candidate(problem, o, dtype, warmup, iters);
  };
  const AutoChooser::Decision& d = auto_.decide(*host_, problem, dtype, profile, "", MeasureSettings{}, time);
  note_last_auto(d.printed);
  auto_report_ = d.printed;
  return d.options;
}

double Session::time_candidate(const Problem& problem, const PlanOptions& options, Dtype dtype, int warmup, int iters) {
  std::unique_ptr<Executor> ex = make_executor();
  const Plan plan = make_plan(problem, options, rank_);
  ex->prepare({plan}, dtype);
  // Random A and B (GEMMs on zeros run faster than on real numbers), bound in place; C and the
  // scratch are the executor's own. All of it goes with the executor. Drawn on the CPU from a
  // generator of collmm's own: torch's global RNG state stays as the caller left it.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(kCandidateSeed);
  std::vector<at::Tensor> inputs;
  for (int buf : {kBufA, kBufB}) {
    const BufferSpec& b = plan.buffers[static_cast<size_t>(buf)];
    inputs.push_back(at::randn({b.rows, b.cols}, generator, at::TensorOptions().dtype(at::kFloat))
                         .to(at::TensorOptions().device(device_).dtype(scalar_type(dtype))));
    ex->bind(0, buf, inputs.back().data_ptr(), static_cast<size_t>(inputs.back().nbytes()));
  }
  auto run = [&] {  // one run, finished on the device (the ATen executor's CUDA work is asynchronous)
    const auto t0 = std::chrono::steady_clock::now();
    try {
      ex->run(StepFilter::all, false);
    } catch (...) {  // as in run(): transfers given up may still write into the inputs
      if (!device_.is_cuda() && !exchanges_->why().empty()) keep_after_give_up(inputs, {});
      throw;
    }
    if (device_.is_cuda()) c10::impl::VirtualGuardImpl(device_.type()).getStream(device_).synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int w = 0; w < warmup; ++w) run();
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) us.push_back(run());
  std::sort(us.begin(), us.end());
  return us.empty() ? 0.0 : us[us.size() / 2];
}

Prepared& Session::prepare(const Problem& problem, const PlanOptions& options, Dtype dtype) {
  const std::string key = key_of(problem, options, dtype);
  auto it = prepared_.find(key);
  if (it != prepared_.end()) return it->second;
  if (capturing())
    throw UsageError("under CUDA graph capture, a plan not prepared yet (" + key +
                     "): run one eager call of every shape before capturing (the session keeps " +
                     std::to_string(kMaxPrepared) + ")");
  if (prepared_.size() >= kMaxPrepared) {  // the same one on every rank
    prepared_.erase(prepared_.begin());
    memos_.clear();  // they point into prepared_
  }
  Prepared p{make_executor(), make_plan(problem, options, rank_)};
  p.executor->prepare({p.plan}, dtype);
  return prepared_.emplace(key, std::move(p)).first->second;
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

void set_check(const std::string& check) {
  if (check != "every" && check != "first") throw UsageError("check must be every or first (got " + check + ")");
  g_check_first = check == "first";
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
