// ops.cpp: the dispatcher ops torch.ops.collmm.fused_all_gather_matmul,
// torch.ops.collmm.fused_matmul_reduce_scatter (the arguments of torch.ops.symm_mem's fused ops, plus `algo` and
// the sizes one rank cannot know) and torch.ops.collmm.fused_matmul_all_reduce, and their CPU and CUDA kernels.
// `algo` is "auto" or an entry of the command lines' --algo: "ring", "ring:pieces4h" (algo_entries.hpp).
// Every op call walks one skeleton (run_call, op_call.hpp): every rank checks its own tensors, the ranks
// agree on the problem (python/csrc/call_memo.hpp, collmm/agreement.hpp: one exchange of the same size for
// every op, the op's name among what they agree on), then collmm's plan runs on the caller's tensors
// through the session's executor. A user error raises ValueError("collmm: ...") on every rank before
// any data moves.
//
//   fused_all_gather_matmul(A_shard [..., K], Bs [[K, N_r], ...], gather_dim, group_name,
//                           return_A, algo, gathered_size)
//     A  = cat over ranks q of A_shard_q along gather_dim   (any sizes along it: each rank's own)
//     returns (A if return_A else None, [A @ B for B in Bs])
//   fused_matmul_reduce_scatter(A [..., K_r], B [K_r, N], reduce_op, scatter_dim, group_name, algo,
//                               scatter_size)
//     S  = sum over ranks q of A_q @ B_q                    (reduce_op "avg": divided by P)
//     returns rank r's block of S along scatter_dim: scatter_size rows of it (each rank's own), by
//     default block_size(A.size(scatter_dim), P, r) (collmm/types.hpp)
//   fused_matmul_all_reduce(A [..., K_r], B [K_r, N], reduce_op, group_name, algo)
//     returns S = sum over ranks q of A_q @ B_q [..., N] on every rank (reduce_op "avg": divided by P)
//
// The dimension gathered or scattered goes first (in place when A is contiguous and it is dim 0 or
// every dim before it has size 1, else one copy of A); the dims between it and the last are
// flattened into the GEMM's rows, and the rows of every rank as they come are collmm's split (the
// plan as it is) or run padded (row_split.hpp); so do the columns of Bs[0] (each rank's N_r) and of
// A (K_r). B is read in place as [K, N] row-major (layout kn) or as the transposed view of an
// nn.Linear weight stored [N, K] (w.t(), layout nk); a B of one row or column fits both, and the
// ranks take the layout any of them needs.
#include <algorithm>
#include <optional>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "collmm/agreement.hpp"
#include "collmm/algorithms.hpp"
#include "collmm/sizes.hpp"
#include "nccl_comm.hpp"
#include "op_args.hpp"
#include "op_call.hpp"
#include "row_split.hpp"
#include "session.hpp"
#include "torch_util.hpp"
#include "trace.hpp"

namespace collmm::torch_ext {
namespace {

int gathered_buffer(const Plan& plan) {
  if (const int g = find_buffer(plan, Role::gathered); g >= 0) return g;
  throw std::runtime_error("collmm: the " + to_string(plan.options.algo) + " plan keeps no gathered A");
}

}  // namespace

// fused_all_gather_matmul. Numbers sent: A_shard's size along gather_dim, Bs[0]'s N_r, its layout.
struct AgCall : CallBase {
  static constexpr Op op = Op::ag_gemm;
  static constexpr const char* name = "fused_all_gather_matmul";
  AgCall(const at::Tensor& a_shard, at::TensorList bs, int64_t gather_dim, bool return_a,
         std::optional<int64_t> gathered_size)
      : a_shard(a_shard), bs(bs), gather_dim(gather_dim), return_a(return_a), gathered_size(gathered_size) {}
  const at::Tensor& a_shard;
  at::TensorList bs;
  int64_t gather_dim;
  bool return_a;
  std::optional<int64_t> gathered_size;

  int64_t dim = 0, k = 0;
  at::Tensor a;  // A_shard, the gathered dim first
  at::IntArrayRef inner;
  std::optional<RowSplit> split, cols;  // every rank's rows (M) and N_r
  BLayout layout = BLayout::kn;
  bool keep_gathered = false;
  at::Tensor gathered, c, a_plan, b_plan;  // bound tensors must outlive the run
  std::vector<at::Tensor> bound() const { return {a_plan, b_plan, c, gathered}; }

  void key(CallKey& key) const {
    key.insert(key.end(), {gather_dim, return_a, gathered_size.has_value(), gathered_size.value_or(0)});
    add_to_key(key, a_shard);
    for (const at::Tensor& b : bs) add_to_key(key, b);
  }
  std::string inspect(bool check) {
    k = a_shard.dim() ? a_shard.size(-1) : 0;
    std::string misfit;
    if (check) {
      misfit = check_a(a_shard, "A_shard", gather_dim, "gather_dim", false);
      if (misfit.empty() && bs.empty()) misfit = "Bs is empty";
      for (size_t i = 0; misfit.empty() && i < bs.size(); ++i)
        misfit = check_b(bs[i], a_shard, "Bs[" + std::to_string(i) + "]", k);
    }
    if (!misfit.empty()) return misfit;
    dim = leading_dim(gather_dim, a_shard.dim());
    a = a_shard.movedim(dim, 0).contiguous();
    dtype = *dtype_of(a.scalar_type());
    inner = a.sizes().slice(1, a.dim() - 2);
    ready = true;
    return {};
  }
  Keys keys() const {
    return {{"K (A_shard's last dim)", std::to_string(k)},
            {"gather_dim", std::to_string(dim)},
            {"A_shard's dims between gather_dim and K", dims(inner)},
            {"number of Bs", std::to_string(bs.size())},
            {"return_A", return_a ? "True" : "False"},
            {"gathered_size", optional_int(gathered_size)}};
  }
  std::vector<double> mine() const {
    if (!ready) return {0, 0, static_cast<double>(either)};
    return {static_cast<double>(a.size(0)), static_cast<double>(bs[0].size(1)),
            static_cast<double>(*layout_fit(bs[0]))};
  }
  Problem problem(const Agreed& all) {
    const RankSizes agreed = rank_sizes(all, c10::multiply_integers(inner));
    if (gathered_size && *gathered_size != agreed.total)
      throw UsageError("gathered_size is " + std::to_string(*gathered_size) + ", but the ranks' A_shard sizes along " +
                       "gather_dim (" + agreed.text() + ") add up to " + std::to_string(agreed.total) +
                       " (under torch.compile, collmm.fused_all_gather_matmul and collmm's styles take it as P times "
                       "this rank's size unless given: pass gathered_size, or a DTensor input with its global shape)");
    split.emplace(agreed.rows);
    cols.emplace(rank_counts(all, 1));  // each rank's N_r: any split of N
    layout = agreed_layout(all, 2, "Bs[0]");
    rows = split->total;
    return {.op = op, .m = split->plan_rows(), .n = cols->plan_rows(), .k = k, .world = world, .b_layout = layout};
  }
  void bind(Prepared& prepared) {
    Executor& ex = *prepared.executor;
    // The gathered A goes to a new tensor when the caller gets it or more GEMMs read it; else it
    // stays in the executor's scratch, allocated once per plan.
    keep_gathered = return_a || bs.size() > 1;
    const int64_t n_r = bs[0].size(1);
    if (keep_gathered) gathered = at::empty({split->plan_rows(), k}, a.options());
    c = at::empty({split->plan_rows(), cols->collmm_split ? n_r : cols->most}, out_options(a, ex, dtype));
    const at::Tensor a_rows = a.view({split->rows[static_cast<size_t>(rank)], k});
    a_plan = split->collmm_split ? a_rows : padded_rows(a_rows, split->most);
    b_plan = cols->collmm_split ? bs[0] : zero_padded_b(bs[0], 1, cols->most, layout);
    bind_buffer(ex, kBufA, a_plan);
    bind_buffer(ex, kBufB, b_plan);
    bind_buffer(ex, kBufC, c);
    if (keep_gathered)
      bind_buffer(ex, gathered_buffer(prepared.plan), gathered);
    else
      ex.bind(0, gathered_buffer(prepared.plan), nullptr, 0);
  }
  std::tuple<std::optional<at::Tensor>, std::vector<at::Tensor>> result() const {
    const int64_t n_r = bs[0].size(1);
    const at::Tensor a_all = keep_gathered ? split->compact(gathered) : at::Tensor();
    const at::Tensor c_all = cols->collmm_split ? split->compact(c) : split->compact(c.narrow(1, 0, n_r)).contiguous();
    std::vector<at::Tensor> outs{
        shaped(c_all.scalar_type() == a.scalar_type() ? c_all : c_all.to(a.scalar_type()), inner, dim)};
    for (size_t i = 1; i < bs.size(); ++i) outs.push_back(shaped(at::matmul(a_all, bs[i]), inner, dim));
    return {return_a ? std::optional<at::Tensor>(shaped(a_all, inner, dim)) : std::nullopt, outs};
  }
};

// What gemm_rs and gemm_ar share: A [..., K_r] and B [K_r, N], each rank's K_r its own, summed over
// the ranks.
struct SumCall : CallBase {
  SumCall(const at::Tensor& a_in, const at::Tensor& b, std::string reduce_op)
      : a_in(a_in), b(b), reduce_op(std::move(reduce_op)) {}
  const at::Tensor& a_in;
  const at::Tensor& b;
  std::string reduce_op;

  int64_t k_r = 0, n = 0;
  at::Tensor c, a_plan, b_plan;  // bound tensors must outlive the run
  std::vector<at::Tensor> bound() const { return {a_plan, b_plan, c}; }
  std::optional<RowSplit> k_split;
  BLayout layout = BLayout::kn;

  std::string check(int64_t dim, const char* dim_name) const {
    std::string misfit = check_a(a_in, "A", dim, dim_name, true);
    if (misfit.empty()) misfit = check_b(b, a_in, "B", a_in.size(-1));
    if (misfit.empty()) misfit = check_reduce_op(reduce_op);
    return misfit;
  }
  // Every rank's K_r: any split of K. One that is not collmm's, or leaves a rank none, runs padded.
  int64_t agreed_k(const Agreed& all) {
    const std::vector<int64_t> k_parts = rank_counts(all, 1);
    k_split.emplace(k_parts);
    k_split->collmm_split = k_split->collmm_split && *std::min_element(k_parts.begin(), k_parts.end()) > 0;
    layout = agreed_layout(all, 2, "B");
    return k_split->plan_rows();
  }
  // A's rows `a_rows` [plan M, K_r] and B bound as the plan reads them (K padded where it runs padded), and C.
  void bind_ab(Executor& ex, const at::Tensor& a_rows, at::IntArrayRef c_sizes) {
    a_plan = zero_padded(a_rows, 1, k_split->collmm_split ? k_r : k_split->most);
    b_plan = k_split->collmm_split ? b : zero_padded_b(b, 0, k_split->most, layout);
    c = at::empty(c_sizes, out_options(a_in, ex, dtype));
    bind_buffer(ex, kBufA, a_plan);
    bind_buffer(ex, kBufB, b_plan);
    bind_buffer(ex, kBufC, c);
  }
  // `t` as the caller gets it: divided by P for avg, in A's dtype.
  at::Tensor reduced(at::Tensor t) const {
    if (reduce_op == "avg") t.div_(world);
    return t.scalar_type() == a_in.scalar_type() ? t : t.to(a_in.scalar_type());
  }
  // The three numbers this rank sends (as every op: the exchange has one size for every op, so ranks
  // calling different ops meet in it): the op's `first`, K_r, B's layout.
  std::vector<double> numbers(int64_t first) const {
    return {static_cast<double>(first), static_cast<double>(k_r), static_cast<double>(ready ? *layout_fit(b) : either)};
  }
};

// fused_matmul_reduce_scatter. Numbers sent: this rank's rows of the result, K_r, B's layout.
struct RsCall : SumCall {
  static constexpr Op op = Op::gemm_rs;
  static constexpr const char* name = "fused_matmul_reduce_scatter";
  RsCall(const at::Tensor& a, const at::Tensor& b, std::string reduce_op, int64_t scatter_dim,
         std::optional<int64_t> scatter_size)
      : SumCall(a, b, std::move(reduce_op)), scatter_dim(scatter_dim), scatter_size(scatter_size) {}
  int64_t scatter_dim;
  std::optional<int64_t> scatter_size;

  int64_t dim = 0, slices = 0, mine_rows = 0;
  at::Tensor a;  // A, the scattered dim first
  at::IntArrayRef inner;
  std::optional<RowSplit> split;

  void key(CallKey& key) const {
    key.insert(key.end(), {scatter_dim, scatter_size.has_value(), scatter_size.value_or(0)});
    add_to_key(key, reduce_op);
    add_to_key(key, a_in);
    add_to_key(key, b);
  }
  std::string inspect(bool check_args) {
    if (check_args)
      if (std::string misfit = check(scatter_dim, "scatter_dim"); !misfit.empty()) return misfit;
    dim = leading_dim(scatter_dim, a_in.dim());
    a = a_in.movedim(dim, 0).contiguous();
    slices = a.size(0);
    mine_rows = scatter_size ? *scatter_size : block_size(slices, world, rank);
    k_r = a.size(-1);
    n = b.size(1);
    inner = a.sizes().slice(1, a.dim() - 2);
    dtype = *dtype_of(a.scalar_type());
    ready = true;
    if (check_args && (mine_rows < 0 || mine_rows > slices))  // (a memo is of a call that passed it)
      return "scatter_size is " + std::to_string(mine_rows) + "; A has " + std::to_string(slices) +
             " along scatter_dim";
    return {};
  }
  Keys keys() const {
    return {{"scatter_dim", std::to_string(dim)},
            {"A's size along scatter_dim", std::to_string(slices)},
            {"A's dims between scatter_dim and K", dims(inner)},
            {"N (B's columns)", std::to_string(n)},
            {"reduce_op", reduce_op}};
  }
  std::vector<double> mine() const { return numbers(mine_rows); }
  Problem problem(const Agreed& all) {
    const RankSizes agreed = rank_sizes(all, c10::multiply_integers(inner));
    if (agreed.total != slices)
      throw UsageError("scatter_size over the ranks is " + agreed.text() + ": adds up to " +
                       std::to_string(agreed.total) + ", not A's " + std::to_string(slices) + " along scatter_dim");
    const int64_t k = agreed_k(all);
    split.emplace(agreed.rows);
    rows = split->total;
    return {.op = op, .m = split->plan_rows(), .n = n, .k = k, .world = world, .b_layout = layout};
  }
  void bind(Prepared& prepared) {
    const int64_t rest = c10::multiply_integers(inner);
    bind_ab(*prepared.executor, split->spread(a.view({slices * rest, k_r})),
            {block_size(split->plan_rows(), world, rank), n});
  }
  at::Tensor result() const {
    return shaped(reduced(c.narrow(0, 0, split->rows[static_cast<size_t>(rank)])), inner, dim);
  }
};

// fused_matmul_all_reduce. Numbers sent: M, K_r, B's layout. M is A's dims before K, on every rank;
// fewer rows than ranks (a plan gives each rank a block of C's rows to reduce) run as P rows, the
// rest zeros.
struct ArCall : SumCall {
  static constexpr Op op = Op::gemm_ar;
  static constexpr const char* name = "fused_matmul_all_reduce";
  using SumCall::SumCall;

  at::Tensor a;  // A contiguous
  at::IntArrayRef leading;
  int64_t plan_m = 0;

  void key(CallKey& key) const {
    add_to_key(key, reduce_op);
    add_to_key(key, a_in);
    add_to_key(key, b);
  }
  std::string inspect(bool check_args) {
    if (check_args)
      if (std::string misfit = check(0, nullptr); !misfit.empty()) return misfit;
    a = a_in.contiguous();
    leading = a.sizes().slice(0, a.dim() - 1);
    rows = c10::multiply_integers(leading);
    plan_m = std::max<int64_t>(rows, world);
    k_r = a.size(-1);
    n = b.size(1);
    dtype = *dtype_of(a.scalar_type());
    ready = true;
    return {};
  }
  Keys keys() const {
    return {{"M (A's dims before K)", dims(leading)}, {"N (B's columns)", std::to_string(n)}, {"reduce_op", reduce_op}};
  }
  std::vector<double> mine() const { return numbers(rows); }
  Problem problem(const Agreed& all) {
    const int64_t k = agreed_k(all);
    return {.op = op, .m = plan_m, .n = n, .k = k, .world = world, .b_layout = layout};
  }
  void bind(Prepared& prepared) { bind_ab(*prepared.executor, padded_rows(a.view({rows, k_r}), plan_m), {plan_m, n}); }
  at::Tensor result() const {
    std::vector<int64_t> sizes = leading.vec();
    sizes.push_back(n);
    return reduced(c.narrow(0, 0, rows)).view(sizes);
  }
};

std::tuple<std::optional<at::Tensor>, std::vector<at::Tensor>> all_gather_matmul(const at::Tensor& a_shard,
                                                                                 at::TensorList bs, int64_t gather_dim,
                                                                                 c10::string_view group_name,
                                                                                 bool return_a, c10::string_view algo,
                                                                                 std::optional<int64_t> gathered_size) {
  AgCall call(a_shard, bs, gather_dim, return_a, gathered_size);
  return run_call(call, group_name, a_shard.device(), algo);
}

at::Tensor matmul_reduce_scatter(const at::Tensor& a, const at::Tensor& b, c10::string_view reduce_op,
                                 int64_t scatter_dim, c10::string_view group_name, c10::string_view algo,
                                 std::optional<int64_t> scatter_size) {
  RsCall call(a, b, std::string(reduce_op), scatter_dim, scatter_size);
  return run_call(call, group_name, a.device(), algo);
}

at::Tensor matmul_all_reduce(const at::Tensor& a, const at::Tensor& b, c10::string_view reduce_op,
                             c10::string_view group_name, c10::string_view algo) {
  ArCall call(a, b, std::string(reduce_op));
  return run_call(call, group_name, a.device(), algo);
}

}  // namespace collmm::torch_ext

TORCH_LIBRARY(collmm, m) {
  m.def(
      "fused_all_gather_matmul(Tensor A_shard, Tensor[] Bs, int gather_dim, str group_name, *, "
      "bool return_A=True, str algo=\"auto\", int? gathered_size=None) -> (Tensor?, Tensor[])");
  m.def(
      "fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim, str group_name, *, "
      "str algo=\"auto\", int? scatter_size=None) -> Tensor");
  m.def("fused_matmul_all_reduce(Tensor A, Tensor B, str reduce_op, str group_name, *, str algo=\"auto\") -> Tensor");
  // The algorithms' names, from collmm's table (collmm/algorithms.hpp): collmm.ALGOS reads them.
  m.def("algorithms() -> str[]", [] {
    std::vector<std::string> names;
    for (const collmm::AlgoRow& row : collmm::algorithm_table()) names.push_back(row.name);
    return names;
  });
  // What is wrong with an `algo` string as the ops take it ("": nothing), for `op` ("ag_gemm",
  // "gemm_rs", "gemm_ar") or whatever the op: the styles and layers check theirs when made
  // (collmm.parallel's checked_algo).
  m.def("algo_misfit(str algo, str? op=None) -> str", [](c10::string_view algo, std::optional<c10::string_view> op) {
    return collmm::torch_ext::check_algo(
        std::string(algo), op ? std::optional<collmm::Op>(collmm::parse_op(std::string(*op))) : std::nullopt);
  });
  // Which executor the ops use for CPU tensors in groups first used after this call: "aten" (the
  // default: ATen GEMMs on the calling thread, the group's comm asynchronous: the executor of CUDA
  // tensors) or "host" (OpenBLAS GEMMs on lane threads beside the group's comm).
  m.def("set_cpu_executor(str kind) -> ()", [](c10::string_view kind) {
    collmm::torch_ext::user_errors_as_value_errors([&] { collmm::torch_ext::set_cpu_executor(std::string(kind)); });
  });
  // How groups first used after this call agree: "auto", "store" (the group's c10d Store, host
  // only) or "group" (its collectives). See session.hpp.
  m.def("set_channel(str channel) -> ()", [](c10::string_view channel) {
    collmm::torch_ext::user_errors_as_value_errors([&] { collmm::torch_ext::set_channel(std::string(channel)); });
  });
  // "every" (every call agrees) or "first" (a call agreed before is trusted).
  m.def("set_check(str check) -> ()", [](c10::string_view check) {
    collmm::torch_ext::user_errors_as_value_errors([&] { collmm::torch_ext::set_check(std::string(check)); });
  });
  // collmm.trace: record the steps of every call from now on; stop and write PATH.json, PATH-*.svg
  // and PATH.txt (where `write`), returning the table.
  m.def("trace_start() -> ()", [] { collmm::torch_ext::trace_start(); });
  // The module whose forward runs now, for the trace's labels (collmm.trace's module hooks).
  m.def("trace_module(str name) -> ()",
        [](c10::string_view name) { collmm::torch_ext::set_trace_module(std::string(name)); });
  m.def("trace_stop(str path, bool write) -> str", [](c10::string_view path, bool write) {
    return collmm::torch_ext::user_errors_as_value_errors(
        [&] { return collmm::torch_ext::trace_stop(std::string(path), write); });
  });
  // How CUDA runs move data: "auto" (the group's NCCL communicator called directly where it can be
  // reached, nccl_comm.hpp) or "c10d"; how the last run moved it ("nccl", "c10d", "nccl+c10d" or "none") and its
  // plan's options ("algo=ring ...": what auto picked).
  m.def("set_comm(str path) -> ()", [](c10::string_view path) {
    collmm::torch_ext::user_errors_as_value_errors([&] { collmm::torch_ext::set_comm(std::string(path)); });
  });
  m.def("last_comm() -> str", [] { return collmm::torch_ext::last_comm_path(); });
  m.def("last_plan() -> str", [] { return collmm::torch_ext::last_plan_options(); });
  m.def("last_auto() -> str", [] { return collmm::torch_ext::last_auto_report(); });
  // The bound of the ops' waits for other ranks and of the host executor's run watchdog (0: defaults).
  m.def("set_timeout(float seconds) -> ()", [](double seconds) {
    collmm::torch_ext::user_errors_as_value_errors([&] { collmm::torch_ext::set_timeout(seconds); });
  });
}

TORCH_LIBRARY_IMPL(collmm, CPU, m) {
  m.impl("fused_all_gather_matmul", &collmm::torch_ext::all_gather_matmul);
  m.impl("fused_matmul_reduce_scatter", &collmm::torch_ext::matmul_reduce_scatter);
  m.impl("fused_matmul_all_reduce", &collmm::torch_ext::matmul_all_reduce);
}

TORCH_LIBRARY_IMPL(collmm, CUDA, m) {
  m.impl("fused_all_gather_matmul", &collmm::torch_ext::all_gather_matmul);
  m.impl("fused_matmul_reduce_scatter", &collmm::torch_ext::matmul_reduce_scatter);
  m.impl("fused_matmul_all_reduce", &collmm::torch_ext::matmul_all_reduce);
}
