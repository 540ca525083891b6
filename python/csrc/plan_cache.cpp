// plan_cache.cpp: a session's prepared plans, keyed field by field, and auto's measured choice.
#include "plan_cache.hpp"

#include "algo_entries.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "algo_entries.hpp"
#include "c10d_transport.hpp"
#include "collmm/profile.hpp"
#include "torch_util.hpp"
#include "trace.hpp"
#include "tuning.hpp"

namespace collmm::torch_ext {
namespace {

// The seed of auto's measured candidates' random inputs (any fixed number: the values do not matter).
constexpr uint64_t kCandidateSeed = 20240607;

}  // namespace

std::strong_ordering operator<=>(const PlanKey& a, const PlanKey& b) {
  if (const auto c = a.shape <=> b.shape; c != 0) return c;
  return a.options <=> b.options;
}
std::string to_string(const PlanKey& key) { return to_string(key.shape) + ' ' + to_string(key.options); }

PlanCache::PlanCache(c10::Device device, ExecutorKind kind, int rank, HostComm& host,
                     std::shared_ptr<Failure> exchanges, MakeExecutor make_executor, std::function<void()> dropping)
    : device_(device),
      kind_(kind),
      rank_(rank),
      host_(host),
      exchanges_(std::move(exchanges)),
      make_executor_(std::move(make_executor)),
      dropping_(std::move(dropping)) {}

PlanOptions PlanCache::options(const Problem& problem, Dtype dtype, const std::string& algo) {
  auto_report_.clear();
  if (algo != "auto") return entry_options(problem.op, algo);
  Profile profile = builtin_profile(device_.is_cuda() ? "h200-nvlink" : "cpu-2core");
  profile.gemm.library = kind_ == ExecutorKind::aten ? GemmLibrary::aten : GemmLibrary::openblas;
  auto time = [&](const PlanOptions& o, int warmup, int iters) {
    return time_candidate(problem, o, dtype, warmup, iters);
  };
  const AutoChooser::Decision& d = auto_.decide(host_, problem, dtype, profile, "", MeasureSettings{}, time);
  note_last_auto(d.printed);
  auto_report_ = d.printed;
  return d.options;
}

double PlanCache::time_candidate(const Problem& problem, const PlanOptions& options, Dtype dtype, int warmup,
                                 int iters) {
  std::unique_ptr<Executor> ex = make_executor_();
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
    } catch (...) {  // as in Session::run: transfers given up may still write into the inputs
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

Prepared& PlanCache::prepare(const Problem& problem, const PlanOptions& options, Dtype dtype, bool capturing) {
  PlanKey key{{problem, dtype}, options};
  auto it = prepared_.find(key);
  if (it != prepared_.end()) return it->second;
  if (capturing)
    throw UsageError("under CUDA graph capture, a plan not prepared yet (" + to_string(key) +
                     "): run one eager call of every shape before capturing (the session keeps " +
                     std::to_string(kMaxPrepared) + ")");
  if (prepared_.size() >= kMaxPrepared) {  // the same one on every rank
    dropping_();
    prepared_.erase(prepared_.begin());
  }
  Prepared p{make_executor_(), make_plan(problem, options, rank_)};
  p.executor->prepare({p.plan}, dtype);
  return prepared_.emplace(std::move(key), std::move(p)).first->second;
}

}  // namespace collmm::torch_ext
