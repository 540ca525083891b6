// algo_entries.hpp: the --algo list of both command lines (collmm-bench, collmm-sim). Its entries
// are an algorithm, all, auto, or an algorithm with plan options of its own (ring:pieces4h). Here
// too: a row's label (the table's algo column, the JSON's "label"), the rows a list gives for one
// op, and the file name of a row (--timeline, --save). One parser, so that both tools and the
// PyTorch ops' `algo` take the same spellings.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "collmm/types.hpp"

namespace collmm {

// "ring", or "ring:waves2" in waves (gemm_ar's ring), "ring:merge2" when GEMMs are merged, "ring:pieces4" with the edge
// in pieces
// ("ring:pieces4h" in pieces of halving size): a row's name in the table, the JSON and file names.
std::string algo_label(const PlanOptions&);

// How an entry with options of its own is spelled, for messages.
constexpr const char* kEntrySpelling = "ALGO[:wavesW][:mergeG][:piecesS[h]]";

// An --algo entry with plan options of its own, spelled as algo_label writes them: "ring:pieces4h",
// "ring:merge2". Its waves, merge and pieces replace --waves, --merge, --pieces and --piece-sizes
// for that row, so that configurations are timed side by side in one run.
struct ListedConfig {
  std::string label;    // canonical: parse_listed_config refuses another spelling (but the old one below)
  PlanOptions options;  // its algo, waves, merge, pieces and piece sizes (the rest from the command line)
  // Where it was typed in a deprecated spelling ("ring:stages2" for ring:waves2), the message that
  // says so, for the front end to show; "" otherwise.
  std::string deprecation;
};

// The inverse of algo_label for an --algo entry (kEntrySpelling; a plain algorithm too); UsageError
// for a bad word, a value out of range or a spelling that algo_label would write otherwise.
ListedConfig parse_listed_config(const std::string& text);

// The PyTorch ops' `algo` other than "auto": one entry (parse_listed_config) for `op`, the options it
// does not set at their defaults; UsageError where it is no entry or the op's algorithm does not
// take its options.
PlanOptions entry_options(Op op, const std::string& text);

// A whole --algo list, as typed and split at its commas.
struct AlgoEntries {
  std::vector<Algo> algos;            // the algorithms, in the order given, each once (all: every one)
  std::vector<ListedConfig> configs;  // the entries with options of their own, each once
  bool automatic = false;             // auto: the row "auto:<label>" of the cost model's (or cache's) pick
};
// Configurations alone (no algorithm, no auto) give the sequential row beside them, the baseline.
// UsageError for an unknown entry, listing every accepted spelling.
AlgoEntries parse_algo_entries(const std::vector<std::string>& names);

// The plan options of a listed configuration for one op, the other options from `base` (--post,
// --gemm-lanes, ...); UsageError where the op's algorithm does not take its waves, merge or pieces.
PlanOptions config_options(const PlanOptions& base, Op, const ListedConfig&);

// --stages S once gave gemm_ar's ring S waves too, and still does for a while. Where --waves is not
// given and an op of `ops` takes waves with an algorithm of `algos`: sets base.waves = S (S > 0). It
// returns the message saying that this is deprecated (the front end prints it), "" otherwise.
std::string stages_as_waves(PlanOptions& base, bool waves_given, const std::vector<Op>& ops,
                            const std::vector<Algo>& algos);

// One row of an op: its label and the plan it runs.
struct EntryRow {
  std::string label;
  PlanOptions options;
};
// The rows of `op`, in order: each algorithm with `base` as it takes it (options_for), then each
// configuration (config_options). UsageError where a configuration repeats a plan already listed.
// (auto's row is not among them: its pick is made elsewhere.)
std::vector<EntryRow> entry_rows(const std::vector<Algo>& algos, const std::vector<ListedConfig>& configs, Op op,
                                 const PlanOptions& base);

// --pieces S > 1 or --piece-sizes halving given on the command line must reach a row: UsageError
// when none of `algos` takes pieces (an entry such as ring:pieces4 carries its own, auto chooses
// its own).
void check_pieces_apply(const std::vector<Algo>& algos, const PlanOptions& base);

// A row's label as a part of a file name: "auto:ring:pieces4h" -> "auto-ring-pieces4h" (the
// --timeline and --save files of one run are told apart by it).
std::string file_label(const std::string& label);
// --timeline FILE.svg for a single row; FILE-<op>-<label>.svg (file_label) when there are several.
std::string timeline_path(const std::string& base, Op, const std::string& label, bool several);

}  // namespace collmm
