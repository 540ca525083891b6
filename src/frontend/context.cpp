// context.cpp: collmm::Context (collmm/collmm.hpp): one local rank's plan, prepared once per
// (problem, options, dtype), then one iteration run on the caller's buffers (Executor::bind) where
// the backend can (cpu), else with inputs written in and outputs read back (cuda). Automatic calls
// take their options from an AutoChooser (src/sim/measured_choice.hpp), whose candidates are timed
// on the call's own buffers.
#include "collmm/collmm.hpp"

#include <algorithm>
#include <stdexcept>

#include "agreement.hpp"
#include "backends.hpp"
#include "collmm/element_types.hpp"
#include "collmm/plan.hpp"
#include "collmm/sim.hpp"
#include "measured_choice.hpp"

namespace collmm {

struct Context::Prepared {
  Plan plan;
  Dtype dtype = Dtype::f32;
  bool valid = false;
  // Automatic calls: their settings, the profile (loaded on first use), the decisions.
  AutoSettings auto_settings;
  std::unique_ptr<Profile> profile;
  AutoChooser chooser;
  AutoChooser::Decision last_auto;
};

namespace {

size_t bytes_of(const BufferSpec& b, Dtype t) { return static_cast<size_t>(b.rows * b.cols) * dtype_size(t); }

}  // namespace

Context::Context(const BackendOptions& options, int argc, char** argv) : Context(make_executor(options, argc, argv)) {}

Context::Context(std::unique_ptr<Executor> executor)
    : executor_(std::move(executor)), prepared_(std::make_unique<Prepared>()) {
  if (executor_->local_ranks().size() != 1)
    throw UsageError("collmm::Context drives one rank per process; this executor drives " +
                     std::to_string(executor_->local_ranks().size()));
}

Context::~Context() = default;

int Context::rank() const { return executor_->local_ranks().at(0); }
int Context::world_size() const { return executor_->world_size(); }
Dtype Context::out_dtype(Dtype in) const { return executor_->out_dtype(in); }
Executor& Context::executor() { return *executor_; }

void Context::set_auto(const AutoSettings& settings) {
  prepared_->auto_settings = settings;
  prepared_->profile.reset();
}

const AutoDecision& Context::last_auto() const { return prepared_->last_auto; }

MatmulOptions Context::options_for_call(const Problem& problem, const MatmulOptions& options, Dtype dtype,
                                        const std::function<CallBuffers()>& buffers) {
  if (options.choice == AlgoChoice::given) return options;
  if (!executor_->supports(dtype))  // found before any candidate is chosen or timed
    throw UsageError("the " + executor_->backend() + " backend has no " + to_string(dtype) + " GEMM");
  Prepared& pr = *prepared_;
  if (!pr.profile) {
    const std::string& name = pr.auto_settings.profile;
    pr.profile = std::make_unique<Profile>(load_profile(!name.empty()                   ? name
                                                        : executor_->backend() == "cpu" ? "cpu-2core"
                                                                                        : "h200-nvlink"));
    pr.profile->gemm.library = executor_->gemm_library();
  }
  // One candidate: its plan prepared, the caller's buffers attached, warm-up runs, then the median
  // of the timed runs of this rank (measure_choice agrees them across ranks).
  auto time = [&](const PlanOptions& candidate, int warmup, int iters) {
    MatmulOptions mo = options;
    mo.plan = candidate;
    prepare(problem, mo, dtype);
    attach(buffers());
    for (int w = 0; w < warmup; ++w) executor_->run(StepFilter::all, false);
    std::vector<double> us;
    for (int i = 0; i < iters; ++i) us.push_back(executor_->run(StepFilter::all, false).at(0).total_us);
    std::sort(us.begin(), us.end());
    return us.empty() ? 0.0 : us[us.size() / 2];
  };
  pr.last_auto = pr.chooser.decide(executor_->host(), problem, dtype, *pr.profile, pr.auto_settings.tune_cache,
                                   pr.auto_settings.measure, time);
  MatmulOptions mo = options;
  mo.plan = pr.last_auto.options;
  return mo;
}

void Context::prepare(const Problem& problem, const MatmulOptions& mo, Dtype dtype) {
  if (!executor_->supports(dtype))
    throw UsageError("the " + executor_->backend() + " backend has no " + to_string(dtype) + " GEMM");
  const PlanOptions& po = mo.plan;
  Prepared& pr = *prepared_;
  if (pr.valid && ProblemKey{pr.plan.problem, pr.dtype} == ProblemKey{problem, dtype} && pr.plan.options == po) return;
  pr.valid = false;
  check_processes_agree(executor_->host(), agreement_keys(problem, po, dtype));
  pr.plan = make_plan(problem, po, rank());
  pr.dtype = dtype;
  executor_->prepare({pr.plan}, dtype);
  pr.valid = true;
}

// A null A, B or C is the caller's mistake, found before anything runs.
void Context::check_pointers(const char* op, const void* a, const void* b, const void* c) {
  const char* null = !a ? "a" : !b ? "b" : !c ? "c" : nullptr;
  if (null) throw UsageError(std::string("collmm::Context::") + op + ": " + null + " is a null pointer");
}

int Context::gathered_buffer() const {
  const Plan& plan = prepared_->plan;
  if (const int g = find_buffer(plan, Role::gathered); g >= 0) return g;
  throw std::runtime_error("collmm::Context: the " + to_string(plan.options.algo) + " plan keeps no gathered A");
}

// Binds (cpu) or writes in (cuda) the caller's buffers. A buffer given as nullptr (the gathered A,
// when not asked for) stays the executor's own.
void Context::attach(const CallBuffers& buffers) {
  const Plan& plan = prepared_->plan;
  const Dtype dtype = prepared_->dtype;
  auto bytes = [&](int buf) {
    const BufferSpec& b = plan.buffers[static_cast<size_t>(buf)];
    return bytes_of(b, buffer_dtype(b.role, dtype, out_dtype(dtype)));
  };
  if (executor_->can_bind()) {
    // The executor only reads inputs; bind() takes a plain pointer for both kinds.
    for (const auto& [buf, data] : buffers.inputs) executor_->bind(0, buf, const_cast<void*>(data), bytes(buf));
    for (const auto& [buf, data] : buffers.outputs) executor_->bind(0, buf, data, bytes(buf));
    return;
  }
  for (const auto& [buf, data] : buffers.inputs) executor_->write(0, buf, data, bytes(buf));
}

// One run around attach(); where the backend cannot bind, the outputs are read back.
void Context::run_on(const CallBuffers& buffers) {
  attach(buffers);
  executor_->run(StepFilter::all, false);
  if (executor_->can_bind()) return;
  const Plan& plan = prepared_->plan;
  const Dtype dtype = prepared_->dtype;
  for (const auto& [buf, data] : buffers.outputs) {
    const BufferSpec& b = plan.buffers[static_cast<size_t>(buf)];
    if (data) executor_->read(0, buf, data, bytes_of(b, buffer_dtype(b.role, dtype, out_dtype(dtype))));
  }
}

void Context::ag_gemm(int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
                      void* gathered, const MatmulOptions& options) {
  check_pointers("ag_gemm", a, b, c);
  const Problem problem{.op = Op::ag_gemm, .m = m, .n = n, .k = k, .world = world_size(), .b_layout = options.b_layout};
  // The gathered A's buffer is the prepared plan's: asked for each time.
  auto buffers = [&] { return CallBuffers{{{kBufA, a}, {kBufB, b}}, {{kBufC, c}, {gathered_buffer(), gathered}}}; };
  prepare(problem, options_for_call(problem, options, dtype, buffers), dtype);
  run_on(buffers());
}

void Context::gemm_rs(int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
                      const MatmulOptions& options) {
  summed(Op::gemm_rs, m, n, k, dtype, a, b, c, options);
}

void Context::gemm_ar(int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
                      const MatmulOptions& options) {
  summed(Op::gemm_ar, m, n, k, dtype, a, b, c, options);
}

void Context::summed(Op op, int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
                     const MatmulOptions& options) {
  check_pointers(to_string(op).c_str(), a, b, c);
  const Problem problem{.op = op, .m = m, .n = n, .k = k, .world = world_size(), .b_layout = options.b_layout};
  auto buffers = [&] { return CallBuffers{{{kBufA, a}, {kBufB, b}}, {{kBufC, c}}}; };
  prepare(problem, options_for_call(problem, options, dtype, buffers), dtype);
  run_on(buffers());
}

}  // namespace collmm
