// report.cpp: the table columns and the JSON keys of collmm-bench.
#include "report.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "calibrate.hpp"
#include "table_cells.hpp"
#include "tuning.hpp"

#ifndef COLLMM_VERSION
#define COLLMM_VERSION "unknown"
#endif

namespace collmm {
namespace {

std::string fixed(double v, int precision) {
  if (!std::isfinite(v) || v < 0) return "N/A";
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

std::string signed_fixed(double v, int precision) {
  if (!std::isfinite(v)) return "N/A";
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

std::string sci(double v) {
  if (!std::isfinite(v)) return "N/A";
  std::ostringstream s;
  s << std::scientific << std::setprecision(2) << v;
  return s.str();
}

// E within [0, 1] as a number; outside it is no overlap figure: "<0" (slower than sequential) or
// ">1" (more hidden than there was: timing noise, or ranks sharing cores).
std::string efficiency_cell(double e) {
  if (!std::isfinite(e)) return "N/A";
  if (e < 0) return "<0";
  if (e > 1) return ">1";
  return signed_fixed(e, 2);
}

// Whether any rank communicated (a one-rank job's copy counts): the overlap is undefined otherwise.
bool has_comm(const CaseResult& r) {
  for (const RankOverlap& o : r.overlap.ranks)
    if (o.comm_us > 0) return true;
  return false;
}

// A row's cells: the case's (its fields, src/plan/table_cells.hpp; the algo cell holds the row's
// label: ring:pieces4, auto:ring), the steps its plan has, then the measured figures.
std::vector<Cell> cells(const CaseResult& r, bool predicted) {
  std::vector<Cell> c = case_cells(r.problem, r.plan, r.dtype, r.label);
  c.insert(c.end(), {
                        {"steps", 6, std::to_string(r.steps)},
                        {"time_us", 11, fixed(r.time_us, 1)},
                        {"TFLOP/s", 9, fixed(r.tflops, 4)},
                        {"t_gemm_us", 11, fixed(r.t_gemm_us, 1)},
                        {"t_comm_us", 11, fixed(r.t_comm_us, 1)},
                        {"speedup", 8, fixed(r.speedup, 2)},
                        {"E", 7, efficiency_cell(r.efficiency)},
                        {"hidden%", 8, has_comm(r) ? fixed(100 * r.overlap.mean_fraction, 1) : "N/A"},
                        {"#wrong", 7, r.checked ? std::to_string(r.wrong) : "N/A"},
                        {"max_rel_err", 12, r.checked ? sci(r.max_rel_err) : "N/A"},
                    });
  if (predicted) {
    c.push_back({"pred_us", 11, fixed(r.predicted_us, 1)});
    c.push_back({"pred/meas", 10, fixed(r.predicted_us / r.time_us, 2)});
  }
  return c;
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

void print_table_header(std::ostream& out, const BenchOptions& o, const RunInfo& info) {
  out << "# collmm-bench " << COLLMM_VERSION << ": backend " << info.backend << ", " << info.world << " ranks in "
      << info.procs << " process" << (info.procs == 1 ? "" : "es") << ", warm-up " << o.warmup << ", iterations "
      << o.iters << ", seed " << o.seed << ", check " << (o.check ? "on" : "off") << "\n";
  if (!info.timing_note.empty()) out << "# note: " << info.timing_note << "\n";
  out << "# time_us: median over iterations of the slowest rank. TFLOP/s: per rank. t_gemm_us, t_comm_us:\n"
         "# the sequential plan's GEMMs alone and its comm alone, timed interleaved with it, iteration by\n"
         "# iteration. speedup: T_sequential / time.\n"
         "# E: overlap efficiency (T_sequential - time) / min(t_gemm, t_comm), 1 = all of it hidden;\n"
         "# <0: slower than sequential; >1: not an overlap figure (timing noise or ranks sharing cores).\n"
         "# hidden%: comm time covered by a GEMM on the same rank / comm time, mean over ranks, read off\n"
         "# the step times of the median timed iteration.\n";
  if (info.predicted)
    out << "# pred_us: the same plans through the cost model, profile " << o.profile << " (collmm/sim.hpp).\n";
  out << "#\n";
  print_heads(out, cells(CaseResult{}, info.predicted));
  out << std::flush;
}

void print_table_row(std::ostream& out, const CaseResult& r, bool predicted) {
  print_texts(out, cells(r, predicted));
  if (!std::isnan(r.t_gemm_plan_us))
    out << "#   GEMM rate beside the comm: " << fixed(r.t_gemm_plan_us / r.gemm_busy_us, 3)
        << " of alone (its GEMMs alone " << fixed(r.t_gemm_plan_us, 1) << " us, busy " << fixed(r.gemm_busy_us, 1)
        << " us in the median iteration)\n";
  out << std::flush;
}

int64_t total_wrong(const std::vector<CaseResult>& results) {
  int64_t wrong = 0;
  for (const CaseResult& r : results)
    if (r.checked) wrong += r.wrong;
  return wrong;
}

void print_table_summary(std::ostream& out, const std::vector<CaseResult>& results) {
  bool checked = false;
  double sum = 0;
  int count = 0;
  for (const CaseResult& r : results) {
    checked = checked || r.checked;
    if (r.plan.algo != Algo::sequential && std::isfinite(r.speedup)) sum += r.speedup, ++count;
  }
  const int64_t wrong = total_wrong(results);
  out << "# Out of bounds values : " << (checked ? std::to_string(wrong) : "N/A") << " "
      << (!checked     ? "(not checked: use --check)"
          : wrong == 0 ? "OK"
                       : "FAILED")
      << "\n";
  out << "# Avg speedup vs sequential (overlapped algorithms) : " << (count ? fixed(sum / count, 2) : "N/A") << "\n";
  // Rows the host paced: their time is the host's enqueue, not the device's work (kHostPaced).
  std::string paced;
  for (const CaseResult& r : results)
    if (r.issue_us >= kHostPaced * r.time_us)
      paced += " " + to_string(r.problem.op) + " " + r.label + " (" + fixed(r.issue_us, 1) + " of " +
               fixed(r.time_us, 1) + ")";
  if (!paced.empty())
    out << "# Paced by the host's issue (issue_us >= " << fixed(kHostPaced, 1) << " x time_us):" << paced << "\n";
  // A plan runs all the GEMMs of sequential's, so a row faster than those alone was timed under
  // another load than the baseline (a shared machine's other processes).
  std::string below;
  for (const CaseResult& r : results)
    if (r.plan.algo != Algo::sequential && r.time_us < r.t_gemm_us)
      below += " " + to_string(r.problem.op) + " " + r.label + " (" + fixed(r.time_us, 1) + " < " +
               fixed(r.t_gemm_us, 1) + ")";
  if (!below.empty())
    out << "# Faster than sequential's GEMMs alone, so timed under another load than the baseline; no overlap "
           "figures (--rounds R spreads the load over every row):"
        << below << "\n";
  out << "#\n" << std::flush;
}

void print_round(std::ostream& out, Op op, int round, int rounds,
                 const std::vector<std::pair<std::string, double>>& times) {
  out << "# round " << round << "/" << rounds << " of " << to_string(op) << ", us:";
  for (size_t i = 0; i < times.size(); ++i)
    out << (i ? ", " : " ") << times[i].first << " " << fixed(times[i].second, 1);
  out << "\n" << std::flush;
}

nlohmann::json results_json(const RunInfo& info, const std::vector<CaseResult>& results) {
  nlohmann::json rows = nlohmann::json::array();
  std::vector<IssueSample> issue;
  bool shared = false;
  for (const CaseResult& r : results) {
    nlohmann::json per_rank = nlohmann::json::array();
    for (const RankOverlap& o : r.overlap.ranks)
      per_rank.push_back(o.comm_us > 0 ? nlohmann::json(o.fraction) : nlohmann::json());
    const bool comm = has_comm(r);
    rows.push_back(case_json(r.problem, r.plan, r.dtype));
    rows.back().update(
        {{"steps", r.steps},
         {"time_us", number_or_null(r.time_us)},
         {"tflops", number_or_null(r.tflops)},
         {"t_gemm_us", number_or_null(r.t_gemm_us)},
         {"t_comm_us", number_or_null(r.t_comm_us)},
         {"speedup_vs_sequential", number_or_null(r.speedup)},
         {"overlap_efficiency", number_or_null(r.efficiency)},
         {"wrong", r.checked ? nlohmann::json(r.wrong) : nlohmann::json()},
         {"max_rel_err", r.checked ? number_or_null(r.max_rel_err) : nlohmann::json()},
         {"label", r.label.empty() ? to_string(r.plan.algo) : r.label},
         {"options", to_json(r.plan)},  // the plan options again, as the tuning cache writes them
         {"overlap_hidden_fraction", comm ? number_or_null(r.overlap.mean_fraction) : nlohmann::json()},
         {"overlap_hidden_fraction_min", comm ? number_or_null(r.overlap.min_fraction) : nlohmann::json()},
         {"overlap_hidden_fraction_per_rank", per_rank}});
    if (info.predicted) rows.back()["predicted_us"] = number_or_null(r.predicted_us);
    if (!r.chosen_by.empty()) rows.back()["chosen_by"] = r.chosen_by;
    if (!r.round_us.empty()) rows.back()["round_us"] = r.round_us;
    if (!std::isnan(r.issue_us)) {
      rows.back()["issue_us"] = number_or_null(r.issue_us);
      rows.back()["issue_ops"] = {{"gemms", r.issue_gemms}, {"others", r.issue_others}};
      if (r.chosen_by.empty()) issue.push_back({r.issue_gemms, r.issue_others, r.issue_us});  // auto: a twin
      shared = shared || r.issue_shared;
    }
    if (!std::isnan(r.t_gemm_plan_us)) {
      rows.back()["t_gemm_plan_us"] = number_or_null(r.t_gemm_plan_us);
      rows.back()["gemm_busy_us"] = number_or_null(r.gemm_busy_us);
      rows.back()["gemm_rate_beside_comm"] = number_or_null(r.t_gemm_plan_us / r.gemm_busy_us);
    }
  }
  nlohmann::json out = {
      {"collmm_version", COLLMM_VERSION}, {"backend", info.backend}, {"world_size", info.world}, {"results", rows}};
  if (!issue.empty()) {  // the host's cost per operation over this run's cases: the profile's "host" for it
    const HostCost h = fit_issue(issue);
    out["host_issue"] = {
        {"issue_us", h.issue_us}, {"gemm_issue_us", h.gemm_issue_us}, {"shared", shared}, {"cases", issue.size()}};
  }
  return out;
}

}  // namespace collmm
