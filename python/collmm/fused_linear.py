"""The tensor-parallel linears as functions of local tensors, for the styles (collmm.parallel,
collmm.shared_gather) and for layers built on plain tensors:

    colwise_linears(x, [W_1, ..., W_n], [b_1, ..., b_n], d, group)   one gather of x for n linears
        y_i = all_gather(x, d) @ W_i^T + b_i          one fused_all_gather_matmul, B = [W_1; ...; W_n]^T
        backward: dx = one reduce-scatter of sum_i dy_i @ W_i (one fused_matmul_reduce_scatter)
    rowwise_linear(h, W, b, d, group)                  a row-parallel linear with a sequence-sharded output
        y = reduce_scatter(h @ W^T, d) + b             fused_matmul_reduce_scatter
        backward: dh = all_gather(dy) @ W, dW = all_gather(dy)^T @ h and db = the column sums of
        all_gather(dy): whole on every rank (one fused_all_gather_matmul)

Weights are this rank's shards ([N_r, K] for a Colwise linear, [N, K_r] for a Rowwise one), as
nn.Linear holds them. A DTensor parameter's .to_local() passes its gradient back with the
parameter's placements. So a replicated bias gets a Replicate() gradient, as torch's RowwiseParallel
gives it.
"""
from typing import List, Optional, Sequence

import torch

from .traced_backward import backward_of, remember_module


def algorithm_of(algo: str) -> str:
    """`algo` without its plan options ("ring:pieces4h" -> "ring"): what a backward runs, as the ops'
    own autograd does."""
    return algo.split(":")[0]


def colwise_linears(x: torch.Tensor, weights: Sequence[torch.Tensor], biases: Sequence[Optional[torch.Tensor]],
                    gather_dim: int, group_name: str, algo: str = "auto",
                    gathered_size: Optional[int] = None) -> List[torch.Tensor]:
    """y_i = all_gather(x, gather_dim) @ weights[i]^T + biases[i], for every i, with one all-gather of x:
    one fused_all_gather_matmul of the weights side by side (one GEMM per chunk, the gather
    overlapped with it). Backward: one reduce-scatter of x's gradient (the op's autograd) and each
    weight's gradient from the gathered x. Each y_i is a view of the one output."""
    w = weights[0] if len(weights) == 1 else torch.cat(list(weights), 0)
    _, (y,) = torch.ops.collmm.fused_all_gather_matmul(x, [w.t()], gather_dim, group_name, return_A=True, algo=algo,
                                                       gathered_size=gathered_size)
    ys = [y] if len(weights) == 1 else list(y.split([t.shape[0] for t in weights], dim=-1))
    return [yi if b is None else yi + b for yi, b in zip(ys, biases)]


class _RowwiseLinear(torch.autograd.Function):
    """y = reduce_scatter(h @ w^T, d) + b; backward from one all-gather of dy (see rowwise_linear)."""

    @staticmethod
    def forward(ctx, h, w, b, d, group_name, algo, scatter_size):
        y = torch.ops.collmm.fused_matmul_reduce_scatter(h, w.t(), "sum", d, group_name, algo=algo,
                                                         scatter_size=scatter_size)
        ctx.save_for_backward(h, w)
        remember_module(ctx)
        ctx.d, ctx.group_name, ctx.algo, ctx.total = d, group_name, algorithm_of(algo), h.shape[d]
        return y + b

    @staticmethod
    def backward(ctx, dy):
        h, w = ctx.saved_tensors
        with backward_of(ctx):
            gathered, (dh,) = torch.ops.collmm.fused_all_gather_matmul(dy, [w], ctx.d, ctx.group_name, return_A=True,
                                                                       algo=ctx.algo, gathered_size=ctx.total)
        flat = gathered.flatten(0, -2)
        dw = flat.t().mm(h.flatten(0, -2)) if ctx.needs_input_grad[1] else None
        db = flat.sum(0) if ctx.needs_input_grad[2] else None
        return dh if ctx.needs_input_grad[0] else None, dw, db, None, None, None, None


def rowwise_linear(h: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], scatter_dim: int,
                   group_name: str, algo: str = "auto", scatter_size: Optional[int] = None) -> torch.Tensor:
    """y = reduce_scatter(h @ weight^T, scatter_dim) + bias (this rank's `scatter_size` rows), the
    bias whole on every rank. Its gradient is the column sums of the all-gathered dy that the
    backward's fused_all_gather_matmul returns: whole on every rank, no collective of its own."""
    if bias is None:  # the op's own autograd (C++)
        return torch.ops.collmm.fused_matmul_reduce_scatter(h, weight.t(), "sum", scatter_dim, group_name, algo=algo,
                                                            scatter_size=scatter_size)
    return _RowwiseLinear.apply(h, weight, bias, scatter_dim % h.dim(), group_name, algo, scatter_size)
