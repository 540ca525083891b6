"""Tensor-parallel linear layers on collmm's ops, sequence-parallel as in Megatron-LM.

With P ranks in `group`, a ColumnParallelLinear(K, N) holds rows block r of the [N, K] weight
(block_size(N, P, r) output features) and a RowParallelLinear(K, N) columns block r (input
features). Activations between them follow Megatron's sequence parallelism:

    x_r [s_r, b, K]  --ColumnParallelLinear-->  h_r [s, b, N_r]  --(elementwise)-->
    h_r [s, b, N_r]  --RowParallelLinear----->  y_r [s_r, b, K']      (s = sum of s_r, dim 0 split)

    ColumnParallelLinear  forward   h_r  = all_gather(x) @ W_r^T          fused_all_gather_matmul
                          backward  dx_r = rows block r of sum_q dh_q @ W_q  fused_matmul_reduce_scatter
                                    dW_r = dh_r^T @ all_gather(x)         (the gathered x of the forward)
    RowParallelLinear     forward   y_r  = rows block r of sum_q h_q @ W_q^T  fused_matmul_reduce_scatter
                          backward  dh_r = all_gather(dy) @ W_r             fused_all_gather_matmul
                                    dW_r = all_gather(dy)^T @ h_r          (the gathered dy of that op)

Weights are read in place (W^T as a transposed view: layout nk); gradients equal those of the
unsharded torch.nn.Linear (tested). Rank r's rows of dim 0 (leading dims flattened) must be
collmm's split: block_size(total, P, r).
"""
from typing import Optional, Union

import torch
import torch.distributed as dist
from torch import nn

from .ops import block_size, group_name_of


class _AllGatherMatmul(torch.autograd.Function):
    """y = all_gather(x) @ w.t(); its input gradient is the dual op, its weight gradient reuses the gathered x."""

    @staticmethod
    def forward(ctx, x, weight, group_name: str, algo: str):
        gathered, (y,) = torch.ops.collmm.fused_all_gather_matmul(
            x.contiguous(), [weight.t()], 0, group_name, return_A=True, algo=algo
        )
        ctx.save_for_backward(gathered, weight)
        ctx.group_name, ctx.algo = group_name, algo
        return y

    @staticmethod
    def backward(ctx, dy):
        gathered, weight = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.ops.collmm.fused_matmul_reduce_scatter(dy, weight, "sum", 0, ctx.group_name, algo=ctx.algo)
        dw = dy.flatten(0, -2).t() @ gathered.flatten(0, -2)
        return dx, dw, None, None


class _MatmulReduceScatter(torch.autograd.Function):
    """y = reduce_scatter(h @ w.t()); its input gradient is the dual op, whose gathered dy gives the weight gradient."""

    @staticmethod
    def forward(ctx, h, weight, group_name: str, algo: str):
        h = h.contiguous()
        y = torch.ops.collmm.fused_matmul_reduce_scatter(h, weight.t(), "sum", 0, group_name, algo=algo)
        ctx.save_for_backward(h, weight)
        ctx.group_name, ctx.algo = group_name, algo
        return y

    @staticmethod
    def backward(ctx, dy):
        h, weight = ctx.saved_tensors
        gathered_dy, (dh,) = torch.ops.collmm.fused_all_gather_matmul(
            dy.contiguous(), [weight], 0, ctx.group_name, return_A=True, algo=ctx.algo
        )
        dw = gathered_dy.flatten(0, -2).t() @ h.flatten(0, -2)
        return dh, dw, None, None


def _rank_and_size(group) -> tuple:
    group = group if group is not None else dist.group.WORLD
    return dist.get_rank(group), dist.get_world_size(group)


class ColumnParallelLinear(nn.Module):
    """Output features split over the group; input sequence-parallel (dim 0 split), output full along dim 0."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 group: Union[None, str, dist.ProcessGroup] = None, algo: str = "auto", device=None, dtype=None):
        super().__init__()
        rank, world = _rank_and_size(group)
        self.in_features, self.out_features = in_features, out_features
        self.group_name, self.algo = group_name_of(group), algo
        self.first = sum(block_size(out_features, world, q) for q in range(rank))
        self.local_out = block_size(out_features, world, rank)
        self.weight = nn.Parameter(torch.empty(self.local_out, in_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(self.local_out, device=device, dtype=dtype)) if bias else None
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)

    @classmethod
    def from_linear(cls, linear: nn.Linear, group=None, algo: str = "auto") -> "ColumnParallelLinear":
        """This rank's shard of `linear` (same on every rank): rows block r of its weight and bias."""
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group, algo,
                    linear.weight.device, linear.weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(linear.weight[layer.first:layer.first + layer.local_out])
            if layer.bias is not None:
                layer.bias.copy_(linear.bias[layer.first:layer.first + layer.local_out])
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _AllGatherMatmul.apply(x, self.weight, self.group_name, self.algo)
        return y + self.bias if self.bias is not None else y


class RowParallelLinear(nn.Module):
    """Input features split over the group (input full along dim 0); output sequence-parallel (dim 0 split).

    No bias: a bias added after the reduce-scatter is replicated, and its gradient would need an
    all-reduce over the group that this layer does not do.
    """

    def __init__(self, in_features: int, out_features: int, group: Union[None, str, dist.ProcessGroup] = None,
                 algo: str = "auto", device=None, dtype=None):
        super().__init__()
        rank, world = _rank_and_size(group)
        self.in_features, self.out_features = in_features, out_features
        self.group_name, self.algo = group_name_of(group), algo
        self.first = sum(block_size(in_features, world, q) for q in range(rank))
        self.local_in = block_size(in_features, world, rank)
        self.weight = nn.Parameter(torch.empty(out_features, self.local_in, device=device, dtype=dtype))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)

    @classmethod
    def from_linear(cls, linear: nn.Linear, group=None, algo: str = "auto") -> "RowParallelLinear":
        """This rank's shard of `linear` (bias-free, same on every rank): columns block r of its weight."""
        if linear.bias is not None:
            raise ValueError("collmm: RowParallelLinear has no bias (see its docstring)")
        layer = cls(linear.in_features, linear.out_features, group, algo, linear.weight.device, linear.weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(linear.weight[:, layer.first:layer.first + layer.local_in])
        return layer

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return _MatmulReduceScatter.apply(h, self.weight, self.group_name, self.algo)


__all__ = ["ColumnParallelLinear", "RowParallelLinear"]
