"""Tensor-parallel linear layers on collmm's ops, sequence-parallel as in Megatron-LM.

With P ranks in `group`, a ColumnParallelLinear(K, N) holds rows block r of the [N, K] weight
(block_size(N, P, r) output features) and a RowParallelLinear(K, N) columns block r (input
features). Activations between them follow Megatron's sequence parallelism:

    x_r [s_r, b, K]  --ColumnParallelLinear-->  h_r [s, b, N_r]  --(elementwise)-->
    h_r [s, b, N_r]  --RowParallelLinear----->  y_r [s_r, b, K']      (s = sum of s_r, dim 0 split)

    ColumnParallelLinear  forward   h_r  = all_gather(x) @ W_r^T + b_r    fused_all_gather_matmul
                          backward  dx_r = block r of sum_q dh_q @ W_q  fused_matmul_reduce_scatter
                                    dW_r = dh_r^T @ all_gather(x)         (the gathered x of the forward)
    RowParallelLinear     forward   y_r  = block r of sum_q h_q @ W_q^T + b   fused_matmul_reduce_scatter
                          backward  dh_r = all_gather(dy) @ W_r             fused_all_gather_matmul
                                    dW_r = all_gather(dy)^T @ h_r          (the gathered dy of that op)
                                    db   = sum over the group of dy's column sums (b is replicated)

Each rank's s_r is its own (any split of the sequence; by default RowParallelLinear gives rank r
block_size(s, P, r)). Weights are read in place (W^T as a transposed view); outputs and gradients
equal those of the unsharded torch.nn.Linear (tested).

Parameters that every rank holds whole in a sequence-parallel block (a LayerNorm's weight and bias,
a bias added to the sharded activations) see only this rank's rows: after backward, all-reduce their
gradients over the group before the optimizer step::

    for p in norm.parameters():
        dist.all_reduce(p.grad, group=group)

(RowParallelLinear's bias does this itself.) shard() cuts an input into this rank's block;
gather_state_dict() and load_full_state_dict() turn a sharded model's state_dict into the unsharded
model's and back.
"""
from typing import Dict, Optional, Union

import torch
import torch.distributed as dist
from torch import nn

from .ops import block_size, group_name_of, process_group_of

Group = Union[None, str, dist.ProcessGroup]


class _AllGatherMatmul(torch.autograd.Function):
    """y = all_gather(x) @ w.t(); its input gradient is the dual op, its weight gradient reuses the gathered x."""

    @staticmethod
    def forward(ctx, x, weight, group_name: str, algo: str, gathered_size: Optional[int]):
        gathered, (y,) = torch.ops.collmm.fused_all_gather_matmul(
            x.contiguous(), [weight.t()], 0, group_name, return_A=True, algo=algo, gathered_size=gathered_size
        )
        ctx.save_for_backward(gathered, weight)
        ctx.group_name, ctx.algo, ctx.rows = group_name, algo, x.shape[0]
        return y

    @staticmethod
    def backward(ctx, dy):
        gathered, weight = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.ops.collmm.fused_matmul_reduce_scatter(dy, weight, "sum", 0, ctx.group_name, algo=ctx.algo,
                                                          scatter_size=ctx.rows)
        dw = dy.flatten(0, -2).t() @ gathered.flatten(0, -2)
        return dx, dw, None, None, None


class _MatmulReduceScatter(torch.autograd.Function):
    """y = reduce_scatter(h @ w.t()); its input gradient is the dual op, whose gathered dy gives the weight gradient."""

    @staticmethod
    def forward(ctx, h, weight, group_name: str, algo: str, scatter_size: Optional[int]):
        h = h.contiguous()
        y = torch.ops.collmm.fused_matmul_reduce_scatter(h, weight.t(), "sum", 0, group_name, algo=algo,
                                                         scatter_size=scatter_size)
        ctx.save_for_backward(h, weight)
        ctx.group_name, ctx.algo = group_name, algo
        return y

    @staticmethod
    def backward(ctx, dy):
        h, weight = ctx.saved_tensors
        gathered_dy, (dh,) = torch.ops.collmm.fused_all_gather_matmul(
            dy.contiguous(), [weight], 0, ctx.group_name, return_A=True, algo=ctx.algo, gathered_size=h.shape[0]
        )
        dw = gathered_dy.flatten(0, -2).t() @ h.flatten(0, -2)
        return dh, dw, None, None, None


class _AddReplicatedBias(torch.autograd.Function):
    """y + bias for a bias every rank holds whole; its gradient is summed over the group's rows."""

    @staticmethod
    def forward(ctx, y, bias, group_name: str):
        ctx.group_name = group_name
        return y + bias

    @staticmethod
    def backward(ctx, dy):
        db = dy.reshape(-1, dy.shape[-1]).sum(0)
        # c10d's functional all_reduce names the group, as the ops do: traceable, holds no group.
        db = torch.ops._c10d_functional.wait_tensor(torch.ops._c10d_functional.all_reduce(db, "sum", ctx.group_name))
        return dy, db, None


def _block(total: int, group: dist.ProcessGroup) -> slice:
    rank, world = group.rank(), group.size()
    first = sum(block_size(total, world, q) for q in range(rank))
    return slice(first, first + block_size(total, world, rank))


def shard(x: torch.Tensor, dim: int = 0, group: Group = None) -> torch.Tensor:
    """This rank's block of `x` along `dim` (collmm's split: rank r gets block_size(x.size(dim), P, r)
    elements, the first x.size(dim) % P ranks one more), as a contiguous copy."""
    b = _block(x.shape[dim], process_group_of(group))
    return x.narrow(dim, b.start, b.stop - b.start).contiguous()


def _gather_blocks(t: torch.Tensor, dim: int, total: int, group: dist.ProcessGroup) -> torch.Tensor:
    """The blocks of every rank (collmm's split of `total` along `dim`) put back together."""
    world = group.size()
    most = block_size(total, world, 0)
    pad = [0, 0] * (t.dim() - 1 - dim) + [0, most - t.shape[dim]]
    parts = [torch.empty_like(nn.functional.pad(t, pad)) for _ in range(world)]
    dist.all_gather(parts, nn.functional.pad(t, pad).contiguous(), group=group)
    return torch.cat([p.narrow(dim, 0, block_size(total, world, q)) for q, p in enumerate(parts)], dim)


class _ParallelLinear(nn.Module):
    """What both layers share: the weight [out_features, in_features] cut along dim `_split` (0: the
    output features, 1: the input features) into this rank's block, which starts at `first`; the
    bias, cut with the output features or held whole; from_linear and the full weight's load and gather."""

    _split = 0

    def __init__(self, in_features: int, out_features: int, bias: bool = True, group: Group = None,
                 algo: str = "auto", device=None, dtype=None):
        super().__init__()
        pg = process_group_of(group)
        self.in_features, self.out_features = in_features, out_features
        # The group by name only: a layer that held the ProcessGroup would keep it (and gloo's worker
        # threads) alive past destroy_process_group, into the interpreter's exit, where a worker
        # that frees a finished collective's tensors aborts the process (it cannot take the GIL).
        self.group_name, self.algo = group_name_of(pg), algo
        shape = [out_features, in_features]
        block = _block(shape[self._split], pg)
        self.first, shape[self._split] = block.start, block.stop - block.start
        self.weight = nn.Parameter(torch.empty(*shape, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(shape[0], device=device, dtype=dtype)) if bias else None
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)

    @classmethod
    def from_linear(cls, linear: nn.Linear, group: Group = None, algo: str = "auto"):
        """This rank's shard of `linear` (same on every rank): its block of the weight, and of the bias
        where the bias is cut."""
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group, algo,
                    linear.weight.device, linear.weight.dtype)
        layer._load_full(linear.weight, linear.bias)
        return layer

    def _load_full(self, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> None:
        with torch.no_grad():
            self.weight.copy_(weight.narrow(self._split, self.first, self.weight.shape[self._split]))
            if self.bias is not None:
                self.bias.copy_(bias.narrow(0, self.first, self.bias.shape[0]) if self._split == 0 else bias)

    def _full(self) -> Dict[str, torch.Tensor]:
        total = (self.out_features, self.in_features)[self._split]
        group = process_group_of(self.group_name)
        out = {"weight": _gather_blocks(self.weight.detach(), self._split, total, group)}
        if self.bias is not None:
            bias = self.bias.detach()
            out["bias"] = _gather_blocks(bias, 0, total, group) if self._split == 0 else bias.clone()
        return out


class ColumnParallelLinear(_ParallelLinear):
    """nn.Linear(in_features, out_features) with the output features split over `group` (this rank:
    block r of them, `local_out` features); input sequence-parallel (dim 0 split, any sizes), output
    full along dim 0.

    Args: in_features, out_features, bias (as nn.Linear), group (a ProcessGroup, its name, or None:
    the default group), algo ("auto" or one of collmm.ALGOS), device, dtype.
    forward(x, gathered_size=None): x is [s_r, ..., in_features]; the result [s, ..., N_r] with
    s = sum of every rank's s_r. gathered_size (s) is only for torch.compile with uneven shards.
    from_linear(linear, group=None, algo="auto"): this rank's shard of `linear` (the same on every
    rank): rows block r of its weight and bias.
    """

    _split = 0

    @property
    def local_out(self) -> int:
        return self.weight.shape[0]

    def forward(self, x: torch.Tensor, gathered_size: Optional[int] = None) -> torch.Tensor:
        y = _AllGatherMatmul.apply(x, self.weight, self.group_name, self.algo, gathered_size)
        return y + self.bias if self.bias is not None else y


class RowParallelLinear(_ParallelLinear):
    """nn.Linear(in_features, out_features) with the input features split over `group` (this rank:
    block r of them, `local_in` features); input full along dim 0, output sequence-parallel (dim 0 split).

    Args: in_features, out_features, bias (as nn.Linear: held whole by every rank, added to this
    rank's rows after the reduce-scatter; its gradient is summed over the group), group (a
    ProcessGroup, its name, or None), algo, device, dtype.
    forward(h, scatter_size=None): h is [s, ..., K_r]; the result [s_r, ..., out_features] with s_r
    = scatter_size (this rank's rows: any split of s), by default block_size(s, P, r).
    from_linear(linear, group=None, algo="auto"): this rank's shard of `linear` (the same on every
    rank): columns block r of its weight, its whole bias.
    """

    _split = 1

    @property
    def local_in(self) -> int:
        return self.weight.shape[1]

    def forward(self, h: torch.Tensor, scatter_size: Optional[int] = None) -> torch.Tensor:
        y = _MatmulReduceScatter.apply(h, self.weight, self.group_name, self.algo, scatter_size)
        return _AddReplicatedBias.apply(y, self.bias, self.group_name) if self.bias is not None else y


_PARALLEL = (ColumnParallelLinear, RowParallelLinear)


def gather_state_dict(model: nn.Module) -> Dict[str, torch.Tensor]:
    """The state_dict of the unsharded model: `model`'s, with every ColumnParallelLinear and
    RowParallelLinear weight (and sharded bias) gathered whole from its group (collective: call it
    on every rank). Loads into the same model built of nn.Linear."""
    state = dict(model.state_dict())
    for prefix, module in model.named_modules():
        if isinstance(module, _PARALLEL):
            for name, full in module._full().items():
                state[f"{prefix}.{name}" if prefix else name] = full
    return state


def load_full_state_dict(model: nn.Module, state: Dict[str, torch.Tensor]) -> None:
    """Loads the unsharded model's state_dict into sharded `model`: each ColumnParallelLinear and
    RowParallelLinear takes its rank's block of the full weight (and bias); the rest loads as is."""
    rest, handled = dict(state), set()
    for prefix, module in model.named_modules():
        if isinstance(module, _PARALLEL):
            key = f"{prefix}." if prefix else ""
            if key + "weight" not in rest:
                raise ValueError(f"collmm: the state_dict lacks {key}weight")
            module._load_full(rest.pop(key + "weight"), rest.pop(key + "bias", None))
            handled |= {key + "weight", key + "bias"}
    result = model.load_state_dict(rest, strict=False)
    missing = [k for k in result.missing_keys if k not in handled]
    if missing or result.unexpected_keys:
        raise ValueError(f"collmm: the state_dict lacks {missing}, has unexpected {result.unexpected_keys}")


__all__ = ["ColumnParallelLinear", "RowParallelLinear", "shard", "gather_state_dict", "load_full_state_dict"]
