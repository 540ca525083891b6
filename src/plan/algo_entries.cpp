// algo_entries.cpp: the --algo list of both command lines (algo_entries.hpp).
#include "algo_entries.hpp"

#include <algorithm>

#include "collmm/algorithms.hpp"

namespace collmm {

namespace {

// The entry `c` over `base` as `op`'s algorithm takes it; UsageError("<name>: ...") where that
// algorithm does not take an option of the entry.
PlanOptions options_of_entry(const PlanOptions& base, Op op, const ListedConfig& c, const std::string& name) {
  PlanOptions p = base;
  p.waves = c.options.waves;
  p.merge = c.options.merge;
  p.pieces = c.options.pieces;
  p.piece_sizes = c.options.piece_sizes;
  p = options_for(op, c.options.algo, p);
  if (algo_label(p) != c.label)
    throw UsageError(name + ": " + to_string(op) + "'s " + to_string(c.options.algo) +
                     " does not take these options (it would run as " + algo_label(p) + ")");
  return p;
}

}  // namespace

std::string algo_label(const PlanOptions& p) {
  return to_string(p.algo) + (p.waves > 1 ? ":waves" + std::to_string(p.waves) : "") +
         (p.merge > 1 ? ":merge" + std::to_string(p.merge) : "") +
         (p.pieces > 1 ? ":pieces" + std::to_string(p.pieces) : "") +
         (p.pieces > 1 && p.piece_sizes == PieceSizes::halving ? "h" : "");
}

ListedConfig parse_listed_config(const std::string& text) {
  std::vector<std::string> words;
  for (size_t start = 0;;) {
    const size_t colon = text.find(':', start);
    words.push_back(text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  PlanOptions p;
  try {
    p.algo = parse_algo(words[0]);
  } catch (const UsageError& e) {
    throw UsageError("'" + text + "': " + e.what());
  }
  // A count after its word: "merge2" -> 2, in 1..hi; "pieces4h" -> 4 with halving.
  auto count = [&](const std::string& word, const std::string& key, int64_t hi, bool& halving) {
    std::string digits = word.substr(key.size());
    halving = !digits.empty() && digits.back() == 'h';
    if (halving) digits.pop_back();
    const bool number =
        !digits.empty() && digits.size() < 6 && digits.find_first_not_of("0123456789") == std::string::npos;
    const int v = number ? std::stoi(digits) : 0;
    if (v < 1 || v > hi)
      throw UsageError("'" + text + "': " + key + " takes a count 1.." + std::to_string(hi) + " (got '" + word + "')");
    return v;
  };
  // The old spelling of waves, "stagesW" on an algorithm without stages of its own, read as wavesW.
  std::string spelled = text, deprecation;
  for (size_t i = 1; i < words.size(); ++i) {
    bool halving = false;  // "merge2h" is refused below: algo_label writes no such word
    if (words[i].rfind("stages", 0) == 0) {
      if (algorithm(p.algo).takes_stages)
        throw UsageError("'" + text + "': " + to_string(p.algo) +
                         "'s stages are not an entry's option (give --stages)");
      p.waves = count(words[i], "stages", field_of(&PlanOptions::waves).hi, halving);
      words[i].replace(0, 6, "waves");
      spelled = words[0];
      for (size_t w = 1; w < words.size(); ++w) spelled += ":" + words[w];
      deprecation = "'" + text + "' is deprecated: the ring's waves are written '" + spelled + "'";
    } else if (words[i].rfind("waves", 0) == 0) {
      p.waves = count(words[i], "waves", field_of(&PlanOptions::waves).hi, halving);
    } else if (words[i].rfind("merge", 0) == 0) {
      p.merge = count(words[i], "merge", field_of(&PlanOptions::merge).hi, halving);
    } else if (words[i].rfind("pieces", 0) == 0) {
      p.pieces = count(words[i], "pieces", field_of(&PlanOptions::pieces).hi, halving);
      p.piece_sizes = halving ? PieceSizes::halving : PieceSizes::equal;
    } else {
      throw UsageError("'" + text + "': unknown option '" + words[i] + "' (an entry is " + kEntrySpelling +
                       ", e.g. ring:pieces4h)");
    }
  }
  if (p.pieces == 1) p.piece_sizes = PieceSizes::equal;
  if (p.waves == 1) p.waves = 0;  // one wave: the ring as it is
  if (algo_label(p) != spelled) throw UsageError("'" + text + "': write it as '" + algo_label(p) + "'");
  return {spelled, p, deprecation};
}

AlgoEntries parse_algo_entries(const std::vector<std::string>& names) {
  AlgoEntries entries;
  auto add = [&](Algo a) {
    if (std::find(entries.algos.begin(), entries.algos.end(), a) == entries.algos.end()) entries.algos.push_back(a);
  };
  for (const std::string& name : names) {
    if (name == "auto") {
      entries.automatic = true;
    } else if (name == "all") {
      for (Algo a : all_algos()) add(a);
    } else if (name.find(':') != std::string::npos) {
      ListedConfig c = parse_listed_config(name);
      auto same = [&](const ListedConfig& x) { return x.label == c.label; };
      if (std::none_of(entries.configs.begin(), entries.configs.end(), same)) entries.configs.push_back(std::move(c));
    } else {
      const auto& table = algorithm_table();
      const bool known = std::any_of(table.begin(), table.end(), [&](const AlgoRow& row) { return name == row.name; });
      if (!known)
        throw UsageError("unknown algorithm '" + name + "' (expected one of: " + algorithm_names(", ") +
                         ", all, auto, or an algorithm with options of its own, " + kEntrySpelling +
                         ", e.g. ring:pieces4h; several as a comma list)");
      add(parse_algo(name));
    }
  }
  if (entries.algos.empty() && !entries.configs.empty() && !entries.automatic) entries.algos = {Algo::sequential};
  return entries;
}

PlanOptions config_options(const PlanOptions& base, Op op, const ListedConfig& c) {
  return options_of_entry(base, op, c, "--algo " + c.label);
}

PlanOptions entry_options(Op op, const std::string& text) {
  return options_of_entry(PlanOptions{}, op, parse_listed_config(text), "'" + text + "'");
}

std::vector<EntryRow> entry_rows(const std::vector<Algo>& algos, const std::vector<ListedConfig>& configs, Op op,
                                 const PlanOptions& base) {
  std::vector<EntryRow> rows;
  for (Algo algo : algos) {
    const PlanOptions p = options_for(op, algo, base);
    rows.push_back({algo_label(p), p});
  }
  const size_t plain = rows.size();
  for (const ListedConfig& c : configs) {
    const PlanOptions p = config_options(base, op, c);
    for (size_t i = 0; i < plain; ++i)  // one plan, one row
      if (rows[i].options == p)
        throw UsageError("--algo " + c.label + ": " + to_string(op) + " runs this plan already as " + rows[i].label +
                         " (with --waves, --merge, --pieces or --piece-sizes)");
    rows.push_back({c.label, p});
  }
  return rows;
}

std::string stages_as_waves(PlanOptions& base, bool waves_given, const std::vector<Op>& ops,
                            const std::vector<Algo>& algos) {
  if (waves_given || base.stages == 0) return "";
  for (Op op : ops)
    for (Algo algo : algos)
      if (takes_waves(op, algo)) {
        base.waves = base.stages;
        const std::string s = std::to_string(base.stages);
        return "--stages " + s + " as the waves of " + to_string(op) + "'s " + to_string(algo) +
               " is deprecated: give --waves " + s;
      }
  return "";
}

void check_pieces_apply(const std::vector<Algo>& algos, const PlanOptions& base) {
  if (base.pieces == 1 && base.piece_sizes == PieceSizes::equal) return;
  for (Algo a : algos)
    if (algorithm(a).takes_pieces) return;
  std::string listed;
  for (Algo a : algos) listed += (listed.empty() ? "" : ", ") + to_string(a);
  const std::string option =
      base.pieces > 1 ? "--pieces " + std::to_string(base.pieces) : "--piece-sizes " + to_string(base.piece_sizes);
  throw UsageError(option + " applies to " + names_taking(&AlgoRow::takes_pieces) +
                   " only, and the --algo list runs none of them (it has " + (listed.empty() ? "auto alone" : listed) +
                   "): add one of them to --algo, or leave " + option +
                   " out (auto and entries such as ring:pieces4 choose their own pieces)");
}

std::string file_label(const std::string& label) {
  std::string name = label;
  for (char& c : name)
    if (c == ':') c = '-';
  return name;
}

std::string timeline_path(const std::string& base, Op op, const std::string& label, bool several) {
  if (!several) return base;
  const size_t dot = base.rfind('.');
  const bool has_ext = dot != std::string::npos && base.find('/', dot) == std::string::npos;
  return (has_ext ? base.substr(0, dot) : base) + "-" + to_string(op) + "-" + file_label(label) +
         (has_ext ? base.substr(dot) : ".svg");
}

}  // namespace collmm
