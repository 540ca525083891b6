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
  PlanOptions p = options_for(Op::ag_gemm, algo, o.plan);
  p.merge = 1;  // the plain algorithm, whichever op: without --merge and --pieces
  p.pieces = 1;
  p.piece_sizes = PieceSizes::equal;
  return p;
}

PlanOptions plan_options_of(const BenchOptions& o, Op op, Algo algo) { return options_for(op, algo, o.plan); }

std::string algo_label(const PlanOptions& p) {
  return to_string(p.algo) + (p.merge > 1 ? ":merge" + std::to_string(p.merge) : "") +
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
  p.algo = parse_algo(words[0]);
  // A count after its word: "merge2" -> 2, in 1..hi; "pieces4h" -> 4 with halving.
  auto count = [&](const std::string& word, const std::string& key, int hi, bool& halving) {
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
  for (size_t i = 1; i < words.size(); ++i) {
    bool halving = false;  // "merge2h" is refused below: algo_label writes no such word
    if (words[i].rfind("merge", 0) == 0) {
      p.merge = count(words[i], "merge", kMaxWorld, halving);
    } else if (words[i].rfind("pieces", 0) == 0) {
      p.pieces = count(words[i], "pieces", kMaxPieces, halving);
      p.piece_sizes = halving ? PieceSizes::halving : PieceSizes::equal;
    } else {
      throw UsageError("'" + text + "': unknown option '" + words[i] +
                       "' (an entry is ALGO[:mergeG][:piecesS[h]], e.g. ring:pieces4h)");
    }
  }
  if (p.pieces == 1) p.piece_sizes = PieceSizes::equal;
  if (algo_label(p) != text) throw UsageError("'" + text + "': write it as '" + algo_label(p) + "'");
  return {text, p};
}

PlanOptions plan_options_of(const BenchOptions& o, Op op, const ListedConfig& c) {
  PlanOptions p = o.plan;
  p.merge = c.options.merge;
  p.pieces = c.options.pieces;
  p.piece_sizes = c.options.piece_sizes;
  p = options_for(op, c.options.algo, p);
  if (algo_label(p) != c.label)
    throw UsageError("--algo " + c.label + ": " + to_string(op) + "'s " + to_string(c.options.algo) +
                     " does not take these options (it would run as " + algo_label(p) + ")");
  return p;
}

}  // namespace collmm
