// ops.cpp: the dispatcher ops torch.ops.collmm.fused_all_gather_matmul,
// torch.ops.collmm.fused_matmul_reduce_scatter (the arguments of torch.ops.symm_mem's fused ops, plus `algo` and
// the sizes one rank cannot know) and torch.ops.collmm.fused_matmul_all_reduce, and their CPU and CUDA kernels.
// `algo` is "auto" or an entry of the command lines' --algo: "ring", "ring:pieces4h" (algo_entries.hpp).
// Every op call walks one skeleton (run_call, op_call.hpp). Every rank checks its own tensors. The
// ranks agree on the problem (python/csrc/call_memo.hpp, src/common/agreement.hpp: one exchange of the
// same size for every op, the op's name among what they agree on). Then collmm's plan runs on the
// caller's tensors through the session's executor. A user error raises ValueError("collmm: ...") on
// every rank before any data moves.
//
//   fused_all_gather_matmul(A [..., K], Bs [[K, N_r], ...], gather_dim, group_name,
//                           return_A, algo, gathered_size)
//     G  = cat over ranks q of A_q along gather_dim         (any sizes along it: each rank's own;
//                                                            gather_dim the last: K gathered, Bs [[sum K_q, N]])
//     returns (G if return_A else None, [G @ B for B in Bs])
//   fused_matmul_reduce_scatter(A [..., K_r], B [K_r, N], reduce_op, scatter_dim, group_name, algo,
//                               scatter_size)
//     S  = sum over ranks q of A_q @ B_q                    (reduce_op "avg": divided by P)
//     returns rank r's block of S along scatter_dim (the last: N), contiguous: scatter_size rows of it
//     (each rank's own), by default block_size(S.size(scatter_dim), P, r) (collmm/types.hpp)
//   fused_matmul_all_reduce(A [..., K_r], B [K_r, N], reduce_op, group_name, algo)
//     returns S = sum over ranks q of A_q @ B_q [..., N] on every rank (reduce_op "avg": divided by P)
//
// The dimension gathered or scattered goes first (in place when A is contiguous and it is dim 0 or
// every dim before it has size 1, else one copy of A). The dims between it and the last are
// flattened into the GEMM's rows. The rows of every rank as they come are collmm's split (the plan
// as it is) or run padded (row_split.hpp); so do the columns of Bs[0] (each rank's N_r) and of A
// (K_r). B is read in place as [K, N] row-major (layout kn) or as the transposed view of an
// nn.Linear weight stored [N, K] (w.t(), layout nk). A B of one row or column fits both, and the
// ranks take the layout any of them needs.
#include <algorithm>
#include <optional>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "agreement.hpp"
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

// What to do where gathered_size (given, or under torch.compile taken) is not the ranks' total.
constexpr const char* kGatheredSizeRemedy =
    "under torch.compile the gathered size must be known before the ranks meet: collmm takes gathered_size, else a "
    "DTensor input's global shape, else P times this rank's size. torch's SequenceParallel (DTensor.from_local "
    "without shape=) also claims P times this rank's size, wrong where P does not divide the sequence. Remedies: pad "
    "the sequence to a multiple of P; pass the true total as gathered_size (a collmm Colwise module takes it: "
    "module(x, gathered_size=total)) or a DTensor with its true global shape; or leave this module out of "
    "torch.compile (eager calls learn the sizes from the ranks)";

int gathered_buffer(const Plan& plan) {
  if (const int g = find_buffer(plan, Role::gathered); g >= 0) return g;
  throw std::runtime_error("collmm: the " + to_string(plan.options.algo) + " plan keeps no gathered A");
}

}  // namespace

// fused_all_gather_matmul. Numbers sent: A's size along gather_dim, Bs[0]'s N_r, its layout. Where
// gather_dim is A's last (K gathered), the plan gathers the rows of A^T ([K_r, M] on each rank) beside
// a GEMM of one column, and every B multiplies the gathered A after it (the gather is not overlapped).
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
  bool gather_k = false;                // gather_dim is A's last
  at::Tensor a;                         // A, the gathered dim first (gather_k: A^T, [K_r, M])
  at::IntArrayRef inner;                // A's dims other than gather_dim and K (gather_k: its dims before K)
  std::optional<RowSplit> split, cols;  // every rank's rows (M) and N_r
  BLayout layout = BLayout::kn;
  bool keep_gathered = false;
  at::Tensor gathered, c, a_plan, b_plan;  // bound tensors must outlive the run
  std::vector<at::Tensor> bound() const { return {a_plan, b_plan, c, gathered}; }
  // The plan's K: A's, or (gather_k) its rows.
  int64_t width() const { return gather_k ? a.size(1) : k; }

  void key(CallKey& key) const {
    key.insert(key.end(), {gather_dim, return_a, gathered_size.has_value(), gathered_size.value_or(0)});
    add_to_key(key, a_shard);
    for (const at::Tensor& b : bs) add_to_key(key, b);
  }
  std::string inspect(bool check) {
    k = a_shard.dim() ? a_shard.size(-1) : 0;
    std::string misfit;
    if (check) {
      misfit = check_a(a_shard, "A", gather_dim, "gather_dim", false);
      const bool k_gathered = misfit.empty() && any_dim(gather_dim, a_shard.dim()) == a_shard.dim() - 1;
      if (misfit.empty() && bs.empty()) misfit = "Bs is empty";
      for (size_t i = 0; misfit.empty() && i < bs.size(); ++i)
        misfit = check_b(bs[i], a_shard, "Bs[" + std::to_string(i) + "]", k_gathered ? -1 : k);
      for (size_t i = 1; misfit.empty() && k_gathered && i < bs.size(); ++i)
        if (bs[i].size(0) != bs[0].size(0))
          misfit = "Bs[" + std::to_string(i) + "] has " + std::to_string(bs[i].size(0)) + " rows, Bs[0] " +
                   std::to_string(bs[0].size(0)) + ": every B has K rows (A's last dim, gathered)";
    }
    if (!misfit.empty()) return misfit;
    dim = any_dim(gather_dim, a_shard.dim());
    gather_k = dim == a_shard.dim() - 1;
    if (gather_k) {
      inner = a_shard.sizes().slice(0, a_shard.dim() - 1);
      a = a_shard.reshape({c10::multiply_integers(inner), k}).t().contiguous();
    } else {
      a = a_shard.movedim(dim, 0).contiguous();
      inner = a.sizes().slice(1, a.dim() - 2);
    }
    dtype = *dtype_of(a.scalar_type());
    ready = true;
    return {};
  }
  Keys keys() const {
    if (gather_k)
      return {{"gather_dim", std::to_string(dim) + " (A's last: K gathered)"},
              {"A's dims before K", dims(inner)},
              {"K (the rows of Bs)", std::to_string(bs[0].size(0))},
              {"number of Bs", std::to_string(bs.size())},
              {"return_A", return_a ? "True" : "False"},
              {std::string("gathered_size (") + kGatheredSizeRemedy + ")", optional_int(gathered_size)}};
    return {{"K (A's last dim)", std::to_string(k)},
            {"gather_dim", std::to_string(dim)},
            {"A's dims other than gather_dim and K", dims(inner)},
            {"number of Bs", std::to_string(bs.size())},
            {"return_A", return_a ? "True" : "False"},
            {std::string("gathered_size (") + kGatheredSizeRemedy + ")", optional_int(gathered_size)}};
  }
  std::vector<double> mine() const {
    if (!ready) return {0, 0, static_cast<double>(either)};
    if (gather_k) return {static_cast<double>(a.size(0)), 1, static_cast<double>(either)};
    return {static_cast<double>(a.size(0)), static_cast<double>(bs[0].size(1)),
            static_cast<double>(*layout_fit(bs[0]))};
  }
  Problem problem(const Agreed& all) {
    const RankSizes agreed = rank_sizes(all, gather_k ? 1 : c10::multiply_integers(inner));
    if (gathered_size && *gathered_size != agreed.total)
      throw UsageError("gathered_size is " + std::to_string(*gathered_size) + ", but the ranks' A sizes along " +
                       "gather_dim (" + agreed.text() + ") add up to " + std::to_string(agreed.total) + ". " +
                       kGatheredSizeRemedy);
    if (gather_k && bs[0].size(0) != agreed.total)
      throw UsageError("Bs have " + std::to_string(bs[0].size(0)) +
                       " rows, but the ranks' K (A's last dim, gathered: " + agreed.text() + ") add up to " +
                       std::to_string(agreed.total));
    split.emplace(agreed.rows);
    cols.emplace(rank_counts(all, 1));  // each rank's N_r: any split of N
    layout = agreed_layout(all, 2, "Bs[0]");
    rows = split->total;
    return {
        .op = op, .m = split->plan_rows(), .n = cols->plan_rows(), .k = width(), .world = world, .b_layout = layout};
  }
  void bind(Prepared& prepared) {
    Executor& ex = *prepared.executor;
    // The gathered A goes to a new tensor when the caller gets it or more GEMMs read it; else it
    // stays in the executor's scratch, allocated once per plan.
    keep_gathered = gather_k || return_a || bs.size() > 1;
    const int64_t n_r = gather_k ? 1 : bs[0].size(1), width = this->width();
    if (keep_gathered) gathered = at::empty({split->plan_rows(), width}, a.options());
    c = at::empty({split->plan_rows(), cols->collmm_split ? n_r : cols->most}, out_options(a, ex, dtype));
    const at::Tensor a_rows = a.view({split->rows[static_cast<size_t>(rank)], width});
    a_plan = split->collmm_split ? a_rows : padded_rows(a_rows, split->most);
    if (gather_k)  // the GEMM beside the gather: one column of zeros
      b_plan = at::zeros({width, 1}, a.options());
    else
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
    if (gather_k) {  // A = cat(A_q, -1), contiguous as torch's; then each A @ B
      std::vector<int64_t> sizes = inner.vec();
      sizes.push_back(split->total);
      const at::Tensor a_all = split->compact(gathered).t().contiguous().view(sizes);
      std::vector<at::Tensor> outs;
      for (const at::Tensor& b : bs) outs.push_back(at::matmul(a_all, b));
      return {return_a ? std::optional<at::Tensor>(a_all) : std::nullopt, outs};
    }
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
  at::Tensor b_read;             // the B the plan reads: B, or (gemm_rs scattering N) A^T
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
    b_plan = k_split->collmm_split ? b_read : zero_padded_b(b_read, 0, k_split->most, layout);
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
    return {static_cast<double>(first), static_cast<double>(k_r),
            static_cast<double>(ready ? *layout_fit(b_read) : either)};
  }
};

// fused_matmul_reduce_scatter. Numbers sent: this rank's rows of the result, K_r, B's layout. Where
// scatter_dim is the output's last (N scattered), the plan runs the transpose: C^T = sum_q B_q^T @ A_q^T,
// its rows (N) scattered; B^T costs one copy, A^T is read in place as the transpose of A's rows.
struct RsCall : SumCall {
  static constexpr Op op = Op::gemm_rs;
  static constexpr const char* name = "fused_matmul_reduce_scatter";
  RsCall(const at::Tensor& a, const at::Tensor& b, std::string reduce_op, int64_t scatter_dim,
         std::optional<int64_t> scatter_size)
      : SumCall(a, b, std::move(reduce_op)), scatter_dim(scatter_dim), scatter_size(scatter_size) {}
  int64_t scatter_dim;
  std::optional<int64_t> scatter_size;

  int64_t dim = 0, slices = 0, mine_rows = 0;
  bool scatter_n = false;  // scatter_dim is the output's last
  at::Tensor a;            // A, the scattered dim first (scatter_n: B^T, [N, K_r])
  at::IntArrayRef inner;   // A's dims other than scatter_dim and K (scatter_n: its dims before K)
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
    dim = any_dim(scatter_dim, a_in.dim());
    scatter_n = dim == a_in.dim() - 1;
    k_r = a_in.size(-1);
    if (scatter_n) {
      inner = a_in.sizes().slice(0, a_in.dim() - 1);
      a = b.t().contiguous();
      b_read = a_in.reshape({c10::multiply_integers(inner), k_r}).contiguous().t();
      n = b_read.size(1);
    } else {
      a = a_in.movedim(dim, 0).contiguous();
      inner = a.sizes().slice(1, a.dim() - 2);
      b_read = b;
      n = b.size(1);
    }
    slices = a.size(0);
    mine_rows = scatter_size ? *scatter_size : block_size(slices, world, rank);
    dtype = *dtype_of(a.scalar_type());
    ready = true;
    if (check_args && (mine_rows < 0 || mine_rows > slices))  // (a memo is of a call that passed it)
      return "scatter_size is " + std::to_string(mine_rows) + "; " + along() + " has " + std::to_string(slices);
    return {};
  }
  // What is scattered, for messages.
  std::string along() const { return scatter_n ? "N (B's columns, scattered)" : "A's size along scatter_dim"; }
  Keys keys() const {
    if (scatter_n)
      return {{"scatter_dim", std::to_string(dim) + " (the output's last: N scattered)"},
              {along(), std::to_string(slices)},
              {"A's dims before K", dims(inner)},
              {"reduce_op", reduce_op}};
    return {{"scatter_dim", std::to_string(dim)},
            {along(), std::to_string(slices)},
            {"A's dims other than scatter_dim and K", dims(inner)},
            {"N (B's columns)", std::to_string(n)},
            {"reduce_op", reduce_op}};
  }
  std::vector<double> mine() const { return numbers(mine_rows); }
  // The plan's rows per slice of the scattered dim.
  int64_t rest() const { return scatter_n ? 1 : c10::multiply_integers(inner); }
  Problem problem(const Agreed& all) {
    const RankSizes agreed = rank_sizes(all, rest());
    if (agreed.total != slices)
      throw UsageError("scatter_size over the ranks is " + agreed.text() + ": adds up to " +
                       std::to_string(agreed.total) + ", not " + along() + ", " + std::to_string(slices));
    const int64_t k = agreed_k(all);
    split.emplace(agreed.rows);
    rows = split->total;
    return {.op = op, .m = split->plan_rows(), .n = n, .k = k, .world = world, .b_layout = layout};
  }
  void bind(Prepared& prepared) {
    bind_ab(*prepared.executor, split->spread(a.view({slices * rest(), k_r})),
            {block_size(split->plan_rows(), world, rank), n});
  }
  // Contiguous, as torch's (out.view works for any scatter_dim).
  at::Tensor result() const {
    const at::Tensor mine = reduced(c.narrow(0, 0, split->rows[static_cast<size_t>(rank)]));
    if (!scatter_n) return shaped(mine, inner, dim).contiguous();
    std::vector<int64_t> sizes = inner.vec();
    sizes.push_back(mine.size(0));
    return mine.t().contiguous().view(sizes);
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
    b_read = b;
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
      "fused_all_gather_matmul(Tensor A, Tensor[] Bs, int gather_dim, str group_name, *, "
      "bool return_A=True, str algo=\"auto\", int? gathered_size=None) -> (Tensor?, Tensor[])");
  m.def(
      "fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim, str group_name, *, "
      "str algo=\"auto\", int? scatter_size=None) -> Tensor");
  m.def("fused_matmul_all_reduce(Tensor A, Tensor B, str reduce_op, str group_name, *, str algo=\"auto\") -> Tensor");
  // Counts a call on the group that failed in Python before reaching the op (call_memo.hpp's count_call).
  m.def("count_call(str group_name) -> ()",
        [](c10::string_view group_name) { collmm::torch_ext::count_call(std::string(group_name)); });
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
  // For autograd Functions written in Python: the module to label their backward's calls with (None
  // where no trace runs), and the span of that backward (trace.hpp's trace_backward_begin/_end).
  m.def("trace_forward_module() -> str?", []() -> std::optional<std::string> {
    if (!collmm::torch_ext::tracing()) return std::nullopt;
    return collmm::torch_ext::trace_module();
  });
  m.def("trace_backward_begin(str module) -> ()",
        [](c10::string_view module) { collmm::torch_ext::trace_backward_begin(std::string(module)); });
  m.def("trace_backward_end() -> ()", [] { collmm::torch_ext::trace_backward_end(); });
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
