// bench.cpp: collmm-bench's run loop. Per op, the sequential case runs first (it gives
// T_sequential, t_gemm and t_comm), then every asked-for algorithm (and the --algo auto pick) on the
// same inputs, each with its predicted time when a --profile is given. Then the table, JSON, trace,
// SVG timelines and tuning-cache records.
#include "bench.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "agreement.hpp"
#include "atomic_file.hpp"
#include "bench_calibrate.hpp"
#include "chrome_trace.hpp"
#include "cost_model.hpp"
#include "preflight.hpp"
#include "quote.hpp"
#include "report.hpp"
#include "save_dir.hpp"
#include "svg.hpp"

namespace collmm {
namespace {

void write_text(const std::string& path, const std::string& text) { write_file_atomically(path, text); }

void write_timelines(const std::string& base, const std::vector<CaseResult>& results, const std::string& backend,
                     std::ostream& out) {
  for (const CaseResult& r : results) {
    SvgOptions svg;
    svg.subtitle = "measured, " + backend + ", M=" + std::to_string(r.problem.m) + " N=" + std::to_string(r.problem.n) +
                   " K=" + std::to_string(r.problem.k) + " " + to_string(r.dtype) + ", " + r.label +
                   ", the median timed iteration";
    const std::string path = timeline_path(base, r.problem.op, r.label, results.size() > 1);
    write_svg(r.timeline, path, svg);
    out << "# timeline: " << path << "\n";
  }
}

}  // namespace

Bench::Bench(Executor& executor, BenchOptions options) : ex_(executor), o_(std::move(options)) {}

void Bench::validate() {
  HostComm& host = ex_.host();
  host.set_phase("setup: the ranks' agreement on the options");
  check_processes_agree(host, agreement_keys(o_));
  std::string error;
  std::vector<std::pair<Op, PlanOptions>> cases;  // every case the run will prepare
  try {
    if (o_.iters < 1) throw UsageError("--iters must be >= 1 (got " + std::to_string(o_.iters) + ")");
    if (o_.warmup < 0) throw UsageError("--warmup must be >= 0 (got " + std::to_string(o_.warmup) + ")");
    if (o_.rounds < 1) throw UsageError("--rounds must be >= 1 (got " + std::to_string(o_.rounds) + ")");
    if (!o_.calibrate_path.empty() && o_.iters < kCalibrateMinIters)
      throw UsageError("--calibrate needs -i >= " + std::to_string(kCalibrateMinIters) + " (got " +
                       std::to_string(o_.iters) +
                       "): its fits take the median of that many runs per size, "
                       "and fewer are too noisy to fit");
    if (!ex_.supports(o_.dtype))
      throw UsageError("the " + ex_.backend() + " backend has no " + to_string(o_.dtype) + " GEMM in this build");
    try {
      if (!o_.profile.empty()) {
        profile_ = profile_for(o_, ex_.gemm_library());
        try {
          check_gemm_rate(profile_, o_.dtype);
        } catch (const UsageError& e) {
          throw UsageError("profile " + quote(o_.profile) + ": " + e.what());
        }
      }
    } catch (const UsageError& e) {
      throw UsageError(std::string("--profile: ") + e.what());
    }
    predict_ = !o_.profile.empty();
    check_pieces_apply(algos_to_run(o_), o_.plan);
    // The sizes first, named by neither op nor algorithm: wrong for every case alike.
    validate_sizes(problem_of(o_, o_.ops.at(0), ex_.world_size()));
    for (Op op : o_.ops) {
      const Problem p = problem_of(o_, op, ex_.world_size());
      try {
        collmm::validate(p);  // the split over the ranks: wrong for every algorithm of the op alike
      } catch (const UsageError& e) {
        throw UsageError(to_string(op) + ": " + e.what());
      }
      // Every rank's plan of a case must build; the case is then kept for the memory check.
      auto add_case = [&](const std::string& name, const PlanOptions& po) {
        try {
          for (int r : ex_.local_ranks()) make_plan(p, po, r);
        } catch (const UsageError& e) {
          throw UsageError(to_string(op) + " " + name + ": " + e.what());
        }
        cases.emplace_back(op, po);
      };
      add_case("sequential", plan_options_of(o_, Algo::sequential));  // the baseline, run with or without its row
      for (const EntryRow& row : entry_rows(o_, op)) add_case(row.label, row.options);
    }
    check_outputs_writable(o_, host.proc() == 0);
  } catch (const UsageError& e) {
    error = e.what();
  }
  // A cache that does not parse would lose this run's rows at the end: refused now.
  if (!o_.tune_cache_path.empty())
    process0_local_work(host, "the check of tuning cache " + quote(o_.tune_cache_path), [&] {
      try {
        if (error.empty() && std::filesystem::exists(o_.tune_cache_path)) load_tuning_cache(o_.tune_cache_path);
      } catch (const UsageError& e) {
        error = e.what();
      }
    });
  raise_if_any_process_failed(host, error);
  if (o_.algo_auto) {
    picks_.clear();
    for (Op op : o_.ops)
      picks_.push_back(choose_on_process0(host, problem_of(o_, op, ex_.world_size()), o_, ex_.gemm_library(), error));
    raise_if_any_process_failed(host, error);
    try {
      for (size_t i = 0; i < o_.ops.size(); ++i) {
        const Problem p = problem_of(o_, o_.ops[i], ex_.world_size());
        try {
          for (int r : ex_.local_ranks()) make_plan(p, picks_[i].options, r);
        } catch (const UsageError& e) {
          const std::string from =
              picks_[i].source == "measured" ? "the entry of tuning cache " + o_.tune_cache_path : "the cost model";
          throw UsageError("--algo auto for " + to_string(o_.ops[i]) + ": the pick of " + from + ": " + e.what());
        }
        cases.emplace_back(o_.ops[i], picks_[i].options);
        for (const Alternative& a : auto_timed_candidates(o_, picks_[i])) cases.emplace_back(o_.ops[i], a.options);
      }
    } catch (const UsageError& e) {
      error = e.what();
    }
    raise_if_any_process_failed(host, error);
  }
  // Memory last: every case is known. Refused here, before anything is allocated. The per-case
  // timeline files too: their names hold the cases' labels.
  try {
    if (host.proc() == 0 && !o_.timeline_path.empty()) {
      std::vector<std::pair<Op, std::string>> labels;
      for (size_t i = 0; i < o_.ops.size(); ++i) {
        for (const EntryRow& row : entry_rows(o_, o_.ops[i])) labels.emplace_back(o_.ops[i], row.label);
        if (o_.algo_auto) labels.emplace_back(o_.ops[i], "auto:" + algo_label(picks_.at(i).options));
      }
      check_timeline_paths(o_.timeline_path, labels);
    }
    ex_.check_memory(memory_need(o_, cases, ex_.world_size(), ex_.local_ranks(), ex_.out_dtype(o_.dtype),
                                 ex_.played_peers() != nullptr));
  } catch (const UsageError& e) {
    error = e.what();
  }
  raise_if_any_process_failed(host, error);
}

void Bench::measure_auto(size_t op_i, bool printer, std::ostream& out) {
  const Op op = o_.ops[op_i];
  AutoPick& pick = picks_.at(op_i);
  if (printer) out << "# " << to_string(op) << " --algo auto\n" << pick.printed << std::flush;
  if (auto_timed_candidates(o_, pick).empty()) return;
  const MeasuredChoice m = measure_auto_pick(ex_, o_, op, pick);
  if (printer) out << print(m, o_.auto_measure) << std::flush;
  if (o_.plan.post == Post::comm_first)
    for (const TuningEntry& e : tuning_entries(problem_of(o_, op, ex_.world_size()), o_.dtype, m))
      auto_timed_.push_back(e);
}

void Bench::run_op(size_t op_i, bool printer, std::ostream& out, std::vector<CaseResult>& results) {
  const Op op = o_.ops[op_i];
  const std::vector<Algo> algos = algos_to_run(o_);
  Reference ref;
  if (o_.check) ref = make_reference(problem_of(o_, op, ex_.world_size()), ex_.local_ranks(), o_.seed, o_.dtype);
  CaseWork work;
  work.check = o_.check ? &ref : nullptr;
  work.save_dir = save_staging_;

  // The sequential case is the baseline of every other; when not asked for, it is only timed.
  const bool sequential_listed = std::find(algos.begin(), algos.end(), Algo::sequential) != algos.end();
  CaseWork base = sequential_listed ? work : CaseWork{};
  base.alone = true;
  // The rows after it, in order: each listed algorithm (sequential: the baseline's own row), each
  // listed configuration, auto's pick. With --rounds, the baseline and every row run again in turn.
  struct Row {
    PlanOptions options;
    std::string label;
    bool baseline = false, auto_pick = false;
  };
  std::vector<Row> rows;
  for (const EntryRow& row : entry_rows(o_, op))
    rows.push_back({row.options, row.label, row.options.algo == Algo::sequential});
  if (o_.algo_auto) rows.push_back({{}, "", false, true});

  std::vector<CaseResult> baseline_rounds;
  std::vector<std::vector<CaseResult>> row_rounds(rows.size());
  for (int round = 0; round < o_.rounds; ++round) {
    const bool last = round + 1 == o_.rounds;
    baseline_rounds.push_back(run_case(ex_, o_, op, plan_options_of(o_, Algo::sequential), base));
    const CaseResult sequential = merge_rounds(baseline_rounds);
    std::vector<std::pair<std::string, double>> times{{"sequential", baseline_rounds.back().time_us}};
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& row = rows[i];
      if (row.auto_pick && round == 0) measure_auto(op_i, printer, out);
      if (row.baseline) {
        row_rounds[i].push_back(baseline_rounds.back());
      } else if (row.auto_pick) {  // the pick as measure_auto left it
        const AutoPick& pick = picks_.at(op_i);
        row_rounds[i].push_back(run_case(ex_, o_, op, pick.options, work, "auto:" + algo_label(pick.options)));
        row_rounds[i].back().chosen_by = pick.source;
      } else {
        row_rounds[i].push_back(run_case(ex_, o_, op, row.options, work, row.label));
      }
      if (!row.baseline) times.emplace_back(row_rounds[i].back().label, row_rounds[i].back().time_us);
      if (!last) continue;  // rows print as the last round ends them
      CaseResult r = merge_rounds(row_rounds[i]);
      derive_figures(r, sequential);
      if (predict_) r.predicted_us = predicted_time_us(r.problem, r.plan, r.dtype, profile_);
      if (printer) print_table_row(out, r, predict_);
      results.push_back(std::move(r));
    }
    if (printer && o_.rounds > 1) print_round(out, op, round + 1, o_.rounds, times);
  }
}

std::vector<CaseResult> Bench::run(std::ostream& out) {
  HostComm& host = ex_.host();
  const bool printer = host.proc() == 0;
  const RunInfo info{ex_.backend(), ex_.world_size(), host.procs(), ex_.timing_note(), predict_};
  if (printer) print_table_header(out, o_, info);
  auto_timed_.clear();
  // --save fills a staging directory inside DIR (process 0 makes it, every process learns its
  // name); its files move into DIR once every rank has saved.
  save_staging_.clear();
  if (!o_.save_dir.empty()) {
    host.set_phase("the start of --save's directory");
    std::string error;
    try {
      if (printer) save_staging_ = start_save(o_.save_dir);
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    raise_if_any_process_failed(host, error);
    save_staging_ = host.allgather(save_staging_).at(0);
  }
  std::vector<CaseResult> results;
  for (size_t op_i = 0; op_i < o_.ops.size(); ++op_i) run_op(op_i, printer, out, results);
  inject_fault(o_, ex_.local_ranks(), "output");
  host.set_phase("the output of the results");
  // Process 0's own files first: they need no other process, so a peer that stops now loses none.
  if (printer) {
    print_table_summary(out, results);
    if (!o_.json_path.empty()) write_text(o_.json_path, results_json(info, results).dump(2) + "\n");
    if (!o_.trace_path.empty()) {
      std::vector<Timeline> timelines;
      for (const CaseResult& r : results) timelines.push_back(r.timeline);
      write_text(o_.trace_path, chrome_trace(timelines).dump() + "\n");
    }
    if (!o_.timeline_path.empty()) write_timelines(o_.timeline_path, results, info.backend, out);
  }
  if (!o_.save_dir.empty()) {
    host.set_phase("the output of the results (every process's --save files written)");
    host.barrier();
    if (printer) finish_save(o_.save_dir, save_staging_);
  }
  if (!o_.tune_cache_path.empty())
    process0_local_work(host, "the write of tuning cache " + quote(o_.tune_cache_path) + " under its lock", [&] {
      // auto's quick timings first: a row measured with the full -w/-i replaces one of the same configuration.
      if (!auto_timed_.empty()) update_tuning_cache(o_.tune_cache_path, auto_timed_);
      const size_t recorded = record_measurements(o_.tune_cache_path, results);
      out << "# tuning cache: " << recorded << " measured row" << (recorded == 1 ? "" : "s");
      if (!auto_timed_.empty()) out << " and " << auto_timed_.size() << " of --algo auto's timed candidates";
      out << " recorded in " << o_.tune_cache_path;
      if (recorded < results.size())  // --post is one for every row
        out << " (" << results.size() - recorded << " left out: "
            << (o_.plan.post == Post::gemm_first ? "rows posted gemm-first, and --algo auto runs comm-first"
                                                 : "rows without a time")
            << ")";
      out << "\n";
    });
  return results;
}

}  // namespace collmm
