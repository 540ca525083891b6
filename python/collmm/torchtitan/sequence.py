"""The model's two sequence-parallel boundaries for any split of the sequence, and the modules
that hold them.

torchtitan's own (spmd_types' reduce-scatter after the vocab-parallel embedding, its all-gather
before the last norm's output reaches lm_head) split the sequence evenly and its trainer refuses a
seq_len that TP does not divide. These split it as collmm's layers do: rank r holds
block_size(S, R, r) tokens (the first S % R ranks one more):

    scatter_sequence  x [B, S, D], partial over the group -> [B, S_r, D] summed   (backward: gather)
    gather_sequence   x [B, S_r, D] -> [B, S, D] on every rank          (backward: reduce-scatter)

The gather pads every block to the largest (gloo's all_gather takes equal sizes only).
"""
from dataclasses import dataclass
from typing import Dict, List

import spmd_types as spmd
import torch
import torch.distributed as dist
from torchtitan.models.common.decoder_sharding import dense_activation_placement, dense_sequence_parallel_placement
from torchtitan.models.common.embedding import Embedding
from torchtitan.models.common.nn_modules import RMSNorm

from ..ops import block_size
from .modules import tp_group


def _sizes(total: int, group: dist.ProcessGroup) -> List[int]:
    return [block_size(total, group.size(), q) for q in range(group.size())]


def _reduce_scatter(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """[B, S, ...] summed over the group, this rank's block of S."""
    sizes = _sizes(x.shape[1], group)
    blocks = [b.contiguous() for b in torch.split(x, sizes, dim=1)]
    out = torch.empty_like(blocks[group.rank()])
    dist.reduce_scatter(out, blocks, group=group)
    return out


def _all_gather(x: torch.Tensor, group: dist.ProcessGroup, total: int) -> torch.Tensor:
    """[B, S_r, ...] -> [B, S, ...]: every rank's block, in rank order."""
    sizes = _sizes(total, group)
    if x.shape[1] != sizes[group.rank()]:
        raise ValueError(f"collmm: rank {group.rank()} holds {x.shape[1]} tokens of a sequence of {total}, "
                         f"collmm's split gives it {sizes[group.rank()]}")
    longest = max(sizes)
    padded = torch.zeros((x.shape[0], longest, *x.shape[2:]), dtype=x.dtype, device=x.device)
    padded[:, : x.shape[1]] = x
    gathered = torch.empty((group.size() * padded.shape[0], *padded.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, padded, group=group)  # rank q's block is rows q*B .. (q+1)*B
    gathered = gathered.view(group.size(), *padded.shape)
    return torch.cat([gathered[q, :, : sizes[q]] for q in range(group.size())], dim=1)


# The length of the sequence last scattered on each group (by group name): the gather before
# lm_head restores that length, which no rank can tell from its own block alone.
_scattered_length: Dict[str, int] = {}


def _assert_layout(x: torch.Tensor, layout) -> None:
    spmd.assert_type(x, layout.axis_types, layout.partition_spec)


@spmd.register_autograd_function
class _ScatterSequence(torch.autograd.Function):
    """Typed as torchtitan types the redistribution it replaces: partial -> sequence-parallel."""
    @staticmethod
    def forward(ctx, x, group):
        ctx.group, ctx.total = group, x.shape[1]
        _scattered_length[group.group_name] = x.shape[1]
        return _reduce_scatter(x, group)

    @staticmethod
    def backward(ctx, dy):
        return _all_gather(dy.contiguous(), ctx.group, ctx.total), None

    @staticmethod
    def typecheck_forward(x, group):
        _assert_layout(x, dense_activation_placement(tp=spmd.P))
        y = _ScatterSequence.apply(x, group)
        _assert_layout(y, dense_sequence_parallel_placement())
        return y


@spmd.register_autograd_function
class _GatherSequence(torch.autograd.Function):
    """Typed as torchtitan types the redistribution it replaces: sequence-parallel -> replicated."""
    @staticmethod
    def forward(ctx, x, group, total):
        ctx.group = group
        return _all_gather(x.contiguous(), group, total)

    @staticmethod
    def backward(ctx, dy):
        return _reduce_scatter(dy.contiguous(), ctx.group), None, None

    @staticmethod
    def typecheck_forward(x, group, total):
        _assert_layout(x, dense_sequence_parallel_placement())
        y = _GatherSequence.apply(x, group, total)
        _assert_layout(y, dense_activation_placement(tp=spmd.R))
        return y


def scatter_sequence(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """x [B, S, D] partial over `group` (each rank's addend) -> the sum's block r of S."""
    return _ScatterSequence.apply(x, group)


def gather_sequence(x: torch.Tensor, group: dist.ProcessGroup, total: int) -> torch.Tensor:
    """x [B, S_r, D] -> [B, total, D], every rank's block."""
    return _GatherSequence.apply(x, group, total)


class SequenceScatterEmbedding(Embedding):
    """torchtitan's vocab-parallel embedding whose partial output is reduce-scattered over the
    sequence by collmm's split (any S % TP) instead of by spmd_types' even one."""

    @dataclass(kw_only=True, slots=True)
    class Config(Embedding.Config):
        """The fields of torchtitan's Embedding; the subclass binds build() to this module."""

    def parallelize(self, parallel_dims) -> None:
        config = self._sharding_config
        if config is not None and parallel_dims.tp > 1:
            config.out_dst_shardings = None  # the output stays partial: forward below scatters it
            super().parallelize(parallel_dims)
            local = self.forward

            def forward(input):
                return scatter_sequence(local(input), self.tp_group)

            self.forward = forward
        else:
            super().parallelize(parallel_dims)


class SequenceGatherNorm(RMSNorm):
    """The last RMSNorm before lm_head: normalizes this rank's tokens, then gathers the sequence by
    collmm's split (any S % TP) instead of spmd_types' even all-gather, back to the length that
    SequenceScatterEmbedding last scattered on the group."""

    @dataclass(kw_only=True, slots=True)
    class Config(RMSNorm.Config):
        """The fields of torchtitan's RMSNorm; the subclass binds build() to this module."""

    def parallelize(self, parallel_dims) -> None:
        config = self._sharding_config
        if config is not None and parallel_dims.tp > 1:
            config.out_dst_shardings = None  # the output stays sequence-sharded: forward gathers it
            super().parallelize(parallel_dims)
            local = self.forward

            def forward(input):
                group = tp_group()
                if group is None:
                    return local(input)
                return gather_sequence(local(input), group, _scattered_length[group.group_name])

            self.forward = forward
        else:
            super().parallelize(parallel_dims)


__all__ = ["SequenceGatherNorm", "SequenceScatterEmbedding", "gather_sequence", "scatter_sequence"]
