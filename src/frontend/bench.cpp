// bench.cpp: collmm-bench's run loop: per op, the sequential case first (it gives T_sequential,
// t_gemm and t_comm), then every asked-for algorithm on the same inputs; the table, JSON and trace.
#include "bench.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "agreement.hpp"
#include "chrome_trace.hpp"
#include "report.hpp"

namespace collmm {
namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

Bench::Bench(Executor& executor, BenchOptions options) : ex_(executor), o_(std::move(options)) {}

void Bench::validate() {
  HostComm& host = ex_.host();
  check_processes_agree(host, agreement_keys(o_));
  std::string error;
  try {
    if (o_.iters < 1) throw UsageError("--iters must be >= 1 (got " + std::to_string(o_.iters) + ")");
    if (o_.warmup < 0) throw UsageError("--warmup must be >= 0 (got " + std::to_string(o_.warmup) + ")");
    if (!ex_.supports(o_.dtype))
      throw UsageError("the " + ex_.backend() + " backend has no " + to_string(o_.dtype) + " GEMM in this build");
    for (Op op : o_.ops) {
      const Problem p = problem_of(o_, op, ex_.world_size());
      for (Algo algo : algos_to_run(o_)) {
        PlanOptions po = o_.plan;
        po.algo = algo;
        try {
          for (int r : ex_.local_ranks()) make_plan(p, po, r);
        } catch (const UsageError& e) {
          throw UsageError(to_string(op) + " " + to_string(algo) + ": " + e.what());
        }
      }
    }
  } catch (const UsageError& e) {
    error = e.what();
  }
  raise_if_any_process_failed(host, error);
}

std::vector<CaseResult> Bench::run(std::ostream& out) {
  HostComm& host = ex_.host();
  const bool printer = host.proc() == 0;
  const RunInfo info{ex_.backend(), ex_.world_size(), host.procs(), ex_.timing_note()};
  if (printer) print_table_header(out, o_, info);

  const std::vector<Algo> algos = algos_to_run(o_);
  const bool sequential_listed = std::find(algos.begin(), algos.end(), Algo::sequential) != algos.end();
  std::vector<CaseResult> results;
  std::vector<Timeline> timelines;
  for (Op op : o_.ops) {
    Reference ref;
    if (o_.check) ref = make_reference(problem_of(o_, op, ex_.world_size()), ex_.local_ranks(), o_.seed, o_.dtype);
    CaseWork work;
    work.check = o_.check ? &ref : nullptr;
    work.trace = !o_.trace_path.empty();
    work.save_dir = o_.save_dir;

    // The sequential case is the baseline of every other; when not asked for, it is only timed.
    CaseWork base = sequential_listed ? work : CaseWork{};
    base.alone = true;
    CaseResult sequential = run_case(ex_, o_, op, Algo::sequential, base);
    for (Algo algo : algos) {
      CaseResult r = algo == Algo::sequential ? sequential : run_case(ex_, o_, op, algo, work);
      derive_figures(r, sequential);
      if (printer) print_table_row(out, r);
      if (work.trace) timelines.push_back(std::move(r.timeline));
      results.push_back(std::move(r));
    }
  }
  if (printer) {
    print_table_summary(out, results);
    if (!o_.json_path.empty()) write_text(o_.json_path, results_json(info, results).dump(2) + "\n");
    if (!o_.trace_path.empty()) write_text(o_.trace_path, chrome_trace(timelines).dump() + "\n");
  }
  return results;
}

}  // namespace collmm
