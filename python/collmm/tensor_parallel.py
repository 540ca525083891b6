"""Tensor-parallel linear layers on collmm's ops, sequence-parallel as in Megatron-LM: nn.Linear
modules whose weight (and bias) are DTensors on the group's 1-D mesh, as collmm.torch.ColwiseParallel
and RowwiseParallel (collmm/parallel.py) make them and with their forward.

With P ranks in `group`, a ColumnParallelLinear(K, N) holds rows block r of the [N, K] weight
(Shard(0): torch.chunk's split, N_r output features). A RowParallelLinear(K, N) holds columns block
r (Shard(1): K_r input features). Built directly, a layer initializes as nn.Linear(K, N) of the full
size would, then is sharded: one weight drawn from the caller's RNG state, the full fan-in (rank
0's, scattered). from_linear takes an existing nn.Linear's. Activations between them follow
Megatron's sequence parallelism::

    x_r [s_r, b, K]  --ColumnParallelLinear-->  h_r [s, b, N_r]  --(elementwise)-->
    h_r [s, b, N_r]  --RowParallelLinear----->  y_r [s_r, b, K']      (s = sum of s_r, dim 0 split)

    ColumnParallelLinear  forward   h_r  = all_gather(x) @ W_r^T + b_r    fused_all_gather_matmul
                          backward  dx_r = block r of sum_q dh_q @ W_q    fused_matmul_reduce_scatter
                                    dW_r = dh_r^T @ all_gather(x)         (the gathered x of the forward)
    RowParallelLinear     forward   y_r  = block r of sum_q h_q @ W_q^T + b   fused_matmul_reduce_scatter
                          backward  dh_r = all_gather(dy) @ W_r             fused_all_gather_matmul
                                    dW_r = all_gather(dy)^T @ h_r          (the gathered dy of that op)
                                    db   = sum over the group of dy's column sums (b is replicated)

Each rank's s_r is its own (any split of the sequence). A RowParallelLinear gives each rank the rows
that the last ColumnParallelLinear input of the same length had there (its scatter_size argument
overrides that), so a block's output adds to its input. Weights are read in place (W^T as a
transposed view of the local shard); outputs and gradients equal those of the unsharded
torch.nn.Linear (tested).

Parameters that every rank holds whole in a sequence-parallel block (a LayerNorm's weight and bias,
a bias added to the sharded activations) see only this rank's rows. After backward, all-reduce their
gradients over the group before the optimizer step, or parallelize the norms with torch's
SequenceParallel, whose DTensor parameters get their gradients reduced::

    for p in norm.parameters():
        dist.all_reduce(p.grad, group=group)

(RowParallelLinear's bias does this itself.) RowParallelLinear(..., sequence_parallel=False) is
Megatron's row-parallel linear without sequence parallelism. Its input is h_r [s, ..., K_r], its
output y [s, ..., K'] whole on every rank: y = sum_q h_q @ W_q^T + b (fused_matmul_all_reduce).
Its backward, dh_r = dy @ W_r, has no communication.

shard() cuts an input into this rank's block. gather_state_dict() and load_full_state_dict() turn
a sharded model's state_dict into the unsharded model's and back (torch.distributed.checkpoint
saves and loads it sharded, at any world size). save_checkpoint(state, root, step) and
load_checkpoint(state, root) save and load with DCP so that a save killed part-way never tears a
checkpoint. They use a new directory per step and an atomic "latest" pointer, and the load takes
the newest complete step (collmm/checkpoint.py).
"""
from typing import Dict, Union

import torch
import torch.distributed as dist
from torch import nn

from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

from .checkpoint import load_checkpoint, save_checkpoint
from .ops import block_size, process_group_of
from .parallel import ColwiseForward, ColwiseParallel, RowwiseForward, RowwiseParallel, checked_algo, mesh_of
from .shared_gather import SharedGather

Group = Union[None, str, dist.ProcessGroup]


def _block(total: int, group: dist.ProcessGroup) -> slice:
    rank, world = group.rank(), group.size()
    first = sum(block_size(total, world, q) for q in range(rank))
    return slice(first, first + block_size(total, world, rank))


def shard(x: torch.Tensor, dim: int = 0, group: Group = None) -> torch.Tensor:
    """This rank's block of `x` along `dim` (collmm's split: rank r gets block_size(x.size(dim), P, r)
    elements, the first x.size(dim) % P ranks one more), as a contiguous copy."""
    b = _block(x.shape[dim], process_group_of(group))
    return x.narrow(dim, b.start, b.stop - b.start).contiguous()


class _ParallelLinear(nn.Linear):
    """What both layers share: nn.Linear(in_features, out_features) of the full size, initialized as
    nn.Linear initializes, then parallelized by `_style` (collmm's ColwiseParallel with a
    sequence-sharded input, or RowwiseParallel with a sequence-sharded output, along dim 0)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, group: Group = None,
                 algo: str = "auto", device=None, dtype=None, **mode):
        style = self._style(checked_algo(algo, type(self).__name__), **mode)
        mesh = mesh_of(group, device)
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        style._apply(self, mesh)

    @property
    def group_name(self) -> str:
        return self._collmm.group_name

    @property
    def algo(self) -> str:
        return self._collmm.algo

    @classmethod
    def from_linear(cls, linear: nn.Linear, group: Group = None, algo: str = "auto", **mode):
        """This rank's shard of `linear` (the same on every rank): its block of the weight, and of the
        bias where the bias is cut. `mode`: the layer's own keyword arguments (sequence_parallel)."""
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group, algo,
                    linear.weight.device, linear.weight.dtype, **mode)
        load_full_state_dict(layer, linear.state_dict())
        return layer


class ColumnParallelLinear(ColwiseForward, _ParallelLinear):
    """nn.Linear(in_features, out_features) with the output features split over `group` (this rank:
    block r of them, `local_out` features; weight and bias DTensors Shard(0)); input sequence-parallel
    (dim 0 split, any sizes), output full along dim 0.

    Args: in_features, out_features, bias (as nn.Linear), group (a ProcessGroup, its name, or None:
    the default group), algo ("auto", "ring", "ring:pieces4h": as the ops take it), device, dtype.
    forward(x, gathered_size=None): x is [s_r, ..., in_features] (a local tensor) or a DTensor
    Shard(0); the result [s, ..., N_r] with s = sum of every rank's s_r. gathered_size (s) is only
    for torch.compile with uneven shards of a local tensor.
    from_linear(linear, group=None, algo="auto"): this rank's shard of `linear` (the same on every
    rank): rows block r of its weight and bias.
    """

    @staticmethod
    def _style(algo: str) -> ColwiseParallel:
        return ColwiseParallel(input_layouts=Shard(0), algo=algo)

    @property
    def local_out(self) -> int:
        return self.weight.to_local().shape[0]


class RowParallelLinear(RowwiseForward, _ParallelLinear):
    """nn.Linear(in_features, out_features) with the input features split over `group` (this rank:
    block r of them, `local_in` features; weight a DTensor Shard(1)); input full along dim 0, output
    sequence-parallel (dim 0 split), or whole on every rank with sequence_parallel=False.

    Args: in_features, out_features, bias, group (a ProcessGroup, its name, or None), algo, device,
    dtype, and (keyword) sequence_parallel. The bias is as nn.Linear's: a DTensor Replicate() held
    whole by every rank, added to this rank's rows after the reduce-scatter. Its gradient, whole on
    every rank, comes from the backward's all-gather of dy. sequence_parallel: default True; False
    gives the output whole on every rank (collmm's GEMM + all-reduce).
    forward(h, scatter_size=None): h is [s, ..., K_r]; the result [s_r, ..., out_features] with
    s_r = scatter_size (this rank's rows: any split of s). By default s_r is the rows that the last
    ColumnParallelLinear input of length s had on this rank (else torch.chunk's split). With
    sequence_parallel=False, [s, ..., out_features].
    from_linear(linear, group=None, algo="auto", sequence_parallel=True): this rank's shard of `linear`
    (the same on every rank): columns block r of its weight, its whole bias.
    """

    @staticmethod
    def _style(algo: str, sequence_parallel: bool = True) -> RowwiseParallel:
        return RowwiseParallel(output_layouts=Shard(0) if sequence_parallel else Replicate(), algo=algo)

    @property
    def sequence_parallel(self) -> bool:
        return self._collmm.seq_dim is not None

    @property
    def local_in(self) -> int:
        return self.weight.to_local().shape[1]


def gather_state_dict(model: nn.Module) -> Dict[str, torch.Tensor]:
    """The state_dict of the unsharded model: `model`'s, with every DTensor (a parallel layer's weight
    and sharded bias) gathered whole (collective: call it on every rank). Loads into the same model
    built of nn.Linear."""
    return {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in model.state_dict().items()}


def load_full_state_dict(model: nn.Module, state: Dict[str, torch.Tensor]) -> None:
    """Loads the unsharded model's state_dict into sharded `model`: each DTensor entry takes this rank's
    shard of the full tensor (torch.chunk's split, as DTensor holds it); the rest loads as is."""
    mine = model.state_dict()
    missing = [k for k in mine if k not in state]
    unexpected = [k for k in state if k not in mine]
    if missing or unexpected:
        raise ValueError(f"collmm: the state_dict lacks {missing}, has unexpected {unexpected}")
    model.load_state_dict({k: distribute_tensor(state[k].to(v.device), v.device_mesh, v.placements, src_data_rank=None)
                           if isinstance(v, DTensor) else state[k] for k, v in mine.items()})


__all__ = ["ColumnParallelLinear", "RowParallelLinear", "ColwiseParallel", "RowwiseParallel", "SharedGather", "shard",
           "save_checkpoint", "load_checkpoint",
           "gather_state_dict", "load_full_state_dict"]
