// context.cpp: collmm::Context (collmm/collmm.hpp): one local rank's plan, prepared once per
// (problem, options, dtype), inputs written in, one iteration run, outputs read back.
#include "collmm/collmm.hpp"

#include <stdexcept>

#include "collmm/agreement.hpp"
#include "collmm/plan.hpp"

namespace collmm {

struct Context::Prepared {
  Plan plan;
  Dtype dtype = Dtype::f32;
  bool valid = false;
};

namespace {

bool same(const Problem& a, const Problem& b) {
  return a.op == b.op && a.m == b.m && a.n == b.n && a.k == b.k && a.world == b.world && a.b_layout == b.b_layout;
}

bool same(const PlanOptions& a, const PlanOptions& b) {
  return a.algo == b.algo && a.stages == b.stages && a.post == b.post && a.gemm_lanes == b.gemm_lanes &&
         a.merge == b.merge;
}

size_t bytes_of(const BufferSpec& b, Dtype t) { return static_cast<size_t>(b.rows * b.cols) * dtype_size(t); }

}  // namespace

Context::Context(const BackendOptions& options, int argc, char** argv)
    : Context(make_executor(options, argc, argv)) {}

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

void Context::run(const Problem& problem, const MatmulOptions& mo, Dtype dtype, const void* a, const void* b) {
  const std::string op = "collmm::Context::" + to_string(problem.op);
  if (!a || !b) throw UsageError(op + ": " + (a ? "b" : "a") + " is a null pointer");
  if (!executor_->supports(dtype))
    throw UsageError("the " + executor_->backend() + " backend has no " + to_string(dtype) + " GEMM");
  PlanOptions po;
  po.algo = mo.algo;
  po.stages = mo.stages;
  po.post = mo.post;
  po.gemm_lanes = mo.gemm_lanes;
  po.merge = mo.merge;
  Prepared& pr = *prepared_;
  if (!pr.valid || !same(pr.plan.problem, problem) || !same(pr.plan.options, po) || pr.dtype != dtype) {
    pr.valid = false;
    check_processes_agree(executor_->host(), {{"op", to_string(problem.op)},
                                              {"M", std::to_string(problem.m)},
                                              {"N", std::to_string(problem.n)},
                                              {"K", std::to_string(problem.k)},
                                              {"dtype", to_string(dtype)},
                                              {"b_layout", to_string(problem.b_layout)},
                                              {"algo", to_string(po.algo)},
                                              {"stages", std::to_string(po.stages)},
                                              {"post", to_string(po.post)},
                                              {"gemm_lanes", std::to_string(po.gemm_lanes)},
                                              {"merge", std::to_string(po.merge)}});
    pr.plan = make_plan(problem, po, rank());
    pr.dtype = dtype;
    executor_->prepare({pr.plan}, dtype);
    pr.valid = true;
  }
  executor_->write(0, kBufA, a, bytes_of(pr.plan.buffers[kBufA], dtype));
  executor_->write(0, kBufB, b, bytes_of(pr.plan.buffers[kBufB], dtype));
  executor_->run(StepFilter::all, false);
}

void Context::ag_gemm(int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
                      void* gathered, const MatmulOptions& options) {
  if (!c) throw UsageError("collmm::Context::ag_gemm: c is a null pointer");
  const Problem p{Op::ag_gemm, m, n, k, world_size(), options.b_layout};
  run(p, options, dtype, a, b);
  const Plan& plan = prepared_->plan;
  executor_->read(0, kBufC, c, bytes_of(plan.buffers[kBufC], out_dtype(dtype)));
  if (gathered) {
    for (size_t i = 0; i < plan.buffers.size(); ++i)
      if (plan.buffers[i].role == Role::gathered) {
        executor_->read(0, static_cast<int>(i), gathered, bytes_of(plan.buffers[i], dtype));
        return;
      }
    throw std::runtime_error("collmm::Context::ag_gemm: the " + to_string(options.algo) +
                             " plan keeps no gathered A");
  }
}

void Context::gemm_rs(int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
                      const MatmulOptions& options) {
  if (!c) throw UsageError("collmm::Context::gemm_rs: c is a null pointer");
  const Problem p{Op::gemm_rs, m, n, k, world_size(), options.b_layout};
  run(p, options, dtype, a, b);
  executor_->read(0, kBufC, c, bytes_of(prepared_->plan.buffers[kBufC], out_dtype(dtype)));
}

}  // namespace collmm
