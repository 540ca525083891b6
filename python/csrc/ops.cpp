// ops.cpp: the dispatcher ops torch.ops.collmm.fused_all_gather_matmul and
// torch.ops.collmm.fused_matmul_reduce_scatter (the arguments of torch.ops.symm_mem's fused ops,
// plus `algo`) and their CPU and CUDA kernels: every rank checks its own tensors, the ranks agree
// on the problem (python/csrc/session.hpp, collmm/agreement.hpp), then collmm's plan runs on the
// caller's tensors through the session's executor (CPU: the host executor with the group as its
// transport; CUDA: the ATen executor, aten_executor.hpp). A user error raises
// ValueError("collmm: ...") on every rank before any data moves.
//
//   fused_all_gather_matmul(A_shard [M_r, ..., K], Bs [[K, N_r], ...], gather_dim=0, group_name)
//     A  = cat over ranks q of A_shard_q along dim 0      (the gathered A, returned if return_A)
//     returns (A or None, [A @ B for B in Bs])            (A's leading dims kept, flattened for the GEMM)
//   fused_matmul_reduce_scatter(A [M, ..., K_r], B [K_r, N], reduce_op, scatter_dim=0, group_name)
//     S  = sum over ranks q of A_q @ B_q                  (reduce_op "avg": divided by the group size)
//     returns rows block r of S (rows block_offset(M, P, r) .. + block_size(M, P, r), types.hpp)
//
// B is read in place as [K, N] row-major (layout kn) or as the transposed view of an nn.Linear
// weight stored [N, K] (w.t(), layout nk); any other layout is refused. Rank q's rows of A (ag) or
// columns (rs) must be collmm's split: block_size(total, P, q), the first total % P ranks one more.
#include <optional>
#include <sstream>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "collmm/agreement.hpp"
#include "collmm/algorithms.hpp"
#include "session.hpp"

namespace collmm::torch_ext {
namespace {

std::optional<Dtype> dtype_of(at::ScalarType t) {
  if (t == at::kFloat) return Dtype::f32;
  if (t == at::kDouble) return Dtype::f64;
  if (t == at::kBFloat16) return Dtype::bf16;
  return std::nullopt;
}

at::ScalarType scalar_type(Dtype d) {
  if (d == Dtype::f32) return at::kFloat;
  if (d == Dtype::f64) return at::kDouble;
  return at::kBFloat16;
}

std::string dims(at::IntArrayRef sizes) {
  std::ostringstream s;
  s << sizes;
  return s.str();
}

// B's layout read in place, or none: [K, N] row-major, or the transpose of an [N, K] row-major.
std::optional<BLayout> layout_of(const at::Tensor& b) {
  if (b.is_contiguous()) return BLayout::kn;
  if (b.t().is_contiguous()) return BLayout::nk;
  return std::nullopt;
}

// The first problem found with one rank's own tensors, or "".
std::string check_a(const at::Tensor& a, const char* name, int64_t dim, const char* dim_name) {
  std::ostringstream e;
  if (a.dim() < 2)
    e << name << " must have 2 or more dims (got " << dims(a.sizes()) << ")";
  else if (a.size(-1) == 0)
    e << name << " " << dims(a.sizes()) << " has no columns";
  else if (!dtype_of(a.scalar_type()))
    e << name << " is " << a.scalar_type() << "; collmm has float32, float64, bfloat16";
  else if (!a.is_contiguous())
    e << name << " must be contiguous (row-major, read in place); got strides " << dims(a.strides());
  else if (dim != 0 && dim != -a.dim())
    e << dim_name << " must be 0 (collmm splits the rows of the flattened leading dims); got " << dim;
  return e.str();
}

std::string check_b(const at::Tensor& b, const at::Tensor& a, const std::string& name, int64_t k) {
  std::ostringstream e;
  if (b.dim() != 2)
    e << name << " must be 2-D (got " << dims(b.sizes()) << ")";
  else if (b.device() != a.device())
    e << name << " is on " << b.device() << ", A on " << a.device();
  else if (b.scalar_type() != a.scalar_type())
    e << name << " is " << b.scalar_type() << ", A is " << a.scalar_type();
  else if (b.size(0) != k)
    e << name << " has " << b.size(0) << " rows; A has " << k << " columns";
  else if (!layout_of(b))
    e << name << " " << dims(b.sizes()) << " with strides " << dims(b.strides())
      << " is neither row-major [K, N] nor the transpose of a row-major [N, K] (w.t())";
  return e.str();
}

std::string check_algo(const std::string& algo) {
  if (algo == "auto") return {};
  try {
    parse_algo(algo);
  } catch (const UsageError& e) {
    return std::string("algo: ") + e.what() + " or auto";
  }
  return {};
}

// The total of every rank's count (rows or columns); checks the counts are collmm's split of it.
int64_t agreed_split(const std::vector<std::vector<double>>& all, size_t at, const std::string& what) {
  int64_t total = 0;
  for (const auto& q : all) total += static_cast<int64_t>(q[at]);
  const int p = static_cast<int>(all.size());
  std::ostringstream got, want;
  bool fits = true;
  for (int q = 0; q < p; ++q) {
    const int64_t v = static_cast<int64_t>(all[static_cast<size_t>(q)][at]);
    got << (q ? ", " : "") << v;
    want << (q ? ", " : "") << block_size(total, p, q);
    fits = fits && v == block_size(total, p, q);
  }
  if (!fits)
    throw UsageError(what + " over the ranks are " + got.str() + ": not collmm's split of " + std::to_string(total) +
                     " over " + std::to_string(p) + " ranks (" + want.str() +
                     ": the first total % P ranks hold one more)");
  return total;
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

std::tuple<std::optional<at::Tensor>, std::vector<at::Tensor>> all_gather_matmul(const at::Tensor& a_shard,
                                                                                 at::TensorList bs, int64_t gather_dim,
                                                                                 c10::string_view group_name,
                                                                                 bool return_a,
                                                                                 c10::string_view algo_view) {
  return user_errors_as_value_errors([&]() -> std::tuple<std::optional<at::Tensor>, std::vector<at::Tensor>> {
    const std::string algo(algo_view);
    SessionLock s = session_for(std::string(group_name), a_shard.device());
    HostComm& host = s.session.host();
    std::string misfit = check_a(a_shard, "A_shard", gather_dim, "gather_dim");
    const int64_t k = a_shard.dim() ? a_shard.size(-1) : 0;
    if (misfit.empty() && bs.empty()) misfit = "Bs is empty";
    for (size_t i = 0; misfit.empty() && i < bs.size(); ++i)
      misfit = check_b(bs[i], a_shard, "Bs[" + std::to_string(i) + "]", k);
    if (misfit.empty()) misfit = check_algo(algo);
    // One exchange: any rank's error, the keys every rank must share, each rank's split sizes.
    const bool ok = misfit.empty();
    const Dtype dtype = ok ? *dtype_of(a_shard.scalar_type()) : Dtype::f32;
    const BLayout layout = ok ? *layout_of(bs[0]) : BLayout::kn;
    const int64_t m_r = ok ? a_shard.numel() / k : 0, n_r = ok ? bs[0].size(1) : 0;
    const at::IntArrayRef inner = ok ? a_shard.sizes().slice(1, a_shard.dim() - 2) : at::IntArrayRef();
    const auto all = agree_and_gather(host, misfit,
                                      {{"device type", a_shard.device().is_cpu() ? "cpu" : "cuda"},
                                       {"K (A_shard's last dim)", std::to_string(k)},
                                       {"A_shard's middle dims", dims(inner)},
                                       {"dtype", to_string(dtype)},
                                       {"Bs[0] layout", to_string(layout)},
                                       {"number of Bs", std::to_string(bs.size())},
                                       {"algo", algo},
                                       {"return_A", return_a ? "True" : "False"}},
                                      {static_cast<double>(m_r), static_cast<double>(n_r)});
    const int64_t m = agreed_split(all, 0, "the rows of A_shard (leading dims flattened)");
    const int64_t n = agreed_split(all, 1, "the columns of Bs[0]");
    const Problem problem{Op::ag_gemm, m, n, k, s.session.world(), layout};
    Prepared& prepared = s.session.prepare(problem, s.session.options(problem, dtype, algo), dtype);
    const Plan& plan = prepared.plan;
    Executor& ex = *prepared.executor;
    // The gathered A goes to a new tensor when the caller gets it or more GEMMs read it; else it
    // stays in the executor's scratch, allocated once per plan.
    const bool keep_gathered = return_a || bs.size() > 1;
    const at::Tensor gathered = keep_gathered ? at::empty({m, k}, a_shard.options()) : at::Tensor();
    const at::Tensor c = at::empty({m, n_r}, a_shard.options().dtype(scalar_type(ex.out_dtype(dtype))));
    bind(ex, kBufA, a_shard);
    bind(ex, kBufB, bs[0]);
    bind(ex, kBufC, c);
    if (keep_gathered)
      bind(ex, gathered_buffer(plan), gathered);
    else
      ex.bind(0, gathered_buffer(plan), nullptr, 0);
    ex.run(StepFilter::all, false);

    const int64_t rest = c10::multiply_integers(inner);
    auto shaped = [&](const at::Tensor& t) {
      std::vector<int64_t> sizes{t.size(0) / rest};
      sizes.insert(sizes.end(), inner.begin(), inner.end());
      sizes.push_back(t.size(1));
      return t.view(sizes);
    };
    std::vector<at::Tensor> outs{shaped(c.scalar_type() == a_shard.scalar_type() ? c : c.to(a_shard.scalar_type()))};
    for (size_t i = 1; i < bs.size(); ++i) outs.push_back(shaped(at::matmul(gathered, bs[i])));
    return {return_a ? std::optional<at::Tensor>(shaped(gathered)) : std::nullopt, outs};
  });
}

at::Tensor matmul_reduce_scatter(const at::Tensor& a, const at::Tensor& b, c10::string_view reduce_op_view,
                                 int64_t scatter_dim, c10::string_view group_name, c10::string_view algo_view) {
  return user_errors_as_value_errors([&]() -> at::Tensor {
    const std::string algo(algo_view), reduce_op(reduce_op_view);
    SessionLock s = session_for(std::string(group_name), a.device());
    HostComm& host = s.session.host();
    std::string misfit = check_a(a, "A", scatter_dim, "scatter_dim");
    const int64_t k_r = a.dim() ? a.size(-1) : 0;
    if (misfit.empty()) misfit = check_b(b, a, "B", k_r);
    if (misfit.empty() && reduce_op != "sum" && reduce_op != "avg")
      misfit = "reduce_op must be sum or avg (got " + reduce_op + ")";
    if (misfit.empty()) misfit = check_algo(algo);
    const bool ok = misfit.empty();
    const Dtype dtype = ok ? *dtype_of(a.scalar_type()) : Dtype::f32;
    const BLayout layout = ok ? *layout_of(b) : BLayout::kn;
    const int64_t m = ok ? a.numel() / k_r : 0, n = ok ? b.size(1) : 0;
    const at::IntArrayRef inner = ok ? a.sizes().slice(1, a.dim() - 2) : at::IntArrayRef();
    const auto all = agree_and_gather(host, misfit,
                                      {{"device type", a.device().is_cpu() ? "cpu" : "cuda"},
                                       {"M (A's leading dims flattened)", std::to_string(m)},
                                       {"A's middle dims", dims(inner)},
                                       {"N (B's columns)", std::to_string(n)},
                                       {"dtype", to_string(dtype)},
                                       {"B layout", to_string(layout)},
                                       {"reduce_op", reduce_op},
                                       {"algo", algo}},
                                      {static_cast<double>(k_r)});
    const int64_t k = agreed_split(all, 0, "the columns of A (rows of B)");
    const int p = s.session.world(), r = s.session.rank();
    const int64_t rest = c10::multiply_integers(inner);
    for (int q = 0; q < p; ++q)
      if (block_size(m, p, q) % rest)
        throw UsageError("rank " + std::to_string(q) + "'s block of the " + std::to_string(m) + " rows of A is " +
                         std::to_string(block_size(m, p, q)) + " rows: not whole slices of dim 0 (each " +
                         std::to_string(rest) + " rows); scatter a 2-D A instead");
    const Problem problem{Op::gemm_rs, m, n, k, p, layout};
    Executor& ex = *s.session.prepare(problem, s.session.options(problem, dtype, algo), dtype).executor;
    at::Tensor c = at::empty({block_size(m, p, r), n}, a.options().dtype(scalar_type(ex.out_dtype(dtype))));
    bind(ex, kBufA, a);
    bind(ex, kBufB, b);
    bind(ex, kBufC, c);
    ex.run(StepFilter::all, false);
    if (reduce_op == "avg") c.div_(p);
    if (c.scalar_type() != a.scalar_type()) c = c.to(a.scalar_type());
    std::vector<int64_t> sizes{c.size(0) / rest};
    sizes.insert(sizes.end(), inner.begin(), inner.end());
    sizes.push_back(n);
    return c.view(sizes);
  });
}

}  // namespace collmm::torch_ext

TORCH_LIBRARY(collmm, m) {
  m.def(
      "fused_all_gather_matmul(Tensor A_shard, Tensor[] Bs, int gather_dim, str group_name, *, "
      "bool return_A=True, str algo=\"auto\") -> (Tensor?, Tensor[])");
  m.def(
      "fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim, str group_name, *, "
      "str algo=\"auto\") -> Tensor");
  // Which executor the ops use for CPU tensors in groups first used after this call: "host" (the
  // default: OpenBLAS GEMMs on lane threads beside the group's comm) or "aten" (ATen GEMMs on the
  // calling thread, the group's comm asynchronous: the executor of CUDA tensors).
  // The algorithms' names, from collmm's table (collmm/algorithms.hpp): collmm.ALGOS reads them.
  m.def("algorithms() -> str[]", [] {
    std::vector<std::string> names;
    for (const collmm::AlgoRow& row : collmm::algorithm_table()) names.push_back(row.name);
    return names;
  });
  m.def("set_cpu_executor(str kind) -> ()", [](c10::string_view kind) {
    collmm::torch_ext::user_errors_as_value_errors([&] { collmm::torch_ext::set_cpu_executor(std::string(kind)); });
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
