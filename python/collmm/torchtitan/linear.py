"""Plain-tensor autograd Functions for torchtitan's tensor-parallel GEMMs, on collmm's ops.

The signatures are torchtitan 0.3.0's (torchtitan/distributed/linear.py): a sequence-major 2-D
activation shard, the weight shard(s) as stored ([N, K]), a bias or None, the TP group and its
name. Over R ranks, with M rows of sequence-major tokens split any way (rank r holds M_r):

    AllGatherLinear     x [M_r, K], w [N_r, K] -> y [M, N_r]   y = all_gather(x) @ w.T + b
    AllGatherLinearMulti                       -> (y_a, y_b[, y_c])  one gather, two or three GEMMs
    LinearReduceScatter x [M, K_r], w [N, K_r] -> y [M_r, N]   y = block r of sum_q x_q @ w_q.T, + b
    LinearAllReduce     x [M, K_r], w [N, K_r] -> y [M, N]     y = sum_q x_q @ w_q.T + b (no SP)

Backward, each through collmm's ops:

    AllGatherLinear(Multi)  dx = reduce_scatter(cat(dy_i) @ cat(w_i))   (this rank's M_r rows back)
                            dw_i = (all_gather(x_k.T) @ dy_i).T           (x_k: the K-block r of the
                                                                          gathered x, kept from forward)
    LinearReduceScatter     dx = all_gather(dy) @ w, dw = all_gather(dy).T @ x (the same gather),
                            db = all_reduce(sum of dy's rows)
    LinearAllReduce         dx = dy @ w, dw = dy.T @ x, db = sum of dy's rows (dy is whole everywhere)

Unlike torchtitan's: M_r may differ between ranks (any sequence length), w1/w3 (and q/k/v) may
carry biases, every call has its own buffers (several may be in flight), and CPU tensors (gloo)
run as CUDA tensors do. With spmd_types importable, each Function is registered with its
typecheck, as torchtitan registers its own.
"""
from typing import List, Optional, Tuple

import torch
import torch.distributed as dist

from ..ops import (block_size, fused_all_gather_matmul, fused_matmul_all_reduce,
                   fused_matmul_reduce_scatter)
from ..traced_backward import backward_of, remember_module

try:
    import spmd_types as spmd
except ImportError:  # torchtitan's typechecker is optional: without it the Functions run unchecked
    spmd = None


def _registered(cls):
    return spmd.register_autograd_function(cls) if spmd is not None else cls


def _k_block(x_full: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Columns block r of the gathered x (collmm's split of K), transposed and contiguous: [K_r, M],
    what backward gathers along dim 0 to get x.T whole."""
    rank, world, k = group.rank(), group.size(), x_full.shape[-1]
    first = sum(block_size(k, world, q) for q in range(rank))
    return x_full.narrow(-1, first, block_size(k, world, rank)).t().contiguous()


def _gather_linears(ctx, x, weights: List[torch.Tensor], biases: List[Optional[torch.Tensor]],
                    group: dist.ProcessGroup, group_name: str) -> List[torch.Tensor]:
    x = x.contiguous()
    x_full, ys = fused_all_gather_matmul(x, [w.t() for w in weights], 0, group_name)
    ys = [y if b is None else y + b for y, b in zip(ys, biases)]
    ctx.save_for_backward(_k_block(x_full, group), *weights)
    remember_module(ctx)
    ctx.group_name, ctx.rows = group_name, x.shape[0]
    ctx.has_bias = [b is not None for b in biases]
    return ys


def _gather_linears_backward(ctx, dys: List[torch.Tensor]) -> Tuple[torch.Tensor, List, List]:
    x_k, *weights = ctx.saved_tensors
    dys = [dy.contiguous() for dy in dys]
    dy_cat = dys[0] if len(dys) == 1 else torch.cat(dys, dim=1)
    w_cat = weights[0] if len(weights) == 1 else torch.cat(weights, dim=0)
    with backward_of(ctx):
        dx = fused_matmul_reduce_scatter(dy_cat, w_cat, "sum", 0, ctx.group_name, scatter_size=ctx.rows)
        _, dws = fused_all_gather_matmul(x_k, dys, 0, ctx.group_name, return_A=False)
    dbs = [dy.sum(0) if has else None for dy, has in zip(dys, ctx.has_bias)]
    return dx, [dw.t().contiguous() for dw in dws], dbs


def _check_gather_types(x, weights, biases, group):
    spmd.assert_type(x, {group: spmd.S(0)})
    for w in weights:  # w is stored [N, K]: its output features are dim 0
        spmd.assert_type(w, {group: spmd.S(0)})
    for b in biases:
        if b is not None:
            spmd.assert_type(b, {group: spmd.S(0)})
    return {**spmd.get_local_type(x), group: spmd.S(1)}


@_registered
class AllGatherLinear(torch.autograd.Function):
    """y [M, N_r] = all_gather(x [M_r, K]) @ w [N_r, K].T (+ bias [N_r]): column-parallel, its
    input sequence-sharded. apply(x, w, bias, group, group_name)."""

    @staticmethod
    def forward(ctx, x, w, bias, group, group_name):
        return _gather_linears(ctx, x, [w], [bias], group, group_name)[0]

    @staticmethod
    def backward(ctx, dy):
        dx, (dw,), (db,) = _gather_linears_backward(ctx, [dy])
        return dx, dw, db, None, None

    @staticmethod
    def typecheck_forward(x, w, bias, group, group_name):
        out_type = _check_gather_types(x, [w], [bias], group)
        y = AllGatherLinear.apply(x, w, bias, group, group_name)
        spmd.assert_type(y, out_type)
        return y


@_registered
class AllGatherLinearMulti(torch.autograd.Function):
    """One all-gather of x [M_r, K] feeding two or three column-parallel linears (w1/w3, or q/k/v):
    apply(x, wa, wb, group, group_name[, ba, bb[, wc, bc]]) -> (y_a, y_b) or (y_a, y_b, y_c).
    The first five arguments are torchtitan's; biases and a third weight are optional (None).
    Fixed slots rather than *weights: Dynamo cannot trace a Function's tensors passed as *args."""

    @staticmethod
    def forward(ctx, x, wa, wb, group, group_name, ba=None, bb=None, wc=None, bc=None):
        weights, biases = [wa, wb], [ba, bb]
        if wc is not None:
            weights.append(wc)
            biases.append(bc)
        elif bc is not None:
            raise ValueError("collmm: AllGatherLinearMulti: bc given without wc")
        return tuple(_gather_linears(ctx, x, weights, biases, group, group_name))

    @staticmethod
    def backward(ctx, *dys):
        dx, dws, dbs = _gather_linears_backward(ctx, list(dys))
        third = (dws[2], dbs[2]) if len(dws) == 3 else (None, None)
        return dx, dws[0], dws[1], None, None, dbs[0], dbs[1], *third

    @staticmethod
    def typecheck_forward(x, wa, wb, group, group_name, ba=None, bb=None, wc=None, bc=None):
        weights = [w for w in (wa, wb, wc) if w is not None]
        out_type = _check_gather_types(x, weights, [ba, bb, bc], group)
        ys = AllGatherLinearMulti.apply(x, wa, wb, group, group_name, ba, bb, wc, bc)
        for y in ys:
            spmd.assert_type(y, out_type)
        return ys


@_registered
class LinearReduceScatter(torch.autograd.Function):
    """y [M_r, N] = block r of sum_q x_q [M, K_q] @ w_q [N, K_q].T (+ bias [N], whole on every
    rank): row-parallel, its output sequence-sharded. apply(x, w, bias, group, group_name
    [, scatter_size]): scatter_size is this rank's M_r (default: collmm's split of M, the first
    M % R ranks one row more)."""

    @staticmethod
    def forward(ctx, x, w, bias, group, group_name, scatter_size=None):
        x = x.contiguous()
        y = fused_matmul_reduce_scatter(x, w.t(), "sum", 0, group_name, scatter_size=scatter_size)
        if bias is not None:
            y = y + bias
        ctx.save_for_backward(x, w)
        remember_module(ctx)
        ctx.group, ctx.group_name, ctx.has_bias = group, group_name, bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dy = dy.contiguous()
        with backward_of(ctx):
            dy_full, (dx,) = fused_all_gather_matmul(dy, [w], 0, ctx.group_name)
        dw = torch.mm(dy_full.t(), x)
        db = None
        if ctx.has_bias:  # each rank saw its own rows of dy: the bias's gradient sums them all
            db = dy.sum(0)
            dist.all_reduce(db, group=ctx.group)
        return dx, dw, db, None, None, None

    @staticmethod
    def typecheck_forward(x, w, bias, group, group_name, scatter_size=None):
        spmd.assert_type(x, {group: spmd.S(1)})
        spmd.assert_type(w, {group: spmd.S(1)})  # stored [N, K]: its input features are dim 1
        if bias is not None:
            spmd.assert_type(bias, {group: spmd.R})
        y = LinearReduceScatter.apply(x, w, bias, group, group_name, scatter_size)
        spmd.assert_type(y, {**spmd.get_local_type(x), group: spmd.S(0)})
        return y


@_registered
class LinearAllReduce(torch.autograd.Function):
    """y [M, N] = sum_q x_q [M, K_q] @ w_q [N, K_q].T (+ bias [N]), whole on every rank:
    row-parallel without sequence parallelism (collmm's GEMM + all-reduce).
    apply(x, w, bias, group, group_name). x may have any dims before K."""

    @staticmethod
    def forward(ctx, x, w, bias, group, group_name):
        y = fused_matmul_all_reduce(x, w.t(), "sum", group_name)
        if bias is not None:
            y = y + bias
        ctx.save_for_backward(x, w)
        ctx.has_bias = bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx = dy @ w
        dw = dy.reshape(-1, dy.shape[-1]).t() @ x.reshape(-1, x.shape[-1])
        db = dy.reshape(-1, dy.shape[-1]).sum(0) if ctx.has_bias else None
        return dx, dw, db, None, None

    @staticmethod
    def typecheck_forward(x, w, bias, group, group_name):
        spmd.assert_type(x, {group: spmd.S(-1) if x.dim() > 0 else spmd.V})
        spmd.assert_type(w, {group: spmd.S(1)})
        if bias is not None:
            spmd.assert_type(bias, {group: spmd.I})
        y = LinearAllReduce.apply(x, w, bias, group, group_name)
        spmd.assert_type(y, {**spmd.get_local_type(x), group: spmd.I})
        return y


__all__ = ["AllGatherLinear", "AllGatherLinearMulti", "LinearAllReduce", "LinearReduceScatter"]
