"""collmm's tensor-parallel modules for torchtitan 0.3.0: subclasses of its fused modules
(torchtitan/models/common/dist_gemm.py) and their Configs, on the Functions of linear.py.

torchtitan's sharding setup recognises them by isinstance (models/common/decoder_sharding.py):
the attention block and the FFN declare no boundary all-gather, wo and w2 no reduce-scatter, and
the parameters keep the stock layouts and checkpoint names. Under spmd_types a layer gets plain
local tensors: x [B, S_r, D] (rank r's block of the sequence, any S_r), weights as stored.

    QKV (fused wqkv, or separate wq/wk/wv)   one AG+GEMM: [B, S_r, D] -> q, k, v [B, S, heads_r, hd]
    FeedForward                              one AG+GEMM for w1 and w3 (biases allowed), then w2's
                                             GEMM+RS back to [B, S_r, D]
    RowParallelLinear (wo)                   GEMM+RS: [B, S, K_r] -> [B, S_r, N]
    AllReduceLinear (wo, w2 without SP)      GEMM+AR: [B, S, K_r] -> [B, S, N], whole on every rank

The rows are flattened sequence-major ([S_r * B, D]) so that the gather concatenates whole
sequence blocks. A rank's share S_r of the sequence is collmm's split, block_size(S, R, r) (the
first S % R ranks one token more): the output of RowParallelLinear gives each rank back the
S_r * B rows it gave. Without a TP group (no spmd mesh with a "tp" axis, or one rank) every
module runs torchtitan's stock forward.
"""
from dataclasses import dataclass, fields
from typing import Optional, Tuple

import spmd_types as spmd
import torch
import torch.distributed as dist
import torch.nn.functional as F

from torchtitan.distributed.spmd_types import current_spmd_mesh
from torchtitan.models.common import dist_gemm
from torchtitan.models.common.attention import FusedQKVLinear, QKVLinear
from torchtitan.models.common.feed_forward import FeedForward as StockFeedForward
from torchtitan.models.common.linear import Linear

from ..ops import block_size
from .linear import AllGatherLinear, AllGatherLinearMulti, LinearAllReduce, LinearReduceScatter


def tp_group() -> Optional[dist.ProcessGroup]:
    """The TP group of the current spmd_types mesh (set by torchtitan's train context), or None
    where there is none or it has one rank."""
    mesh = current_spmd_mesh()
    if mesh is None or "tp" not in (mesh.mesh_dim_names or ()):
        return None
    group = mesh.get_group("tp")
    return group if group.size() > 1 else None


def retype(config, cls):
    """`config` as an instance of Config class `cls` (a subclass or a sibling with the same
    fields), every field carried over."""
    return cls(**{f.name: getattr(config, f.name) for f in fields(config) if f.init})


def _seq_major(x: torch.Tensor) -> torch.Tensor:
    """[B, S, D] -> [S * B, D]: the sequence outermost, so that a gather or scatter of rows
    moves whole blocks of the sequence."""
    return x.transpose(0, 1).reshape(-1, x.shape[-1]).contiguous()


def _batch_major(rows: torch.Tensor, batch: int) -> torch.Tensor:
    """[S * B, N] -> [B, S, N]."""
    return rows.view(-1, batch, rows.shape[-1]).transpose(0, 1)


def _heads(rows: torch.Tensor, batch: int, head_dim: int) -> torch.Tensor:
    """[S * B, heads * hd] -> [B, S, heads, hd], contiguous."""
    return _batch_major(rows, batch).reshape(batch, -1, rows.shape[-1] // head_dim, head_dim).contiguous()


# The SPMD types of the outputs, as torchtitan's sharding declares them (decoder_sharding.py), for
# spmd_types' checker (debug.spmd_typechecking): the bodies run unchecked (local_map), their
# outputs get these types. q/k/v: the whole sequence, heads sharded; wo, w2: the sequence sharded;
# without SP: whole on every rank.
_HEADS = {"dp": spmd.S(0), "cp": spmd.S(1), "tp": spmd.S(2)}
_SEQUENCE = ({"dp": spmd.V, "cp": spmd.V, "tp": spmd.V}, spmd.PartitionSpec("dp", ("cp", "tp"), None))
_WHOLE = {"dp": spmd.S(0), "cp": spmd.S(1), "tp": spmd.I}


def _unchecked(out_types):
    """fn run as spmd_types' local region (no type propagation inside), its outputs typed."""
    def wrap(fn):
        def body(*args):
            with spmd.no_typecheck():
                return fn(*args)
        return spmd.local_map(out_types=out_types)(body)
    return wrap


def scatter_rows(seq_len: int, batch: int, group: dist.ProcessGroup) -> int:
    """This rank's rows of a sequence-major [seq_len * batch, N] split by sequence."""
    return block_size(seq_len, group.size(), group.rank()) * batch


class FusedQKV(dist_gemm.AllGatherFusedQKVLinear):
    """torchtitan's fused QKV projection (one wqkv), its all-gather in collmm's AG+GEMM."""

    @dataclass(kw_only=True, slots=True)
    class Config(dist_gemm.AllGatherFusedQKVLinear.Config):
        """The fields of torchtitan's; the subclass binds build() to collmm's module."""

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        group = tp_group()
        if group is None:
            return FusedQKVLinear.forward(self, x)
        return self._fused(x, group)

    @_unchecked((_HEADS,) * 3)
    def _fused(self, x, group):
        batch = x.shape[0]
        rows = AllGatherLinear.apply(_seq_major(x), self.wqkv.weight, self.wqkv.bias, group, group.group_name)
        qkv = _batch_major(rows, batch).reshape(batch, rows.shape[0] // batch, -1, self.r_dim, self.head_dim)
        xq, xk, xv = torch.split(qkv, [self.heads_per_kv, 1, 1], dim=-2)
        seq = qkv.shape[1]
        return tuple(t.reshape(batch, seq, -1, self.head_dim).contiguous() for t in (xq, xk, xv))


class SeparateQKV(QKVLinear):
    """torchtitan's separate wq/wk/wv projections sharing one all-gather (collmm's AG+GEMM with
    three weights). torchtitan's dist_gemm has no such path (it requires fuse_qkv=True)."""

    @dataclass(kw_only=True, slots=True)
    class Config(QKVLinear.Config):
        """The fields of torchtitan's QKVLinear; the subclass binds build() to collmm's module."""

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        group = tp_group()
        if group is None:
            return super().forward(x)
        return self._fused(x, group)

    @_unchecked((_HEADS,) * 3)
    def _fused(self, x, group):
        batch = x.shape[0]
        ys = AllGatherLinearMulti.apply(_seq_major(x), self.wq.weight, self.wk.weight, group, group.group_name,
                                        self.wq.bias, self.wk.bias, self.wv.weight, self.wv.bias)
        return tuple(_heads(y, batch, self.head_dim) for y in ys)


class RowParallelLinear(dist_gemm.RowParallelLinear):
    """torchtitan's row-parallel linear (attention's wo), its reduce-scatter in collmm's GEMM+RS;
    the output's sequence split is collmm's (any S % R)."""

    @dataclass(kw_only=True, slots=True)
    class Config(dist_gemm.RowParallelLinear.Config):
        """The fields of torchtitan's Linear; the subclass binds build() to collmm's module."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        group = tp_group()
        if group is None:
            return Linear.forward(self, input)
        return self._fused(input, group)

    @_unchecked(_SEQUENCE)
    def _fused(self, input, group):
        batch, seq = input.shape[0], input.shape[1]
        rows = LinearReduceScatter.apply(_seq_major(input), self.weight, self.bias, group, group.group_name,
                                         scatter_rows(seq, batch, group))
        return _batch_major(rows, batch).contiguous()


class AllReduceLinear(Linear):
    """A row-parallel linear without sequence parallelism (wo or w2 when
    enable_sequence_parallel is off): collmm's GEMM+AR, its output whole on every rank."""

    @dataclass(kw_only=True, slots=True)
    class Config(Linear.Config):
        """The fields of torchtitan's Linear; the subclass binds build() to collmm's module."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        group = tp_group()
        if group is None:
            return super().forward(input)
        return self._fused(input, group)

    @_unchecked(_WHOLE)
    def _fused(self, input, group):
        return LinearAllReduce.apply(input, self.weight, self.bias, group, group.group_name)


class FeedForward(dist_gemm.AllGatherFusedFeedForward):
    """torchtitan's SwiGLU FFN: one AG+GEMM for w1 and w3 (a bias on either allowed), w2's
    GEMM+RS back to this rank's rows of the sequence."""

    @dataclass(kw_only=True, slots=True)
    class Config(dist_gemm.AllGatherFusedFeedForward.Config):
        """The fields of torchtitan's FeedForward. Unlike torchtitan's, w1 and w3 may have a bias."""

        def __post_init__(self) -> None:  # torchtitan's refuses a bias on w1/w3: collmm adds it after the GEMM
            pass

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        group = tp_group()
        if group is None:
            return StockFeedForward.forward(self, x)
        return self._fused(x, group)

    @_unchecked(_SEQUENCE)
    def _fused(self, x, group):
        batch, seq_r = x.shape[0], x.shape[1]
        h1, h3 = AllGatherLinearMulti.apply(_seq_major(x), self.w1.weight, self.w3.weight, group, group.group_name,
                                            self.w1.bias, self.w3.bias)
        h = F.silu(h1) * h3
        rows = LinearReduceScatter.apply(h, self.w2.weight, self.w2.bias, group, group.group_name, seq_r * batch)
        return _batch_major(rows, batch).contiguous()


__all__ = ["AllReduceLinear", "FeedForward", "FusedQKV", "RowParallelLinear", "SeparateQKV", "retype", "tp_group"]
