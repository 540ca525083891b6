"""The Python ops (collmm.fused_all_gather_matmul, collmm.fused_matmul_reduce_scatter) on DTensors.

A DTensor names its group (its 1-D mesh), its shard and its global shape, so the op needs neither a
group nor a size:

    fused_all_gather_matmul(A Shard(gather_dim), [B Shard(1) | Replicate() | plain, ...])
        -> (A Replicate(), [C Shard(-1) | Replicate() | a plain tensor, ...])
    fused_matmul_reduce_scatter(A Shard(-1), B Shard(0))  -> C Shard(scatter_dim), torch.chunk's split
    fused_matmul_all_reduce(A Shard(-1), B Shard(0))      -> C Replicate()

The dispatcher ops (torch.ops.collmm.*) take local tensors only: DTensor's dispatch refuses them,
and the Python ops above are what to call instead.
"""
from typing import List, Optional, Sequence

import torch
from torch.distributed.tensor import DTensor, Placement, Replicate, Shard


def _strides(shape: Sequence[int]) -> List[int]:
    out, step = [], 1
    for size in reversed(list(shape)):
        out.append(step)
        step *= size
    return out[::-1]


def as_dtensor(local: torch.Tensor, mesh, placement: Placement, shape: Sequence[int]) -> DTensor:
    """`local` (this rank's part) as a DTensor of global `shape`, contiguous."""
    return DTensor.from_local(local, mesh, [placement], run_check=False, shape=torch.Size(shape),
                              stride=tuple(_strides(shape)))


def _refuse(what: str, t: DTensor, want: str) -> None:
    raise ValueError(f"collmm: {what} is a DTensor with placements {t.placements} on a {t.device_mesh.ndim}-D mesh; "
                     f"pass {want} on a 1-D mesh (or local tensors: {what}.to_local())")


def _refuse_plain(name: str) -> None:
    raise ValueError(f"collmm: {name} is a plain tensor beside a DTensor: pass DTensors for A and B (or plain "
                     "local tensors for both, with the group)")


def _shard_dim(t: DTensor) -> Optional[int]:
    p = t.placements[0] if t.device_mesh.ndim == 1 else None
    return p.dim % t.dim() if isinstance(p, Shard) else None


def chunk_size(total: int, parts: int, q: int) -> int:
    """Rank q's share of `total` as torch.chunk (and DTensor's Shard) splits it."""
    each = -(-total // parts)
    return max(0, min(each, total - q * each))


def all_gather_matmul(A_shard: DTensor, Bs, gather_dim: int, return_A: bool, **kw):
    if not isinstance(A_shard, DTensor):
        _refuse_plain("A_shard")
    d = gather_dim % A_shard.dim()
    if _shard_dim(A_shard) != d:
        _refuse("A_shard", A_shard, f"Shard({gather_dim})")
    mesh = A_shard.device_mesh
    local_bs, kinds = [], []
    for i, b in enumerate(Bs):
        if isinstance(b, DTensor):
            if b.device_mesh != mesh or not (b.placements == (Replicate(),) or _shard_dim(b) == 1):
                _refuse(f"Bs[{i}]", b, "Shard(1) (its columns split) or Replicate() on A_shard's mesh")
            kinds.append(b.placements[0])
            local_bs.append(b.to_local())
        else:
            kinds.append(None)
            local_bs.append(b)
    gathered, cs = torch.ops.collmm.fused_all_gather_matmul(
        A_shard.to_local(), local_bs, d, mesh.get_group().group_name, return_A=return_A,
        gathered_size=A_shard.shape[d], **kw)
    out_cs = []
    for c, kind, b in zip(cs, kinds, Bs):
        if kind is None:
            out_cs.append(c)
        else:
            out_cs.append(as_dtensor(c, mesh, Shard(c.dim() - 1) if isinstance(kind, Shard) else Replicate(),
                                     (*c.shape[:-1], b.shape[1])))
    a = as_dtensor(gathered, mesh, Replicate(), gathered.shape) if gathered is not None else None
    return a, out_cs


def _k_split(A: DTensor, B: DTensor) -> None:
    """Refuses A and B unless A is Shard(-1) and B Shard(0) (K split) on a 1-D mesh."""
    for name, t, dim, want in (("A", A, A.dim() - 1, "Shard(-1) (its K split)"), ("B", B, 0, "Shard(0) (its K split)")):
        if not isinstance(t, DTensor):
            _refuse_plain(name)
        if _shard_dim(t) != dim:
            _refuse(name, t, want)


def matmul_reduce_scatter(A: DTensor, B: DTensor, reduce_op: str, scatter_dim: int, **kw) -> DTensor:
    _k_split(A, B)
    mesh = A.device_mesh
    d = scatter_dim % A.dim()
    total = A.shape[d]
    mine = chunk_size(total, mesh.size(), mesh.get_local_rank())
    c = torch.ops.collmm.fused_matmul_reduce_scatter(A.to_local(), B.to_local(), reduce_op, d,
                                                     mesh.get_group().group_name, scatter_size=mine, **kw)
    shape = list(c.shape)
    shape[d] = total
    return as_dtensor(c, mesh, Shard(d), shape)


def matmul_all_reduce(A: DTensor, B: DTensor, reduce_op: str, **kw) -> DTensor:
    _k_split(A, B)
    mesh = A.device_mesh
    c = torch.ops.collmm.fused_matmul_all_reduce(A.to_local(), B.to_local(), reduce_op, mesh.get_group().group_name,
                                                 **kw)
    return as_dtensor(c, mesh, Replicate(), c.shape)




def _refuse_in_dispatch(op: str):
    def rule(*args, **kwargs):
        raise ValueError(f"collmm: torch.ops.collmm.{op} takes local tensors and a group name, not DTensors: call "
                         f"collmm.{op} (it takes DTensors), or pass each DTensor's .to_local() with the mesh's "
                         "group_name (and gathered_size / scatter_size where shards are uneven)")
    return rule


try:  # DTensor's dispatch of the dispatcher ops: refused with what to pass (register_sharding: torch >= 2.5)
    from torch.distributed.tensor.experimental import register_sharding

    for _op in ("fused_all_gather_matmul", "fused_matmul_reduce_scatter", "fused_matmul_all_reduce"):
        register_sharding(getattr(torch.ops.collmm, _op).default)(_refuse_in_dispatch(_op))
except ImportError:
    pass
