// cli.cpp: the options of collmm-bench, their help texts, and the names -> enums step.
#include "cli.hpp"

#include <algorithm>
#include <iostream>

#include "cli_range.hpp"
#include "cli_size.hpp"
#include "collmm/algorithms.hpp"
#include "collmm/ops.hpp"
#include "collmm/profile.hpp"
#include "fault_point.hpp"

namespace collmm {
namespace {

// Names as typed; turned into enums after parsing, so that the messages come from the parse_*
// functions (plan/types.cpp).
struct Names {
  std::vector<std::string> algo{"all"};  // --algo's comma list, split by CLI11
  std::string op = "all", dtype = "f32", post = "comm-first", b_layout = "kn", auto_measure = "on",
              piece_sizes = "equal";
  std::string backend = to_string(BackendOptions{}.backend), transport = to_string(BackendOptions{}.transport),
              link_copy = to_string(BackendOptions{}.link_copy);
};

// The help's group of the cuda backend's options: refused with --backend cpu (refuse_cuda_options).
const char* const kCudaGroup = "CUDA";

void add_options(CLI::App& app, BenchOptions& o, Names& names) {
  const CLI::Validator size = size_transform();  // 8K = 8192, 1M = 1048576
  app.add_option("--backend", names.backend, "cpu | cuda")->capture_default_str();
  app.add_option("--op", names.op, op_names(" | ") + " | all")->capture_default_str();
  app.add_option(
         "--algo", names.algo,
         algorithm_names(" | ") +
             " | all | auto (the cost model's pick of algorithm, stages and "
             "GEMM lanes, or the fastest measured one in --tune-cache; printed with its predicted alternatives, "
             "its best candidates then timed (--auto-measure) and the fastest (a tie within 1% to the fewest host "
             "steps) run as the row auto:<algo>); "
             "or a comma list of these, e.g. all,auto: the auto row beside every algorithm in one run; an entry "
             "ALGO:piecesS, ALGO:piecesSh (halving sizes), ALGO:mergeG or ALGO:wavesW (gemm_ar's ring in waves) "
             "runs that algorithm with those options as a row of its own, e.g. all,ring:pieces4h,auto")
      ->delimiter(',')
      ->capture_default_str();
  app.add_flag_callback(
      "--list-algos",
      [] {
        for (const AlgoRow& row : algorithm_table()) std::cout << row.name << "\n";
        throw CLI::Success();
      },
      "print the algorithms' names, one a line, and exit");
  app.add_option("-m", o.m, "M, global rows of A and C (suffixes K, M: 8K = 8192)")
      ->transform(size)
      ->type_name("SIZE")
      ->capture_default_str();
  app.add_option("-n", o.n, "N, global columns of B and C")->transform(size)->type_name("SIZE")->capture_default_str();
  app.add_option("-k", o.k, "K, the inner size")->transform(size)->type_name("SIZE")->capture_default_str();
  app.add_option("--dtype", names.dtype, "f32 | f64 | bf16 | f16 | tf32 | fp8 (what the backend has)")
      ->capture_default_str();
  app.add_option("-w,--warmup", o.warmup, "untimed iterations before the timed ones")
      ->check(in_range(0, kMaxIters))
      ->capture_default_str();
  app.add_option("-i,--iters", o.iters, "timed iterations (the median is reported)")
      ->check(in_range(1, kMaxIters))
      ->capture_default_str();
  app.add_option("--rounds", o.rounds,
                 "run every case of an op this many times in turn (sequential, each --algo entry, auto; "
                 "then again): a slow drift of the machine falls on every case alike; each row reports the "
                 "median of its rounds (the mean of the middle two for an even count), its timeline and overlap "
                 "from the round nearest that median, and every round's time in --json (round_us)")
      ->check(in_range(1, 100))
      ->capture_default_str();
  app.add_flag("--check", o.check, "compare every output with an f64 reference (outputs poisoned with NaN first)");
  app.add_flag("--gemm-rate", o.gemm_rate,
               "also time each case's GEMMs alone: the GEMMs' rate beside the comm (alone / busy in the median "
               "iteration) is printed under the row and written to the JSON");
  app.add_option("--seed", o.seed, "seed of the random inputs")->check(in_range(0, kMaxSeed))->capture_default_str();
  app.add_option("--json", o.json_path, "write the results as JSON to FILE")->type_name("FILE");
  app.add_option("--trace", o.trace_path,
                 "write a Chrome trace (chrome://tracing, Perfetto) of one iteration of every case, all ranks")
      ->type_name("FILE");
  app.add_option("--timeline", o.timeline_path,
                 "write an SVG picture of one timed iteration (the median one), all ranks; with several cases one "
                 "file per case, FILE-<op>-<algo>.svg (auto:ring -> auto-ring)")
      ->type_name("FILE.svg");
  std::string profiles;
  for (const std::string& name : builtin_profile_names()) profiles += name + " | ";
  app.add_option("--profile", o.profile,
                 "cost-model profile (" + profiles +
                     "a JSON file, e.g. from --calibrate): adds the predicted time of the same plans (pred_us, "
                     "pred/meas) and is what --algo auto chooses with (default for auto: cpu-2core on cpu, "
                     "h200-nvlink on cuda, h200-host on cuda --transport host)")
      ->type_name("NAME|FILE");
  app.add_option("--tune-cache", o.tune_cache_path,
                 "measured tuning cache: --algo auto picks the fastest measured configuration of this shape when "
                 "it has one; every measured row (posted comm-first) is recorded into it after the run")
      ->type_name("FILE");
  app.add_option("--auto-measure", names.auto_measure,
                 "on: --algo auto times the model's best few candidates (predicted within 25% of the best, at most 4, "
                 "sequential among them; 1 warm-up + 3 timed runs each) and runs the fastest (within 1%: the fewest "
                 "host steps); off: the model's (or "
                 "the cache's) pick alone")
      ->capture_default_str();
  app.add_option("--calibrate", o.calibrate_path,
                 "measure the cost model's inputs on this backend (GEMM rate per shape, link bandwidth and latency, "
                 "cpu: contention) at this M, N, K and P, write them as a profile JSON to FILE, and exit")
      ->type_name("FILE");
  app.add_option("--save", o.save_dir,
                 "write each rank's A, B, C (and ag_gemm's gathered A) as .npy files "
                 "DIR/<op>-<row>-rank<r>-A.npy ... (<row>: the algo column, ':' as '-': ring-pieces4h, auto-ring); "
                 "bf16 and fp8 are decoded and saved as float32")
      ->type_name("DIR");
  app.add_option("--stages", o.plan.stages, "pipelined: number of stages (default: max(1, min(P, M/P)))")
      ->check(at_least(1));
  app.add_option("--waves", o.plan.waves, "gemm_ar ring: waves, each a ring over M/W rows (default: one)")
      ->check(at_least(1));
  app.add_option("--post", names.post, "within a step, post the comm or the GEMM first: comm-first | gemm-first")
      ->capture_default_str();
  app.add_option("--b-layout", names.b_layout, "kn: B_r is [K, N_r]; nk: [N_r, K] as torch.nn.Linear weights")
      ->capture_default_str();
  app.add_option("--merge", o.plan.merge,
                 "ag_gemm ring: one GEMM per up to G chunks received at consecutive steps (fewer, larger GEMMs; "
                 "the other cases ignore it)")
      ->check(at_least(1))
      ->capture_default_str()
      ->type_name("G");
  app.add_option("--pieces", o.plan.pieces,
                 names_taking(&AlgoRow::takes_pieces) +
                     ": cut the ring's exposed edge (ag_gemm: the last transfer and the last chunk's GEMM; "
                     "gemm_rs: the first partial's GEMM and send) into S pieces, so 1/S of a chunk's GEMM is exposed; "
                     "S > 1 is refused unless --algo runs one of them (with --algo all the other algorithms run "
                     "without it)")
      ->check(CLI::Range(1, kMaxPieces))
      ->capture_default_str()
      ->type_name("S");
  app.add_option("--piece-sizes", names.piece_sizes,
                 "with --pieces S: equal pieces, or halving: 1/2, 1/4, ... of the chunk (ag_gemm: the largest moved "
                 "first; gemm_rs: the smallest computed first), so 1/2^(S-1) is exposed; at most " +
                     std::to_string(kMaxHalvingPieces) +
                     " pieces, and the edge chunk needs 2^(S-1) rows; as --pieces, "
                     "refused unless --algo runs an algorithm that takes pieces")
      ->capture_default_str();
  app.add_option("--gemm-lanes", o.plan.gemm_lanes,
                 "GEMMs rotate over this many lanes (1.." + std::to_string(kMaxGemmLanes) + ")")
      ->check(CLI::Range(1, kMaxGemmLanes))
      ->capture_default_str();
  app.add_option("--threads", o.backend.threads,
                 "cpu: BLAS threads per rank (0: the node's cores split over its ranks)")
      ->check(in_range(0, kMaxThreads))
      ->capture_default_str();
  app.add_option("--timeout", o.backend.timeout_s,
                 "seconds any wait for another rank may take (MPI_Init and MPI_Finalize included) before the job "
                 "is ended (a rank died or hangs)")
      ->check(in_range(1, kMaxTimeout))
      ->capture_default_str();

  const std::string cuda = kCudaGroup;
  app.add_option("--transport", names.transport,
                 "cuda: nccl | local (ranks emulated in one process) | host (one GPU rank, --rank of --world, whose "
                 "peers are played by pinned host memory: the link is PCIe)")
      ->group(cuda)
      ->capture_default_str();
  app.add_option("--rank", o.backend.rank, "cuda --transport host: the rank this process runs")
      ->group(cuda)
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--link-copy", names.link_copy,
                 "cuda --transport host: engine (transfers by copy engines) | sm (by an SM copy kernel, as NCCL's "
                 "kernels move data)")
      ->group(cuda)
      ->capture_default_str();
  app.add_flag("--comm-priority", o.backend.comm_priority,
               "cuda: the comm lane (comm, copies, adds) and the host link's streams at the highest stream priority")
      ->group(cuda);
  app.add_option("-g,--gpus", o.backend.gpus,
                 "cuda: GPUs driven by this process, one thread each (0: one per MPI rank)")
      ->group(cuda)
      ->check(at_least(0));
  app.add_option("--world", o.backend.world, "cuda --transport local | host: how many ranks the job has")
      ->group(cuda)
      ->check(at_least(0));
  app.add_option("--gemm-sms", o.backend.gemm_sms, "cuda: SM count target for GEMMs (0: all)")
      ->group(cuda)
      ->check(at_least(0));
  app.add_option("--sm-margin", o.backend.sm_margin, "cuda: leave this many SMs to comm kernels")
      ->group(cuda)
      ->check(at_least(0));
  app.add_option("--nccl-min-ctas", o.backend.nccl_min_ctas, "cuda: NCCL minimum CTAs (0: NCCL's default)")
      ->group(cuda)
      ->check(at_least(0));
  app.add_option("--nccl-max-ctas", o.backend.nccl_max_ctas, "cuda: NCCL maximum CTAs (0: NCCL's default)")
      ->group(cuda)
      ->check(at_least(0));
  app.add_flag("--graph", o.backend.graph, "cuda: capture one iteration in a CUDA graph and replay it")->group(cuda);

  // For tests of the job's teardown: rank R kills itself (SIGKILL) or stops (SIGSTOP) in a phase:
  // init (as the backend starts; cuda: before its NCCL setup; "die" there is a failure that
  // throws), setup (before its first plan's agreement), run (before its first timed run), output
  // (before the results are written).
  app.add_option("--debug-die-rank", o.debug_die_rank)->group("");
  app.add_option("--debug-hang-rank", o.debug_hang_rank)->group("");
  // Points of src/common/fault_point.hpp: mpi_init, mpi_finalize, sendrecv, probe, write, rename.
  app.add_option("--debug-phase", o.debug_phase)
      ->check(CLI::IsMember(
          {"mpi_init", "init", "setup", "run", "sendrecv", "output", "probe", "write", "rename", "mpi_finalize"}))
      ->group("");
}

// The cpu backend has no use for the cuda backend's options (--world, --transport, -g, ...): one
// given with --backend cpu is refused rather than ignored.
void refuse_cuda_options(const CLI::App& app) {
  std::vector<std::string> given;
  for (const CLI::Option* option : app.get_options())
    if (option->get_group() == kCudaGroup && option->count() > 0) given.push_back(option->get_name());
  if (given.empty()) return;
  std::string list;
  for (size_t i = 0; i < given.size(); ++i) list += (i == 0 ? "" : i + 1 == given.size() ? " and " : ", ") + given[i];
  throw UsageError(list + (given.size() == 1 ? " applies" : " apply") +
                   " to --backend cuda only: the cpu backend runs one rank per MPI process (mpirun -np P) and has "
                   "no use for " +
                   (given.size() == 1 ? "it" : "them"));
}

}  // namespace

BenchOptions parse_bench_cli(int argc, char** argv, CLI::App& app) {
  BenchOptions o;
  Names names;
  add_options(app, o, names);
  app.parse(argc, argv);
  try {
    o.ops = names.op == "all" ? all_ops() : std::vector<Op>{parse_op(names.op)};
  } catch (const UsageError& e) {
    throw UsageError(std::string("--op: ") + e.what() + " or all");
  }
  try {
    const AlgoEntries entries = parse_algo_entries(names.algo);
    o.algos = entries.algos;
    o.configs = entries.configs;
    o.algo_auto = entries.automatic;
  } catch (const UsageError& e) {
    throw UsageError(std::string("--algo: ") + e.what());
  }
  for (const ListedConfig& c : o.configs)
    if (!c.deprecation.empty()) std::cerr << "collmm-bench: --algo " << c.deprecation << "\n";
  if (const std::string old = stages_as_waves(o.plan, app.count("--waves") > 0, o.ops, o.algos); !old.empty())
    std::cerr << "collmm-bench: " << old << "\n";
  auto named = [](const char* option, auto parse, const std::string& name) {
    try {
      return parse(name);
    } catch (const UsageError& e) {
      throw UsageError(std::string(option) + ": " + e.what());
    }
  };
  o.dtype = named("--dtype", parse_dtype, names.dtype);
  o.plan.post = named("--post", parse_post, names.post);
  o.plan.piece_sizes = named("--piece-sizes", parse_piece_sizes, names.piece_sizes);
  o.b_layout = named("--b-layout", parse_b_layout, names.b_layout);
  o.auto_measure.measure = named("--auto-measure", parse_auto_measure, names.auto_measure);
  o.backend.backend = named("--backend", parse_backend, names.backend);
  o.backend.transport = named("--transport", parse_cuda_transport, names.transport);
  o.backend.link_copy = named("--link-copy", parse_link_copy, names.link_copy);
  if (o.backend.backend == Backend::cpu) refuse_cuda_options(app);
  if (o.debug_phase == "init") {  // the backend's own hooks
    o.backend.debug_fail_rank = o.debug_die_rank;
    o.backend.debug_hang_rank = o.debug_hang_rank;
  }
  for (const char* point : {"mpi_init", "sendrecv", "probe", "write", "rename", "mpi_finalize"})
    if (o.debug_phase == point) arm_fault_point(point, o.debug_die_rank, o.debug_hang_rank);
  return o;
}

}  // namespace collmm
