// bench_options.cpp: the agreement keys of collmm-bench's options, and the Problem they describe.
#include "bench_options.hpp"

#include "collmm/sizes.hpp"

namespace collmm {
namespace {

template <class T, class F>
std::string join(const std::vector<T>& items, F name) {
  std::string s;
  for (const T& x : items) s += (s.empty() ? "" : ",") + name(x);
  return s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> agreement_keys(const BenchOptions& o) {
  const BackendOptions& b = o.backend;
  auto op_name = [](Op x) { return to_string(x); };
  auto algo_name = [](Algo x) { return to_string(x); };
  std::vector<std::pair<std::string, std::string>> keys{
      {"backend", to_string(b.backend)},
      {"op", join(o.ops, op_name)},
      {"algo", join(algos_to_run(o), algo_name) + (o.configs.empty() ? "" : "+") +
                   join(o.configs, [](const ListedConfig& c) { return c.label; }) + (o.algo_auto ? ",auto" : "")},
      {"M", std::to_string(o.m)},
      {"N", std::to_string(o.n)},
      {"K", std::to_string(o.k)},
      {"dtype", to_string(o.dtype)},
      {"b-layout", to_string(o.b_layout)},
      {"warmup", std::to_string(o.warmup)},
      {"iters", std::to_string(o.iters)},
      {"rounds", std::to_string(o.rounds)},
      {"check", o.check ? "yes" : "no"},
      {"gemm-rate", o.gemm_rate ? "yes" : "no"},
      {"seed", std::to_string(o.seed)},
      {"trace", o.trace_path.empty() ? "no" : "yes"},
      {"profile", o.profile},
      {"calibrate", o.calibrate_path.empty() ? "no" : "yes"},
      {"timeout", std::to_string(b.timeout_s)},
      {"transport", to_string(b.transport)},
      {"gpus", std::to_string(b.gpus)},
      {"world", std::to_string(b.world)},
      {"rank", std::to_string(b.rank)},
      {"link-copy", to_string(b.link_copy)},
      {"comm-priority", b.comm_priority ? "yes" : "no"},
      {"gemm-sms", std::to_string(b.gemm_sms)},
      {"sm-margin", std::to_string(b.sm_margin)},
      {"nccl-min-ctas", std::to_string(b.nccl_min_ctas)},
      {"nccl-max-ctas", std::to_string(b.nccl_max_ctas)},
      {"graph", b.graph ? "yes" : "no"},
      {"auto-measure", to_string(o.auto_measure.measure)},
  };
  // The plan options (--stages, --post, --gemm-lanes, ...; their algo is unused: --algo is "algo" above).
  for (auto& key : agreement_keys(o.plan)) keys.push_back(std::move(key));
  return keys;
}

Problem problem_of(const BenchOptions& o, Op op, int world) {
  Problem p;
  p.op = op;
  p.m = o.m;
  p.n = o.n;
  p.k = o.k;
  p.world = world;
  p.b_layout = o.b_layout;
  return p;
}

std::vector<Algo> algos_to_run(const BenchOptions& o) {
  if (o.algo_auto) return o.algos;
  return o.algos.empty() ? all_algos() : o.algos;
}

PlanOptions plan_options_of(const BenchOptions& o, Algo algo) {
  PlanOptions p = o.plan;  // the plain algorithm, whichever op: without --waves, --merge and --pieces
  p.algo = algo;
  if (!algorithm(algo).takes_stages) p.stages = 0;
  p.waves = 0;
  p.merge = 1;
  p.pieces = 1;
  p.piece_sizes = PieceSizes::equal;
  return p;
}

PlanOptions plan_options_of(const BenchOptions& o, Op op, Algo algo) { return options_for(op, algo, o.plan); }

PlanOptions plan_options_of(const BenchOptions& o, Op op, const ListedConfig& c) {
  return config_options(o.plan, op, c);
}

std::vector<EntryRow> entry_rows(const BenchOptions& o, Op op) {
  return entry_rows(algos_to_run(o), o.configs, op, o.plan);
}

}  // namespace collmm
