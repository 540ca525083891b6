// ops.cpp: the dispatcher ops torch.ops.collmm.fused_all_gather_matmul and
// torch.ops.collmm.fused_matmul_reduce_scatter (the arguments of torch.ops.symm_mem's fused ops,
// plus `algo`, `pieces` and `piece_sizes` (a named ring or bidir's edge in pieces) and the sizes one rank cannot
// know) and their CPU and CUDA kernels: every rank checks its own tensors, the ranks agree on the problem
// (python/csrc/session.hpp, collmm/agreement.hpp: one exchange of the same size for both ops, the op's name among what
// they agree on), then collmm's plan runs on the caller's tensors through the session's executor. A user error raises
// ValueError("collmm: ...") on every rank before any data moves.
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
#include "row_split.hpp"
#include "session.hpp"
#include "torch_util.hpp"
#include "trace.hpp"

namespace collmm::torch_ext {
namespace {

// A tensor's part of a CallKey: device, dtype, dims, sizes and strides.
void add_to_key(CallKey& key, const at::Tensor& t) {
  key.push_back(static_cast<int64_t>(t.device().type()));
  key.push_back(t.device().index());
  key.push_back(static_cast<int64_t>(t.scalar_type()));
  key.push_back(t.dim());
  key.insert(key.end(), t.sizes().begin(), t.sizes().end());
  key.insert(key.end(), t.strides().begin(), t.strides().end());
}
void add_to_key(CallKey& key, std::string_view text) {
  key.push_back(static_cast<int64_t>(text.size()));
  key.insert(key.end(), text.begin(), text.end());
}

void bind(Executor& ex, int buffer, const at::Tensor& t) {
  ex.bind(0, buffer, t.numel() ? t.data_ptr() : nullptr, static_cast<size_t>(t.numel() * t.element_size()));
}

int gathered_buffer(const Plan& plan) {
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].role == Role::gathered) return static_cast<int>(i);
  throw std::runtime_error("collmm: the " + to_string(plan.options.algo) + " plan keeps no gathered A");
}

}  // namespace

// Runs `fn`; a UsageError becomes ValueError("collmm: ...") in Python.
template <class F>
auto user_errors_as_value_errors(F fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const UsageError& e) {
    TORCH_CHECK_VALUE(false, "collmm: ", e.what());
  }
}

// `t` [rows, cols] as [rows / prod(inner), inner..., cols] with its first dim moved to `dim`.
at::Tensor shaped(const at::Tensor& t, at::IntArrayRef inner, int64_t dim) {
  if (inner.empty() && dim == 0) return t;
  std::vector<int64_t> sizes{t.size(0) / std::max<int64_t>(1, c10::multiply_integers(inner))};
  sizes.insert(sizes.end(), inner.begin(), inner.end());
  sizes.push_back(t.size(1));
  return t.view(sizes).movedim(0, dim);
}

std::tuple<std::optional<at::Tensor>, std::vector<at::Tensor>> all_gather_matmul(
    const at::Tensor& a_shard, at::TensorList bs, int64_t gather_dim, c10::string_view group_name, bool return_a,
    c10::string_view algo_view, std::optional<int64_t> gathered_size, int64_t pieces,
    c10::string_view piece_sizes_view) {
  return user_errors_as_value_errors([&]() -> std::tuple<std::optional<at::Tensor>, std::vector<at::Tensor>> {
    const std::string algo(algo_view), piece_sizes(piece_sizes_view);
    SessionLock s = session_for(std::string(group_name), a_shard.device());
    CallKey key{0, gather_dim, return_a, gathered_size.has_value(), gathered_size.value_or(0), pieces};
    add_to_key(key, algo);
    add_to_key(key, piece_sizes);
    add_to_key(key, a_shard);
    for (const at::Tensor& b : bs) add_to_key(key, b);
    // A call like this one ran: nothing to check or plan (with check "every": one exchange).
    std::optional<Agreed> exchanged;
    const CallMemo* memo = s.session.recall(key, exchanged);
    const int64_t k = a_shard.dim() ? a_shard.size(-1) : 0;
    std::string misfit;
    if (!memo) {
      misfit = check_a(a_shard, "A_shard", gather_dim, "gather_dim", false);
      if (misfit.empty() && bs.empty()) misfit = "Bs is empty";
      for (size_t i = 0; misfit.empty() && i < bs.size(); ++i)
        misfit = check_b(bs[i], a_shard, "Bs[" + std::to_string(i) + "]", k);
      if (misfit.empty()) misfit = check_algo(algo, pieces, piece_sizes);
    }
    TORCH_INTERNAL_ASSERT(!exchanged || misfit.empty(), "collmm: a recalled call failed its checks: ", misfit);
    const bool ok = misfit.empty();
    const int64_t dim = ok ? leading_dim(gather_dim, a_shard.dim()) : 0;
    const at::Tensor a = ok ? a_shard.movedim(dim, 0).contiguous() : a_shard;  // the gathered dim first
    const Dtype dtype = ok ? *dtype_of(a.scalar_type()) : Dtype::f32;
    const int64_t slices = ok ? a.size(0) : 0, n_r = ok ? bs[0].size(1) : 0;
    const at::IntArrayRef inner = ok ? a.sizes().slice(1, a.dim() - 2) : at::IntArrayRef();
    // One exchange: any rank's error, the keys every rank must share, each rank's sizes.
    const auto all = memo        ? memo->all
                     : exchanged ? *exchanged
                                 : agree_and_gather(Agreement{s.session, "fused_all_gather_matmul"}, misfit,
                                                    {{"op", "fused_all_gather_matmul"},
                                                     {"device type", a.device().is_cpu() ? "cpu" : "cuda"},
                                                     {"K (A_shard's last dim)", std::to_string(k)},
                                                     {"gather_dim", std::to_string(dim)},
                                                     {"A_shard's dims between gather_dim and K", dims(inner)},
                                                     {"dtype", to_string(dtype)},
                                                     {"number of Bs", std::to_string(bs.size())},
                                                     {"algo", algo},
                                                     {"pieces", std::to_string(pieces)},
                                                     {"piece_sizes", piece_sizes},
                                                     {"return_A", return_a ? "True" : "False"},
                                                     {"gathered_size", optional_int(gathered_size)}},
                                                    {static_cast<double>(slices), static_cast<double>(n_r),
                                                     static_cast<double>(ok ? *layout_fit(bs[0]) : either)});
    const int64_t rest = c10::multiply_integers(inner);
    const RankSizes agreed = rank_sizes(all, rest);
    const std::vector<int64_t>& rows = agreed.rows;
    const int64_t total = agreed.total;
    if (gathered_size && *gathered_size != total)
      throw UsageError("gathered_size is " + std::to_string(*gathered_size) + ", but the ranks' A_shard sizes along " +
                       "gather_dim (" + agreed.text() + ") add up to " + std::to_string(total) +
                       " (under torch.compile, collmm.fused_all_gather_matmul and collmm's styles take it as P times "
                       "this rank's size unless given: pass gathered_size, or a DTensor input with its global shape)");
    const RowSplit split(rows);
    const RowSplit cols(rank_counts(all, 1));  // each rank's N_r: any split of N
    const int64_t n = cols.plan_rows();
    const BLayout layout = agreed_layout(all, 2, "Bs[0]");
    const Problem problem{
        .op = Op::ag_gemm, .m = split.plan_rows(), .n = n, .k = k, .world = s.session.world(), .b_layout = layout};
    Prepared& prepared =
        memo ? *memo->prepared
             : s.session.prepare(problem, s.session.options(problem, dtype, algo, pieces, piece_sizes), dtype);
    if (!memo) s.session.remember(key, all, prepared);
    const Plan& plan = prepared.plan;
    Executor& ex = *prepared.executor;
    // The gathered A goes to a new tensor when the caller gets it or more GEMMs read it; else it
    // stays in the executor's scratch, allocated once per plan.
    const bool keep_gathered = return_a || bs.size() > 1;
    const at::Tensor gathered = keep_gathered ? at::empty({split.plan_rows(), k}, a.options()) : at::Tensor();
    const at::Tensor c = at::empty({split.plan_rows(), cols.collmm_split ? n_r : cols.most},
                                   a.options().dtype(scalar_type(ex.out_dtype(dtype))));
    const int r = s.session.rank();
    // Bound tensors must outlive the run: the padded copy is held here.
    const at::Tensor a_rows = a.view({rows[static_cast<size_t>(r)], k});
    const at::Tensor a_plan = split.collmm_split ? a_rows : padded_rows(a_rows, split.most);
    bind(ex, kBufA, a_plan);
    const at::Tensor b_plan = cols.collmm_split ? bs[0] : zero_padded_b(bs[0], 1, cols.most, layout);
    bind(ex, kBufB, b_plan);
    bind(ex, kBufC, c);
    if (keep_gathered)
      bind(ex, gathered_buffer(plan), gathered);
    else
      ex.bind(0, gathered_buffer(plan), nullptr, 0);
    s.session.run(prepared, dtype, split.total, {a_plan, b_plan, c, gathered});

    const at::Tensor a_all = keep_gathered ? split.compact(gathered) : at::Tensor();
    const at::Tensor c_all = cols.collmm_split ? split.compact(c) : split.compact(c.narrow(1, 0, n_r)).contiguous();
    std::vector<at::Tensor> outs{
        shaped(c_all.scalar_type() == a.scalar_type() ? c_all : c_all.to(a.scalar_type()), inner, dim)};
    for (size_t i = 1; i < bs.size(); ++i) outs.push_back(shaped(at::matmul(a_all, bs[i]), inner, dim));
    return {return_a ? std::optional<at::Tensor>(shaped(a_all, inner, dim)) : std::nullopt, outs};
  });
}

at::Tensor matmul_reduce_scatter(const at::Tensor& a_in, const at::Tensor& b, c10::string_view reduce_op_view,
                                 int64_t scatter_dim, c10::string_view group_name, c10::string_view algo_view,
                                 std::optional<int64_t> scatter_size, int64_t pieces,
                                 c10::string_view piece_sizes_view) {
  return user_errors_as_value_errors([&]() -> at::Tensor {
    const std::string algo(algo_view), reduce_op(reduce_op_view), piece_sizes(piece_sizes_view);
    SessionLock s = session_for(std::string(group_name), a_in.device());
    const int p = s.session.world(), r = s.session.rank();
    CallKey key{1, scatter_dim, scatter_size.has_value(), scatter_size.value_or(0), pieces};
    add_to_key(key, algo);
    add_to_key(key, piece_sizes);
    add_to_key(key, reduce_op);
    add_to_key(key, a_in);
    add_to_key(key, b);
    // A call like this one ran: nothing to check or plan (with check "every": one exchange).
    std::optional<Agreed> exchanged;
    const CallMemo* memo = s.session.recall(key, exchanged);
    std::string misfit;
    const int64_t k_r = a_in.dim() ? a_in.size(-1) : 0;
    if (!memo) {
      misfit = check_a(a_in, "A", scatter_dim, "scatter_dim", true);
      if (misfit.empty()) misfit = check_b(b, a_in, "B", k_r);
      if (misfit.empty() && reduce_op != "sum" && reduce_op != "avg")
        misfit = "reduce_op must be sum or avg (got " + reduce_op + ")";
      if (misfit.empty()) misfit = check_algo(algo, pieces, piece_sizes);
    }
    const bool ok = misfit.empty();
    const int64_t dim = ok ? leading_dim(scatter_dim, a_in.dim()) : 0;
    const at::Tensor a = ok ? a_in.movedim(dim, 0).contiguous() : a_in;  // the scattered dim first
    const int64_t slices = ok ? a.size(0) : 0;
    const int64_t mine = scatter_size ? *scatter_size : block_size(slices, p, r);
    if (!memo && ok && (mine < 0 || mine > slices))  // (a memo is of a call that passed it, of the same key)
      misfit = "scatter_size is " + std::to_string(mine) + "; A has " + std::to_string(slices) + " along scatter_dim";
    // The exchange recall() made sent what a call of this key sent, which passed every check.
    TORCH_INTERNAL_ASSERT(!exchanged || misfit.empty(), "collmm: a recalled call failed its checks: ", misfit);
    const Dtype dtype = misfit.empty() ? *dtype_of(a.scalar_type()) : Dtype::f32;
    const int64_t n = ok ? b.size(1) : 0;
    const at::IntArrayRef inner = ok ? a.sizes().slice(1, a.dim() - 2) : at::IntArrayRef();
    const auto all = memo        ? memo->all
                     : exchanged ? *exchanged
                                 : agree_and_gather(Agreement{s.session, "fused_matmul_reduce_scatter"}, misfit,
                                                    {{"op", "fused_matmul_reduce_scatter"},
                                                     {"device type", a.device().is_cpu() ? "cpu" : "cuda"},
                                                     {"scatter_dim", std::to_string(dim)},
                                                     {"A's size along scatter_dim", std::to_string(slices)},
                                                     {"A's dims between scatter_dim and K", dims(inner)},
                                                     {"N (B's columns)", std::to_string(n)},
                                                     {"dtype", to_string(dtype)},
                                                     {"reduce_op", reduce_op},
                                                     {"algo", algo},
                                                     {"pieces", std::to_string(pieces)},
                                                     {"piece_sizes", piece_sizes}},
                                                    {static_cast<double>(mine), static_cast<double>(k_r),
                                                     static_cast<double>(misfit.empty() ? *layout_fit(b) : either)});
    const int64_t rest = c10::multiply_integers(inner);
    const RankSizes agreed = rank_sizes(all, rest);
    const std::vector<int64_t>& rows = agreed.rows;
    const int64_t total = agreed.total;
    if (total != slices)
      throw UsageError("scatter_size over the ranks is " + agreed.text() + ": adds up to " + std::to_string(total) +
                       ", not A's " + std::to_string(slices) + " along scatter_dim");
    // Each rank's K_r: any split of K. One that is not collmm's, or leaves a rank none, runs padded.
    const std::vector<int64_t> k_parts = rank_counts(all, 1);
    RowSplit k_split(k_parts);
    k_split.collmm_split = k_split.collmm_split && *std::min_element(k_parts.begin(), k_parts.end()) > 0;
    const int64_t k = k_split.plan_rows();
    const BLayout layout = agreed_layout(all, 2, "B");
    const RowSplit split(rows);
    const Problem problem{.op = Op::gemm_rs, .m = split.plan_rows(), .n = n, .k = k, .world = p, .b_layout = layout};
    Prepared& prepared =
        memo ? *memo->prepared
             : s.session.prepare(problem, s.session.options(problem, dtype, algo, pieces, piece_sizes), dtype);
    if (!memo) s.session.remember(key, all, prepared);
    Executor& ex = *prepared.executor;
    at::Tensor c =
        at::empty({block_size(split.plan_rows(), p, r), n}, a.options().dtype(scalar_type(ex.out_dtype(dtype))));
    // Held: they must outlive the run.
    const at::Tensor a_plan =
        split.spread(zero_padded(a.view({slices * rest, k_r}), 1, k_split.collmm_split ? k_r : k_split.most));
    const at::Tensor b_plan = k_split.collmm_split ? b : zero_padded_b(b, 0, k_split.most, layout);
    bind(ex, kBufA, a_plan);
    bind(ex, kBufB, b_plan);
    bind(ex, kBufC, c);
    s.session.run(prepared, dtype, split.total, {a_plan, b_plan, c});
    c = c.narrow(0, 0, rows[static_cast<size_t>(r)]);
    if (reduce_op == "avg") c.div_(p);
    if (c.scalar_type() != a.scalar_type()) c = c.to(a.scalar_type());
    return shaped(c, inner, dim);
  });
}

}  // namespace collmm::torch_ext

TORCH_LIBRARY(collmm, m) {
  m.def(
      "fused_all_gather_matmul(Tensor A_shard, Tensor[] Bs, int gather_dim, str group_name, *, "
      "bool return_A=True, str algo=\"auto\", int? gathered_size=None, int pieces=1, "
      "str piece_sizes=\"equal\") -> (Tensor?, Tensor[])");
  m.def(
      "fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim, str group_name, *, "
      "str algo=\"auto\", int? scatter_size=None, int pieces=1, str piece_sizes=\"equal\") -> Tensor");
  // The algorithms' names, from collmm's table (collmm/algorithms.hpp): collmm.ALGOS reads them.
  m.def("algorithms() -> str[]", [] {
    std::vector<std::string> names;
    for (const collmm::AlgoRow& row : collmm::algorithm_table()) names.push_back(row.name);
    return names;
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
}

TORCH_LIBRARY_IMPL(collmm, CUDA, m) {
  m.impl("fused_all_gather_matmul", &collmm::torch_ext::all_gather_matmul);
  m.impl("fused_matmul_reduce_scatter", &collmm::torch_ext::matmul_reduce_scatter);
}
