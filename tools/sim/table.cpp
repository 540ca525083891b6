// table.cpp: collmm-sim's predicted table and JSON.
#include "table.hpp"

#include "host_issue.hpp"
#include "profile_json.hpp"
#include "table_cells.hpp"
#include "tuning.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace collmm {
namespace {

std::string fixed(double v, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

// A row's cells: the case's (its fields, src/plan/table_cells.hpp; the algo cell its label), then the
// predicted figures.
std::vector<Cell> cells(const Prediction& p, const std::string& label) {
  std::vector<Cell> c = case_cells(p.problem, p.options, p.dtype, label);
  c.insert(c.end(), {
                        {"time_us", 11, fixed(p.time_us, 1)},
                        {"TFLOP/s", 9, fixed(p.tflops_per_rank, 1)},
                        {"t_gemm_us", 11, fixed(p.t_gemm_us, 1)},
                        {"t_comm_us", 11, fixed(p.t_comm_us, 1)},
                        {"max_us", 11, fixed(std::max(p.t_gemm_us, p.t_comm_us), 1)},
                        {"speedup", 8, fixed(p.speedup, 2)},
                        {"E", 6, fixed(p.overlap_efficiency, 2)},
                        {"hidden", 7, fixed(p.hidden_comm_mean, 2)},
                        {"hid_min", 8, fixed(p.hidden_comm_min, 2)},
                    });
  return c;
}

}  // namespace

void print_prediction_header(std::ostream& out, const Profile& prof) {
  out << "# collmm-sim: PREDICTED by the cost model, profile '" << prof.name << "'\n";
  if (prof.host.issue_us > 0)
    out << "# host issue: " << fixed(prof.host.issue_us, 2) << " us per device operation ("
        << fixed(issue_cost_us(prof.host, StepKind::gemm, 1), 2) << " per GEMM), "
        << (prof.host.shared ? "one host thread for every rank (emulated ranks)" : "one host thread per rank") << "\n";
  out << "# time_us: the slowest rank. TFLOP/s: per rank. t_gemm_us, t_comm_us: the sequential plan's\n"
         "# GEMMs alone and its comm alone (as collmm-bench); max_us: the larger. speedup: T_sequential / time.\n"
         "# E: overlap efficiency (T_sequential - time) / min(t_gemm, t_comm). hidden / hid_min: comm time\n"
         "# covered by GEMM on the same rank, mean over ranks / worst rank.\n#\n";
  print_heads(out, cells(Prediction{}, ""));
}

void print_prediction_row(std::ostream& out, const SimRow& row) {
  print_texts(out, cells(row.prediction, row.label));
  out << std::flush;
}

void print_prediction_summary(std::ostream& out, const std::vector<SimRow>& rows) {
  double speedup = 0, e = 0, ratio = 0;
  int n = 0;
  for (const SimRow& row : rows) {
    const Prediction& p = row.prediction;
    if (p.options.algo == Algo::sequential) continue;
    speedup += p.speedup, e += p.overlap_efficiency;
    ratio += p.time_us / std::max(p.t_gemm_us, p.t_comm_us);
    ++n;
  }
  if (n == 0) {
    out << "# (no overlapped algorithm in this run)\n#\n";
    return;
  }
  out << "# Avg predicted speedup vs sequential (overlapped algorithms) : " << fixed(speedup / n, 2) << "\n"
      << "# Avg predicted E : " << fixed(e / n, 2) << ", avg time / max(t_gemm, t_comm) : " << fixed(ratio / n, 3)
      << "\n#\n";
}

nlohmann::json predictions_json(const Profile& prof, const std::vector<SimRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const SimRow& r : rows) {
    const Prediction& p = r.prediction;
    nlohmann::json row = case_json(p.problem, p.options, p.dtype);
    row.update({{"label", r.label},
                {"time_us", p.time_us},
                {"tflops", p.tflops_per_rank},
                {"t_gemm_us", p.t_gemm_us},
                {"t_comm_us", p.t_comm_us},
                {"speedup_vs_sequential", p.speedup},
                {"overlap_efficiency", p.overlap_efficiency},
                {"hidden_comm_fraction", p.hidden_comm_mean},
                {"hidden_comm_fraction_min", p.hidden_comm_min}});
    out.push_back(row);
  }
  return {{"predicted", true}, {"profile", to_json(prof)}, {"results", out}};
}

}  // namespace collmm
