// main.cpp: collmm-sim, the predicted side of collmm-bench. It runs the same plans through the
// cost model (collmm/sim.hpp) for any P up to 1024 and prints the predicted table. It can draw the
// predicted timeline (SVG), write it as a Chrome trace and as JSON, and show what --algo auto
// would pick (src/sim/tuning.hpp).
//
//   collmm-sim --op ag_gemm|gemm_rs|all --algo NAME|all|auto|ALGO:piecesS,... -m M -n N -k K -P P
//              --dtype bf16 --profile h200-nvlink|FILE.json --timeline FILE.svg --trace FILE.json --json FILE
//
// --algo takes collmm-bench's list (algo_entries.hpp), and the rows are named as bench names them.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "algo_entries.hpp"
#include "atomic_file.hpp"
#include "chrome_trace.hpp"
#include "cli_range.hpp"
#include "cli_size.hpp"
#include "collmm/ops.hpp"
#include "cost_model.hpp"
#include "quote.hpp"
#include "svg.hpp"
#include "table.hpp"
#include "tuning.hpp"

namespace collmm {
namespace {

struct SimOptions {
  std::string op = "all", dtype = "bf16", profile = "h200-nvlink", post = "comm-first", piece_sizes = "equal";
  std::vector<std::string> algo{"all"};  // --algo's comma list, split by CLI11
  int64_t m = 8192, n = 8192, k = 8192;
  int world = 8, timeline_ranks = 8;
  PlanOptions plan;          // from the plan option flags (post, piece_sizes: parsed from their names; algo: per row)
  bool waves_given = false;  // --waves on the command line
  std::string timeline, trace, json, tuning_cache, save_profile;
};

// Events a --trace holds (one per simulated step of every row; its JSON takes about 4 KB of
// memory per event while it is built) and an SVG draws: bounded so that the files stay in the
// hundreds of MB.
constexpr double kMaxTimelineEvents = 1e5;

std::string figure(double v) {
  char n[32];
  std::snprintf(n, sizeof n, "%.3g", v);
  return n;
}

// --algo auto simulates every candidate (and every cached configuration of the shape) before it
// picks: checked as a whole, before any of them runs.
double check_auto_size(const Problem& p, Dtype dtype, const TuningCache* cache) {
  std::vector<PlanOptions> all = auto_candidates(p);
  if (cache)
    for (const TuningEntry& e : cache->find(p, dtype)) all.push_back(e.options);
  double steps = 0;
  for (const PlanOptions& x : all) steps += simulated_steps(p, x);
  if (steps <= kMaxSimulatedSteps) return steps;
  throw UsageError(to_string(p.op) + " --algo auto at P = " + std::to_string(p.world) + " would simulate its " +
                   std::to_string(all.size()) + " candidates" + (cache ? " (the tuning cache's included)" : "") +
                   ", about " + figure(steps) + " steps, more than " + std::to_string(int64_t(kMaxSimulatedSteps)) +
                   ": name an algorithm (--algo ring: " + figure(simulated_steps(p, {.algo = Algo::ring})) +
                   " steps) or use a smaller P");
}

// The simulator walks every step of every rank's plan (simulated_steps, collmm/algorithms.hpp);
// bounded so that every run ends in seconds. Options out of their ranges are refused first
// (validate), so that a hint never names a count beyond its option's range.
void check_simulated_size(const Problem& p, const PlanOptions& x) {
  validate(p, x);
  const double steps = simulated_steps(p, x);
  if (steps <= kMaxSimulatedSteps) return;
  PlanOptions one = x;  // one stage or wave: the steps each adds
  one.stages = 1;
  one.waves = 1;
  const int most = std::max(1, static_cast<int>(kMaxSimulatedSteps / simulated_steps(p, one)));
  const std::string option = algorithm(x.algo).takes_stages ? "--stages" : "--waves";
  std::string hint = algorithm(x.algo).takes_stages || takes_waves(p.op, x.algo)
                         ? "give " + option + " " + std::to_string(most) + " or fewer, or a smaller P"
                         : "use a smaller P";
  throw UsageError(to_string(p.op) + " " + to_string(x.algo) + " at P = " + std::to_string(p.world) +
                   " would simulate about " + figure(steps) + " steps, more than " +
                   std::to_string(int64_t(kMaxSimulatedSteps)) + ": " + hint);
}

// The whole invocation (every op, every row) within the same bound, and the events kept for
// --trace and drawn by --timeline within theirs; checked before anything is simulated.
void check_total_size(double steps, int world, const SimOptions& o) {
  if (steps > kMaxSimulatedSteps)
    throw UsageError("these rows would simulate about " + figure(steps) + " steps in all at P = " +
                     std::to_string(world) + ", more than " + std::to_string(int64_t(kMaxSimulatedSteps)) +
                     ": ask for fewer rows (--op, --algo) or use a smaller P");
  if (!o.trace.empty() && steps > kMaxTimelineEvents)
    throw UsageError("--trace would hold about " + figure(steps) + " events (one per simulated step) at P = " +
                     std::to_string(world) + ", more than " + std::to_string(int64_t(kMaxTimelineEvents)) +
                     ": use a smaller P or fewer rows (--op, --algo), or leave --trace out");
  const int drawn = o.timeline_ranks <= 0 ? world : std::min(o.timeline_ranks, world);
  if (!o.timeline.empty() && steps * drawn / world > kMaxTimelineEvents)
    throw UsageError("--timeline would draw about " + figure(steps * drawn / world) + " steps of " +
                     std::to_string(drawn) + " ranks, more than " + std::to_string(int64_t(kMaxTimelineEvents)) +
                     ": give --timeline-ranks 8 (or fewer), or use a smaller P");
}

void write_text(const std::string& path, const std::string& text) { write_file_atomically(path, text); }

// Every output path can be written, checked before anything is simulated (as collmm-bench checks
// its own): UsageError naming the option and the path.
void check_outputs_writable(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (const auto& [option, path] : outputs)
    if (const std::string why = path.empty() ? "" : why_not_writable(path); !why.empty())
      throw UsageError(option + " " + quote(path) + ": cannot be written (" + why + "); nothing was simulated");
}

// A row before it is simulated: its label and plan.
struct RowCase {
  Op op;
  std::string label;
  PlanOptions options;
};

int run(const SimOptions& o) {
  const Profile prof = load_profile(o.profile);
  const Dtype dtype = parse_dtype(o.dtype);
  try {
    check_gemm_rate(prof, dtype);
  } catch (const UsageError& e) {
    throw UsageError("--profile: profile " + quote(o.profile) + ": " + e.what());
  }
  std::vector<Op> ops = o.op == "all" ? all_ops() : std::vector<Op>{parse_op(o.op)};
  AlgoEntries entries;
  try {
    entries = parse_algo_entries(o.algo);
  } catch (const UsageError& e) {
    throw UsageError(std::string("--algo: ") + e.what());
  }
  for (const ListedConfig& c : entries.configs)
    if (!c.deprecation.empty()) std::cerr << "collmm-sim: --algo " << c.deprecation << "\n";
  TuningCache cache;
  if (!o.tuning_cache.empty()) cache = load_tuning_cache(o.tuning_cache);
  const TuningCache* cache_or_none = o.tuning_cache.empty() ? nullptr : &cache;

  PlanOptions base = o.plan;
  if (const std::string old = stages_as_waves(base, o.waves_given, ops, entries.algos); !old.empty())
    std::cerr << "collmm-sim: " << old << "\n";
  base.post = parse_post(o.post);
  base.piece_sizes = parse_piece_sizes(o.piece_sizes);
  check_pieces_apply(entries.algos, base);

  auto problem_of = [&](Op op) {
    Problem p;
    p.op = op, p.m = o.m, p.n = o.n, p.k = o.k, p.world = o.world;
    return p;
  };
  // Every row's size first, then the simulations.
  double total_steps = 0;
  for (Op op : ops) {
    const Problem p = problem_of(op);
    total_steps += simulated_steps(p, options_for(op, Algo::sequential, base));
    if (entries.automatic) total_steps += check_auto_size(p, dtype, cache_or_none);
    for (const EntryRow& row : entry_rows(entries.algos, entries.configs, op, base)) {
      check_simulated_size(p, row.options);
      total_steps += simulated_steps(p, row.options);
    }
  }
  check_total_size(total_steps, o.world, o);

  // The rows of each op as collmm-bench orders them: its --algo entries, then auto's pick.
  std::vector<RowCase> cases;
  std::vector<std::string> choices;
  for (Op op : ops) {
    const Problem p = problem_of(op);
    for (const EntryRow& row : entry_rows(entries.algos, entries.configs, op, base))
      cases.push_back({op, row.label, row.options});
    if (!entries.automatic) continue;
    const Choice c = choose(p, dtype, prof, cache_or_none);
    choices.push_back("# " + to_string(op) + " M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) +
                      " K=" + std::to_string(p.k) + " P=" + std::to_string(p.world) + "\n" + print(c));
    PlanOptions picked = c.options;
    picked.post = base.post;
    check_simulated_size(p, picked);
    cases.push_back({op, "auto:" + algo_label(picked), picked});
  }

  std::vector<std::pair<std::string, std::string>> outputs{
      {"--save-profile", o.save_profile}, {"--json", o.json}, {"--trace", o.trace}};
  if (!o.timeline.empty())
    for (const RowCase& c : cases)
      outputs.emplace_back("--timeline", timeline_path(o.timeline, c.op, c.label, cases.size() > 1));
  check_outputs_writable(outputs);
  if (!o.save_profile.empty()) save_profile(prof, o.save_profile);

  std::vector<SimRow> rows;
  const bool keep_timelines = !o.timeline.empty() || !o.trace.empty();
  for (Op op : ops) {
    const Problem p = problem_of(op);
    const Prediction seq = predict(p, options_for(op, Algo::sequential, base), dtype, prof);
    for (const RowCase& c : cases) {
      if (c.op != op) continue;
      SimRow row{c.label, c.options == seq.options ? seq : predict(p, c.options, dtype, prof, &seq)};
      if (!keep_timelines) row.prediction.timeline = Timeline{};
      rows.push_back(std::move(row));
    }
  }

  print_prediction_header(std::cout, prof);
  for (const SimRow& r : rows) print_prediction_row(std::cout, r);
  print_prediction_summary(std::cout, rows);
  for (const std::string& c : choices) std::cout << c;

  if (!o.timeline.empty())
    for (const SimRow& r : rows) {
      const Prediction& p = r.prediction;
      SvgOptions svg;
      svg.max_ranks = o.timeline_ranks;
      svg.subtitle = "predicted, " + prof.name + ", M=" + std::to_string(p.problem.m) +
                     " N=" + std::to_string(p.problem.n) + " K=" + std::to_string(p.problem.k) + " " +
                     to_string(dtype) + ", " + r.label;
      const std::string path = timeline_path(o.timeline, p.problem.op, r.label, rows.size() > 1);
      write_svg(p.timeline, path, svg);
      std::cout << "# timeline: " << path << "\n";
    }
  if (!o.trace.empty()) {
    std::vector<Timeline> timelines;
    for (const SimRow& r : rows) timelines.push_back(r.prediction.timeline);
    write_text(o.trace, chrome_trace(timelines).dump() + "\n");
    std::cout << "# trace: " << o.trace << "\n";
  }
  if (!o.json.empty()) write_text(o.json, predictions_json(prof, rows).dump(2) + "\n");
  return 0;
}

}  // namespace
}  // namespace collmm

int main(int argc, char** argv) {
  collmm::SimOptions o;
  CLI::App app{"collmm-sim: predicted time, timeline and overlap of collmm's algorithms for any P, from a cost model"};
  app.add_option("--op", o.op, collmm::op_names(", ") + " or all")->capture_default_str();
  app.add_option("--algo", o.algo,
                 collmm::algorithm_names() +
                     ", all, auto (the model's pick, or the fastest measured one in --tune-cache: the row "
                     "auto:<algo>), or a comma list of these as collmm-bench takes it, e.g. all,ring:pieces4h,auto (an "
                     "entry ALGO:piecesS, ALGO:piecesSh, ALGO:mergeG or ALGO:wavesW: that algorithm with those "
                     "options as a row of its own)")
      ->delimiter(',')
      ->capture_default_str();
  const CLI::Validator size = collmm::size_transform();  // as collmm-bench: 8K = 8192
  app.add_option("-m", o.m, "M (global; suffixes K, M: 8K = 8192)")->transform(size)->capture_default_str();
  app.add_option("-n", o.n, "N (global)")->transform(size)->capture_default_str();
  app.add_option("-k", o.k, "K (global)")->transform(size)->capture_default_str();
  app.add_option("-P,--world", o.world, "ranks (1.." + std::to_string(collmm::kMaxWorld) + ")")
      ->capture_default_str()
      ->check(CLI::Range(1, collmm::kMaxWorld));
  app.add_option("--dtype", o.dtype, "f64, f32, tf32, f16, bf16, fp8")->capture_default_str();
  std::string profiles;
  for (const std::string& name : collmm::builtin_profile_names()) profiles += name + ", ";
  app.add_option("--profile", o.profile, profiles + "or a profile JSON file")->capture_default_str();
  app.add_option("--stages", o.plan.stages, "pipelined: stages (0: max(1, min(P, M/P)))")->capture_default_str();
  app.add_option("--waves", o.plan.waves, "gemm_ar ring: waves, each a ring over M/W rows (0: one)")
      ->capture_default_str();
  app.add_option("--gemm-lanes", o.plan.gemm_lanes, "GEMM lanes")
      ->capture_default_str()
      ->check(CLI::Range(1, collmm::kMaxGemmLanes));
  app.add_option("--merge", o.plan.merge, "ag_gemm ring: one GEMM per up to G received chunks")->capture_default_str();
  app.add_option("--pieces", o.plan.pieces,
                 collmm::names_taking(&collmm::AlgoRow::takes_pieces) +
                     ": the ring's exposed edge cut into S pieces (S > 1 refused unless --algo has one of them)")
      ->capture_default_str()
      ->check(CLI::Range(1, collmm::kMaxPieces));
  app.add_option("--piece-sizes", o.piece_sizes,
                 "with --pieces S: equal, or halving (1/2, 1/4, ... of the edge chunk; S at most " +
                     std::to_string(collmm::kMaxHalvingPieces) + ", the chunk needs 2^(S-1) rows)")
      ->capture_default_str();
  app.add_option("--post", o.post, "comm-first or gemm-first")->capture_default_str();
  app.add_option("--timeline", o.timeline,
                 "SVG of the predicted iteration (FILE-<op>-<algo>.svg for several rows, auto:ring -> auto-ring)");
  app.add_option("--timeline-ranks", o.timeline_ranks, "ranks drawn in the SVG (0: all)")
      ->check(collmm::at_least(0))
      ->capture_default_str();
  app.add_option("--trace", o.trace, "Chrome-trace JSON of the predicted iterations");
  app.add_option("--json", o.json, "the predicted table as JSON");
  app.add_option("--tune-cache", o.tuning_cache,
                 "measured tuning cache JSON that refines --algo auto (collmm-bench --tune-cache writes it)");
  app.add_option("--save-profile", o.save_profile, "write the profile used as JSON (a start for your own)");
  try {
    app.parse(argc, argv);
    o.waves_given = app.count("--waves") > 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "collmm-sim: " << collmm::one_line(e.what()) << "\nRun with --help for more information.\n";
    return 2;
  }
  try {
    return collmm::run(o);
  } catch (const collmm::UsageError& e) {
    std::cerr << "collmm-sim: " << collmm::one_line(e.what()) << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "collmm-sim: error: " << collmm::one_line(e.what()) << "\n";
    return 1;
  }
}
