"""The ops' fake (meta) kernels and thin Python wrappers that take a group or its name.

The kernels themselves are C++ (python/csrc/ops.cpp). A fake kernel gives the shapes of the
outputs without data, for torch.compile and FakeTensor tracing; it assumes every rank holds as many
rows as this one (all_gather_matmul), as torch.ops.symm_mem's fake kernels do: a model traced with
uneven shards runs with the eager op.
"""
from typing import List, Optional, Tuple, Union

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _resolve_process_group

# The algorithms the ops take: "auto" and the names of collmm's table (exported by the extension).
ALGOS = ("auto",) + tuple(torch.ops.collmm.algorithms())


def block_size(total: int, parts: int, q: int) -> int:
    """Rank q's share of a dimension of `total` split over `parts` ranks (the first total % parts get one more)."""
    return total // parts + (1 if q < total % parts else 0)


def group_name_of(group: Union[None, str, dist.ProcessGroup]) -> str:
    """The name the ops take: of `group`, or of the default group when None."""
    if isinstance(group, str):
        return group
    return (group if group is not None else dist.group.WORLD).group_name


@torch.library.register_fake("collmm::fused_all_gather_matmul")
def _fused_all_gather_matmul_fake(A_shard, Bs, gather_dim, group_name, *, return_A=True, algo="auto"):
    world = _resolve_process_group(group_name).size()
    rows = A_shard.shape[0] * world
    A = A_shard.new_empty((rows, *A_shard.shape[1:])) if return_A else None
    return A, [A_shard.new_empty((rows, *A_shard.shape[1:-1], B.shape[1])) for B in Bs]


@torch.library.register_fake("collmm::fused_matmul_reduce_scatter")
def _fused_matmul_reduce_scatter_fake(A, B, reduce_op, scatter_dim, group_name, *, algo="auto"):
    group = _resolve_process_group(group_name)
    inner = A.shape[1:-1]
    per_row = 1
    for d in inner:
        per_row *= d
    rows = block_size(A.numel() // A.shape[-1], group.size(), group.rank()) // per_row
    return A.new_empty((rows, *inner, B.shape[1]))


def fused_all_gather_matmul(
    A_shard: torch.Tensor,
    Bs: List[torch.Tensor],
    gather_dim: int = 0,
    group: Union[None, str, dist.ProcessGroup] = None,
    *,
    return_A: bool = True,
    algo: str = "auto",
) -> Tuple[Optional[torch.Tensor], List[torch.Tensor]]:
    """(all_gather(A_shard) or None, [all_gather(A_shard) @ B for B in Bs]) over `group`."""
    return torch.ops.collmm.fused_all_gather_matmul(
        A_shard, Bs, gather_dim, group_name_of(group), return_A=return_A, algo=algo
    )


def fused_matmul_reduce_scatter(
    A: torch.Tensor,
    B: torch.Tensor,
    reduce_op: str = "sum",
    scatter_dim: int = 0,
    group: Union[None, str, dist.ProcessGroup] = None,
    *,
    algo: str = "auto",
) -> torch.Tensor:
    """This rank's rows block of the sum (or average) of A @ B over `group`."""
    return torch.ops.collmm.fused_matmul_reduce_scatter(A, B, reduce_op, scatter_dim, group_name_of(group), algo=algo)
