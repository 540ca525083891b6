// autograd.cpp: the ops' autograd kernels. The all-gather and reduce-scatter ops' backward is the other op:
//   all-gather matmul    C_i = all_gather(A_shard) @ B_i    (and A = all_gather(A_shard); gathered along
//                        its last dim, dA_shard is the reduce-scatter of the output's last dim)
//     dA_shard = this rank's block of sum_q (sum_i dC_i @ B_i^T + dA)   fused_matmul_reduce_scatter
//     dB_i     = A^T @ dC_i                                              (A: returned, or gathered again)
//   matmul reduce-scatter  C_r = block r of sum_q A_q @ B_q   (avg: / P)
//     dA = all_gather(dC) @ B^T,  dB = A^T @ all_gather(dC)              fused_all_gather_matmul
//   matmul all-reduce  C = sum_q A_q @ B_q on every rank  (avg: / P)
//     dA = dC @ B^T,  dB = A^T @ dC                                      no communication: dC is the same
//                                                                        on every rank (Megatron's
//                                                                        row-parallel linear without
//                                                                        sequence parallelism)
// In C++ so that a call that needs no gradient (inference, torch.no_grad, inputs that do not require
// one) goes straight to the kernel: a Python autograd kernel cost each such call 10-15 us of host
// time on the CI machine. torch.compile traces these as it traces any C++ autograd Function.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>

#include "op_args.hpp"
#include "trace.hpp"

namespace collmm::torch_ext {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using AgResult = std::tuple<std::optional<at::Tensor>, std::vector<at::Tensor>>;

AgResult call_ag(const at::Tensor& a_shard, at::TensorList bs, int64_t gather_dim, c10::string_view group,
                 bool return_a, c10::string_view algo, std::optional<int64_t> gathered_size) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("collmm::fused_all_gather_matmul", "")
                             .typed<AgResult(const at::Tensor&, at::TensorList, int64_t, c10::string_view, bool,
                                             c10::string_view, std::optional<int64_t>)>();
  return op.call(a_shard, bs, gather_dim, group, return_a, algo, gathered_size);
}

at::Tensor call_rs(const at::Tensor& a, const at::Tensor& b, c10::string_view reduce_op, int64_t scatter_dim,
                   c10::string_view group, c10::string_view algo, std::optional<int64_t> scatter_size) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("collmm::fused_matmul_reduce_scatter", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, int64_t,
                                               c10::string_view, c10::string_view, std::optional<int64_t>)>();
  return op.call(a, b, reduce_op, scatter_dim, group, algo, scatter_size);
}

at::Tensor call_ar(const at::Tensor& a, const at::Tensor& b, c10::string_view reduce_op, c10::string_view group,
                   c10::string_view algo) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("collmm::fused_matmul_all_reduce", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, c10::string_view,
                                               c10::string_view)>();
  return op.call(a, b, reduce_op, group, algo);
}

bool grad_needed(std::initializer_list<at::TensorList> lists) {
  if (!at::GradMode::is_enabled()) return false;
  for (at::TensorList list : lists)
    for (const at::Tensor& t : list)
      if (t.requires_grad()) return true;
  return false;
}

// dB = A^T @ dC (A and dC as 2-D row blocks) in B's layout, as torch's mm backward gives it: where B
// is column-major (a layer's weight.t()), (dC^T @ A)^T, so that the weight's gradient comes out
// contiguous. A strided one made torch 2.11's AccumulateGrad gather a DTensor weight's gradient whole
// (Replicate(), not the weight's Shard).
at::Tensor grad_of_b(const at::Tensor& a, const at::Tensor& dc, const at::Tensor& b) {
  const bool column_major =
      b.dim() == 2 && b.size(0) > 1 && b.size(1) > 1 && b.stride(0) == 1 && b.stride(1) == b.size(0);
  return column_major ? dc.t().mm(a).t() : a.t().mm(dc);
}

int64_t dim_of(int64_t dim, const at::Tensor& t) { return t.dim() ? (dim % t.dim() + t.dim()) % t.dim() : 0; }

struct AllGatherMatmul : torch::autograd::Function<AllGatherMatmul> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& a_shard, at::TensorList bs, int64_t gather_dim,
                               c10::string_view group, bool return_a, c10::string_view algo,
                               std::optional<int64_t> gathered_size) {
    at::AutoDispatchBelowADInplaceOrView below;
    auto [a, cs] = call_ag(a_shard, bs, gather_dim, group, return_a, algo, gathered_size);
    const int64_t dim = dim_of(gather_dim, a_shard);
    ctx->set_materialize_grads(false);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["group"] = std::string(group);
    ctx->saved_data["algo"] = algorithm_of(std::string(algo));  // its options are this op's
    ctx->saved_data["shard_size"] = a_shard.size(dim);
    ctx->saved_data["return_a"] = return_a;
    ctx->saved_data["module"] = tracing() ? trace_module() : std::string();  // collmm.trace's label
    std::vector<at::Tensor> saved{a_shard, a.value_or(at::Tensor())};
    saved.insert(saved.end(), bs.begin(), bs.end());
    ctx->save_for_backward(saved);
    variable_list out;  // A (when returned: an output may not be undefined), then each C
    if (a) out.push_back(*a);
    out.insert(out.end(), cs.begin(), cs.end());
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const TraceBackward traced(ctx->saved_data["module"].toStringRef());
    if (!ctx->saved_data["return_a"].toBool()) grads.insert(grads.begin(), at::Tensor());  // no dA
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& a_shard = saved[0];
    at::Tensor a = saved[1];
    const std::vector<at::Tensor> bs(saved.begin() + 2, saved.end());
    // k: the gathered A's last dim (A's K, or with gather_dim A's last, every rank's K together: Bs' rows).
    const int64_t dim = ctx->saved_data["dim"].toInt(), k = bs[0].size(0);
    const bool gather_k = dim == a_shard.dim() - 1;
    const std::string group = ctx->saved_data["group"].toStringRef(), algo = ctx->saved_data["algo"].toStringRef();
    // dA_shard = this rank's block of sum_q (dC_0 @ B_0^T + E), E = dA + sum_{i>=1} dC_i @ B_i^T: one
    // reduce-scatter GEMM of [dC_0, E] @ [B_0^T; I] (its inner size per rank: B_0's columns plus k,
    // any split). The other Bs' terms (an unsharded B, any width) are summed into E here.
    at::Tensor dc0 = grads[1], e = grads[0];
    int64_t gathered_rows = -1;
    for (size_t i = 0; i < bs.size(); ++i) {
      if (!grads[i + 1].defined()) continue;
      gathered_rows = gather_k ? k : grads[i + 1].size(dim);
      if (i == 0) continue;
      const at::Tensor term = at::matmul(grads[i + 1], bs[i].t());
      e = e.defined() ? e + term : term;
    }
    std::vector<at::Tensor> xs, ys;
    if (dc0.defined()) xs.push_back(dc0), ys.push_back(bs[0].t());
    if (e.defined()) xs.push_back(e), ys.push_back(at::eye(k, a_shard.options()));
    variable_list out(1 + bs.size() + 5);  // A_shard, each B, then the 5 arguments that are not tensors
    // An A_shard that needs no gradient (a model's first input) gets no reduce-scatter.
    if (!xs.empty() && ctx->needs_input_grad(0))
      out[0] = call_rs(at::cat(xs, -1).contiguous(), at::cat(ys, 0), "sum", dim, group, algo,
                       ctx->saved_data["shard_size"].toInt());
    bool any_b = false;
    for (size_t i = 0; i < bs.size(); ++i) any_b = any_b || ctx->needs_input_grad(i + 1);
    if (gathered_rows >= 0 && any_b) {
      if (!a.defined())  // not returned by the forward: gathered again, to dC's rows (uneven shards)
        a = std::get<0>(call_ag(a_shard, {a_shard.new_zeros({k, 1})}, dim, group, true, algo, gathered_rows)).value();
      const at::Tensor flat = at::flatten(a, 0, -2);  // (rows, k); flatten, not reshape: a shard may be 0 wide
      for (size_t i = 0; i < bs.size(); ++i)
        if (grads[i + 1].defined()) out[i + 1] = grad_of_b(flat, at::flatten(grads[i + 1], 0, -2), bs[i]);
    }
    return out;
  }
};

struct MatmulReduceScatter : torch::autograd::Function<MatmulReduceScatter> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, c10::string_view reduce_op,
                            int64_t scatter_dim, c10::string_view group, c10::string_view algo,
                            std::optional<int64_t> scatter_size) {
    at::AutoDispatchBelowADInplaceOrView below;
    at::Tensor c = call_rs(a, b, reduce_op, scatter_dim, group, algo, scatter_size);
    const int64_t dim = dim_of(scatter_dim, a);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["group"] = std::string(group);
    ctx->saved_data["algo"] = algorithm_of(std::string(algo));                    // its options are this op's
    ctx->saved_data["full_size"] = dim == a.dim() - 1 ? b.size(1) : a.size(dim);  // the scattered dim's size
    ctx->saved_data["module"] = tracing() ? trace_module() : std::string();       // collmm.trace's label
    ctx->saved_data["scale"] =
        reduce_op == "avg" ? 1.0 / c10d::resolve_process_group(std::string(group))->getSize() : 1.0;
    ctx->save_for_backward({a, b});
    return c;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const TraceBackward traced(ctx->saved_data["module"].toStringRef());
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1];
    const double scale = ctx->saved_data["scale"].toDouble();
    auto [gathered, da] =
        call_ag(grads[0].contiguous(), {b.t()}, ctx->saved_data["dim"].toInt(), ctx->saved_data["group"].toStringRef(),
                true, ctx->saved_data["algo"].toStringRef(), ctx->saved_data["full_size"].toInt());
    at::Tensor db = grad_of_b(at::flatten(a, 0, -2), at::flatten(*gathered, 0, -2), b);
    at::Tensor d_a = da[0];
    if (scale != 1.0) d_a = d_a * scale, db = db * scale;
    return {d_a, db, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct MatmulAllReduce : torch::autograd::Function<MatmulAllReduce> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, c10::string_view reduce_op,
                            c10::string_view group, c10::string_view algo) {
    at::AutoDispatchBelowADInplaceOrView below;
    at::Tensor c = call_ar(a, b, reduce_op, group, algo);
    ctx->saved_data["scale"] =
        reduce_op == "avg" ? 1.0 / c10d::resolve_process_group(std::string(group))->getSize() : 1.0;
    ctx->save_for_backward({a, b});
    return c;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1];
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor dc = scale != 1.0 ? grads[0] * scale : grads[0];
    at::Tensor d_a, d_b;
    if (ctx->needs_input_grad(0)) d_a = at::matmul(dc, b.t());
    if (ctx->needs_input_grad(1)) {  // reshape, not flatten: A may be 1-D; rows counted: A may be 0 wide
      const int64_t rows = c10::multiply_integers(a.sizes().slice(0, a.dim() - 1));
      d_b = grad_of_b(a.reshape({rows, a.size(-1)}), dc.reshape({rows, dc.size(-1)}), b);
    }
    return {d_a, d_b, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

AgResult all_gather_matmul_autograd(const at::Tensor& a_shard, at::TensorList bs, int64_t gather_dim,
                                    c10::string_view group, bool return_a, c10::string_view algo,
                                    std::optional<int64_t> gathered_size) {
  if (!grad_needed({a_shard, bs})) {
    at::AutoDispatchBelowADInplaceOrView below;
    return call_ag(a_shard, bs, gather_dim, group, return_a, algo, gathered_size);
  }
  variable_list out = AllGatherMatmul::apply(a_shard, bs, gather_dim, group, return_a, algo, gathered_size);
  std::optional<at::Tensor> a;
  if (return_a) a = out[0];
  return {a, std::vector<at::Tensor>(out.begin() + (return_a ? 1 : 0), out.end())};
}

at::Tensor matmul_reduce_scatter_autograd(const at::Tensor& a, const at::Tensor& b, c10::string_view reduce_op,
                                          int64_t scatter_dim, c10::string_view group, c10::string_view algo,
                                          std::optional<int64_t> scatter_size) {
  if (!grad_needed({a, b})) {
    at::AutoDispatchBelowADInplaceOrView below;
    return call_rs(a, b, reduce_op, scatter_dim, group, algo, scatter_size);
  }
  return MatmulReduceScatter::apply(a, b, reduce_op, scatter_dim, group, algo, scatter_size);
}

at::Tensor matmul_all_reduce_autograd(const at::Tensor& a, const at::Tensor& b, c10::string_view reduce_op,
                                      c10::string_view group, c10::string_view algo) {
  if (!grad_needed({a, b})) {
    at::AutoDispatchBelowADInplaceOrView below;
    return call_ar(a, b, reduce_op, group, algo);
  }
  return MatmulAllReduce::apply(a, b, reduce_op, group, algo);
}

}  // namespace
}  // namespace collmm::torch_ext

TORCH_LIBRARY_IMPL(collmm, Autograd, m) {
  m.impl("fused_all_gather_matmul", &collmm::torch_ext::all_gather_matmul_autograd);
  m.impl("fused_matmul_reduce_scatter", &collmm::torch_ext::matmul_reduce_scatter_autograd);
  m.impl("fused_matmul_all_reduce", &collmm::torch_ext::matmul_all_reduce_autograd);
}
