// measured_choice.cpp: auto's measured choice (src/sim/measured_choice.hpp): which candidates are
// timed, their times agreed across processes (the slowest one's), the pick, its printout, its
// tuning-cache entries, and the per-process memory of the decisions.
#include "measured_choice.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "agreement.hpp"
#include "median.hpp"

namespace collmm {

AutoMeasure parse_auto_measure(const std::string& s) {
  if (s == "on") return AutoMeasure::on;
  if (s == "off") return AutoMeasure::off;
  throw UsageError("auto-measure must be on or off (got " + s + ")");
}

std::string to_string(AutoMeasure m) { return m == AutoMeasure::on ? "on" : "off"; }

std::vector<Alternative> candidates_to_time(const Choice& c, const MeasureSettings& s) {
  std::vector<Alternative> out;
  if (c.alternatives.empty()) return out;
  const double limit = c.alternatives.front().predicted_us * (1 + s.margin);
  const size_t most = static_cast<size_t>(std::max(1, s.max_candidates));
  for (const Alternative& a : c.alternatives)
    if (a.predicted_us <= limit && out.size() < most) out.push_back(a);
  // Always among them: the choice's own pick (the model's best, or a tuning cache's fastest
  // measured, which the model may rank far off), then sequential; each in place of the last
  // candidate that is neither where the bound is reached.
  std::vector<PlanOptions> kept;
  auto keep = [&](auto is_it) {
    const auto in_out = std::find_if(out.begin(), out.end(), is_it);
    if (in_out != out.end()) {
      kept.push_back(in_out->options);
      return;
    }
    const auto found = std::find_if(c.alternatives.begin(), c.alternatives.end(), is_it);
    if (found == c.alternatives.end()) return;
    if (out.size() >= most) {
      const auto last = std::find_if(out.rbegin(), out.rend(), [&](const Alternative& a) {
        return std::find(kept.begin(), kept.end(), a.options) == kept.end();
      });
      if (last == out.rend()) return;
      out.erase(std::next(last).base());
    }
    out.push_back(*found);
    kept.push_back(found->options);
  };
  keep([&](const Alternative& a) { return a.options == c.options; });
  keep([](const Alternative& a) { return a.options.algo == Algo::sequential; });
  std::stable_sort(out.begin(), out.end(),
                   [](const Alternative& a, const Alternative& b) { return a.predicted_us < b.predicted_us; });
  return out;
}

bool needs_measuring(const Choice& c, const MeasureSettings& s) {
  if (s.measure == AutoMeasure::off) return false;
  const std::vector<Alternative> to_time = candidates_to_time(c, s);
  if (to_time.size() < 2) return false;
  return std::any_of(to_time.begin(), to_time.end(), [](const Alternative& a) { return a.measured_us < 0; });
}

MeasuredChoice measure_choice(const std::vector<Alternative>& candidates, const TimeCandidate& time, HostComm& host,
                              const MeasureSettings& s) {
  if (candidates.empty()) throw std::logic_error("measure_choice: no candidates");
  // Every process must time the same candidates the same way, or their runs would not match.
  std::vector<std::pair<std::string, std::string>> keys{{"auto warm-up runs", std::to_string(s.warmup)},
                                                        {"auto timed runs", std::to_string(s.iters)},
                                                        {"auto runoff margin", std::to_string(s.runoff_margin)},
                                                        {"auto runoff passes", std::to_string(s.runoff_passes)},
                                                        {"auto tie margin", std::to_string(s.tie_margin)}};
  for (size_t i = 0; i < candidates.size(); ++i)
    keys.emplace_back("auto candidate " + std::to_string(i), to_string(candidates[i].options));
  host.set_phase("auto: the ranks' agreement on the candidates to time");
  check_processes_agree(host, keys);

  const size_t n = candidates.size();
  std::vector<std::vector<double>> pass_us(n);               // per candidate, the agreed time of each pass
  std::vector<std::vector<std::vector<double>>> proc_us(n);  // per candidate, per pass, every process's
  // One pass over some candidates: this process's times, then everyone's (one exchange).
  auto pass = [&](const std::vector<size_t>& which) {
    std::vector<double> mine;
    for (size_t i : which) {
      host.set_phase("auto: the timed runs of " + to_string(candidates[i].options));
      mine.push_back(time(candidates[i].options, s.warmup, s.iters));
    }
    host.set_phase("auto: gathering the candidates' times");
    const std::vector<double> all = host.allgather(mine);  // which.size() per process, process order
    for (size_t j = 0; j < which.size(); ++j) {
      std::vector<double> procs;
      for (size_t q = 0; q < all.size() / which.size(); ++q) procs.push_back(all[q * which.size() + j]);
      pass_us[which[j]].push_back(*std::max_element(procs.begin(), procs.end()));
      proc_us[which[j]].push_back(procs);
    }
  };
  std::vector<size_t> close(n);
  for (size_t i = 0; i < n; ++i) close[i] = i;
  pass(close);
  for (int p = 0; p < s.runoff_passes; ++p) {  // the runoff, on agreed times only
    double fastest = median(pass_us[0]);
    for (size_t i = 1; i < n; ++i) fastest = std::min(fastest, median(pass_us[i]));
    close.clear();
    for (size_t i = 0; i < n; ++i)
      if (median(pass_us[i]) <= fastest * (1 + s.runoff_margin)) close.push_back(i);
    if (close.size() < 2) break;
    if (p % 2 == 0) std::reverse(close.begin(), close.end());  // the first pass ran them in order
    pass(close);
  }
  MeasuredChoice m;
  for (size_t i = 0; i < n; ++i) {
    TimedCandidate t{candidates[i].options, candidates[i].predicted_us, median(pass_us[i]), pass_us[i], {},
                     candidates[i].steps};
    for (size_t q = 0; q < proc_us[i].front().size(); ++q) {
      std::vector<double> passes;
      for (const std::vector<double>& procs : proc_us[i]) passes.push_back(procs[q]);
      t.proc_us.push_back(median(passes));
    }
    m.timed.push_back(t);
  }
  std::vector<double> times;  // agreed times: the same pick on every process
  std::vector<int> steps;
  for (const TimedCandidate& t : m.timed) times.push_back(t.time_us), steps.push_back(t.steps);
  const TimedCandidate* best = &m.timed[pick_measured(times, steps, s.tie_margin)];
  m.options = best->options;
  m.time_us = best->time_us;
  return m;
}

std::string print(const MeasuredChoice& m, const MeasureSettings& s) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line,
                "# auto measured: %zu candidates, %d warm-up + %d timed runs each (median; the slowest rank's); "
                "those within %.0f%% of the fastest again, up to %d more passes (the median of the passes); "
                "within %.0f%% a tie, to the fewest host steps\n",
                m.timed.size(), s.warmup, s.iters, 100 * s.runoff_margin, s.runoff_passes, 100 * s.tie_margin);
  out << line;
  for (const TimedCandidate& t : m.timed) {
    std::snprintf(line, sizeof line, "#   %-10s%s  %3d host steps  predicted %10.1f us  measured %10.1f us%s",
                  to_string(t.options.algo).c_str(), options_after_name(t.options).c_str(), t.steps, t.predicted_us,
                  t.time_us, t.options == m.options ? "  <- pick" : "");
    out << line;
    if (t.pass_us.size() > 1) {
      out << "  (passes";
      for (double us : t.pass_us) std::snprintf(line, sizeof line, " %.1f", us), out << line;
      out << ")";
    }
    out << "\n";
  }
  std::snprintf(line, sizeof line, "# auto: %s%s (from the measured; %.1f us)\n", to_string(m.options.algo).c_str(),
                options_after_name(m.options).c_str(), m.time_us);
  out << line;
  return out.str();
}

std::vector<TuningEntry> tuning_entries(const Problem& p, Dtype dtype, const MeasuredChoice& m) {
  std::vector<TuningEntry> entries;
  for (const TimedCandidate& t : m.timed) {
    TuningEntry e;
    e.problem = p;
    e.dtype = dtype;
    e.options = t.options;
    e.time_us = t.time_us;
    e.source = "auto";
    entries.push_back(e);
  }
  return entries;
}

nlohmann::json to_json(const Choice& c) {
  nlohmann::json alternatives = nlohmann::json::array();
  for (const Alternative& a : c.alternatives)
    alternatives.push_back({{"options", to_json(a.options)},
                            {"predicted_us", a.predicted_us},
                            {"measured_us", a.measured_us},
                            {"steps", a.steps}});
  return {{"options", to_json(c.options)},
          {"predicted_us", c.predicted_us},
          {"measured_us", c.measured_us},
          {"source", c.source},
          {"alternatives", alternatives}};
}

Choice choice_from_json(const nlohmann::json& j) {
  Choice c;
  c.options = plan_options_from_json(j.at("options"));
  c.predicted_us = j.at("predicted_us").get<double>();
  c.measured_us = j.at("measured_us").get<double>();
  c.source = j.at("source").get<std::string>();
  for (const nlohmann::json& a : j.at("alternatives"))
    c.alternatives.push_back({plan_options_from_json(a.at("options")), a.at("predicted_us").get<double>(),
                              a.at("measured_us").get<double>(), a.value("steps", 0)});
  return c;
}

const AutoChooser::Decision& AutoChooser::decide(HostComm& host, const Problem& p, Dtype dtype, const Profile& profile,
                                                 const std::string& cache_path, const MeasureSettings& settings,
                                                 const TimeCandidate& time) {
  const ProblemKey key{p, dtype};
  auto it = decided_.find(key);
  if (it != decided_.end()) return it->second;

  // Process 0 chooses (only it may see the cache file); every process starts from its choice.
  std::string mine, error;
  if (host.proc() == 0) {
    try {
      TuningCache cache;
      const bool have_cache = !cache_path.empty() && std::filesystem::exists(cache_path);
      if (have_cache) cache = load_tuning_cache(cache_path);
      mine = to_json(choose(p, dtype, profile, have_cache ? &cache : nullptr)).dump();
    } catch (const UsageError& e) {
      error = e.what();
    }
  }
  host.set_phase("auto: sharing process 0's choice");
  raise_if_any_process_failed(host, error);
  const Choice choice = choice_from_json(nlohmann::json::parse(host.allgather(mine).at(0)));

  Decision d{choice.options, choice.source, print(choice)};
  if (needs_measuring(choice, settings)) {
    const MeasuredChoice m = measure_choice(candidates_to_time(choice, settings), time, host, settings);
    d.options = m.options;
    d.source = "measured";
    d.printed += print(m, settings);
    if (!cache_path.empty()) {
      // Process 0 writes; every process learns whether it could before going on.
      error.clear();
      if (host.proc() == 0) try {
          update_tuning_cache(cache_path, tuning_entries(p, dtype, m));
        } catch (const std::exception& e) {
          error = std::string("auto: recording the timed candidates: ") + e.what();
        }
      host.set_phase("auto: recording the timed candidates");
      raise_if_any_process_failed(host, error);
    }
  }
  return decided_.emplace(key, d).first->second;
}

}  // namespace collmm
