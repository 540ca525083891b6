"""The ops' fake (meta) kernels and Python wrappers that take a group or its name.

The kernels themselves are C++ (python/csrc/ops.cpp), their autograd too (python/csrc/autograd.cpp).
A fake kernel gives the shapes of the outputs without data, for torch.compile (inductor included)
and FakeTensor tracing. One rank cannot know the other ranks' sizes: the fake all-gather assumes every rank holds as many as this one unless
``gathered_size`` gives the total, and the fake reduce-scatter gives this rank ``scatter_size``
(default: collmm's split). Pass them where shards are uneven and the op is compiled. The all-reduce's
output shape is known locally: A's dims before K, then B's N.
"""
import contextlib
import warnings
from typing import List, Optional, Tuple, Union

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _resolve_process_group
from torch.distributed.tensor import DTensor

# The algorithms the ops take: "auto" and the names of collmm's table (exported by the extension).
# An algorithm may carry plan options of its own, spelled as collmm-bench's --algo entries:
# "ring:pieces4h", "ring:merge2", "ring:waves2".
ALGOS = ("auto",) + tuple(torch.ops.collmm.algorithms())


def _algo_with_pieces(algo: str, pieces: Optional[int], piece_sizes: Optional[str], who: str) -> str:
    """`algo` with the deprecated keywords pieces= and piece_sizes= folded in, as one algo string
    ("ring", 4, "halving" -> "ring:pieces4h"), with a FutureWarning naming it."""
    if pieces is None and piece_sizes is None:
        return algo
    pieces = 1 if pieces is None else pieces
    if piece_sizes not in (None, "equal", "halving"):
        raise ValueError(f"collmm: {who}: piece_sizes must be equal or halving (got {piece_sizes!r})")
    spelled = algo if pieces == 1 else f"{algo}:pieces{pieces}" + ("h" if piece_sizes == "halving" else "")
    warnings.warn(f"collmm.{who}: pieces= and piece_sizes= are deprecated; pass algo={spelled!r}", FutureWarning,
                  stacklevel=3)
    return spelled


def block_size(total: int, parts: int, q: int) -> int:
    """Rank q's share of a dimension of `total` split over `parts` ranks (the first total % parts get one more)."""
    return total // parts + (1 if q < total % parts else 0)


def group_name_of(group: Union[None, str, dist.ProcessGroup]) -> str:
    """The name the ops take: of `group`, or of the default group when None."""
    if isinstance(group, str):
        return group
    return process_group_of(group).group_name


def process_group_of(group: Union[None, str, dist.ProcessGroup]) -> dist.ProcessGroup:
    """`group` as a ProcessGroup: itself, the group of that name, or the default group when None."""
    if isinstance(group, str):
        try:
            return _resolve_process_group(group)
        except Exception:  # noqa: BLE001 - torch raises RuntimeError or ValueError by version
            raise ValueError(f"collmm: no process group is named {group!r} (pass the group itself or its "
                             "group_name)") from None
    if group is None:
        if not dist.is_initialized():
            raise ValueError("collmm: no process group: call torch.distributed.init_process_group first")
        return dist.group.WORLD
    if not isinstance(group, dist.ProcessGroup):  # dist.new_group's answer on a rank outside the group
        rank = dist.get_rank() if dist.is_initialized() else "?"
        raise ValueError(f"collmm: global rank {rank} is not a member of the group passed (got {group!r}, what "
                         "torch.distributed.new_group gives ranks outside it): call collmm with a group only on its ranks")
    return group


@contextlib.contextmanager
def _counted_if_refused(group):
    """A wrapper's own checks, which raise on this rank alone: a call they refuse still counts as a call
    on the group (count_call in python/csrc/call_memo.hpp), so the next exchange names the ranks out of step."""
    try:
        yield
    except Exception:
        try:
            torch.ops.collmm.count_call(group_name_of(group))
        except Exception:  # noqa: BLE001 - no group to count on: the error raised is the user's
            pass
        raise


def _same_device(a: torch.Tensor, bs: List[torch.Tensor], a_name: str, b_name: str) -> None:
    for i, b in enumerate(bs):
        if b.device != a.device:
            name = f"{b_name}[{i}]" if len(bs) > 1 or b_name == "Bs" else b_name
            raise ValueError(f"collmm: {name} is on {b.device}, {a_name} on {a.device}: pass tensors of one device")


def _with_first(a: torch.Tensor, dim: int, first: int, last: int) -> torch.Tensor:
    """An empty tensor shaped as `a` with `dim` moved first, sized `first` there and `last` in the last
    dim, moved back: the shape and strides the kernels return."""
    shape = list(a.movedim(dim, 0).shape)
    shape[0], shape[-1] = first, last
    return a.new_empty(shape).movedim(0, dim)


# torch.compile's caches (AOTAutograd's and inductor's FX graph cache) key a compiled graph on its
# code and inputs, not on the process group behind a group name. So a graph compiled at world 1
# would be loaded at world 2 (the same shard shapes, the group named "0" in both) with the fake
# kernel's world-1 sizes baked in. A fake kernel whose sizes come from a group (no gathered_size /
# scatter_size) therefore adds that group's size (and, for the scatter's default split, this rank)
# to torch.compile's cache_key_tag. Dynamo runs the fake kernels while it traces, before either
# cache computes its key, so the compile that first meets a group is keyed on it.
_COLLMM_TAG = " collmm:"
_cache_key_groups: set = set()


def _key_compile_caches_on(entry: str) -> None:
    _cache_key_groups.add(entry)
    config = getattr(torch.compiler, "config", None)
    if config is None or not hasattr(config, "cache_key_tag"):
        return
    # Rebuilt on every call (a trace-time cost only): the user may have set or reset the tag since
    # (torch.compiler.config.patch restores its old value on exit).
    tag = config.cache_key_tag.split(_COLLMM_TAG)[0] + _COLLMM_TAG + ",".join(sorted(_cache_key_groups))
    if config.cache_key_tag != tag:
        config.cache_key_tag = tag


@torch.library.register_fake("collmm::fused_all_gather_matmul")
def _fused_all_gather_matmul_fake(A, Bs, gather_dim, group_name, *, return_A=True, algo="auto", gathered_size=None):
    _same_device(A, Bs, "A", "Bs")
    world = process_group_of(group_name).size()
    if gathered_size is None:
        _key_compile_caches_on(f"{group_name}/{world}")
    d = gather_dim % A.dim()
    rows = gathered_size if gathered_size is not None else A.shape[d] * world
    if d == A.dim() - 1:  # K gathered: contiguous outputs, as torch's
        gathered = A.new_empty((*A.shape[:-1], rows)) if return_A else None
        return gathered, [A.new_empty((*A.shape[:-1], B.shape[1])) for B in Bs]
    gathered = _with_first(A, d, rows, A.shape[-1]) if return_A else None
    return gathered, [_with_first(A, d, rows, B.shape[1]) for B in Bs]


@torch.library.register_fake("collmm::fused_matmul_reduce_scatter")
def _fused_matmul_reduce_scatter_fake(A, B, reduce_op, scatter_dim, group_name, *, algo="auto", scatter_size=None):
    _same_device(A, [B], "A", "B")
    group = process_group_of(group_name)
    if scatter_size is None:
        _key_compile_caches_on(f"{group_name}/{group.size()}/r{group.rank()}")
    shape = [*A.shape[:-1], B.shape[1]]  # contiguous, as torch's
    d = scatter_dim % A.dim()
    shape[d] = scatter_size if scatter_size is not None else block_size(shape[d], group.size(), group.rank())
    return A.new_empty(shape)


@torch.library.register_fake("collmm::fused_matmul_all_reduce")
def _fused_matmul_all_reduce_fake(A, B, reduce_op, group_name, *, algo="auto"):
    _same_device(A, [B], "A", "B")
    return A.new_empty((*A.shape[:-1], B.shape[1]))


# Autograd: the all-gather and reduce-scatter ops' backward is the other op, the all-reduce's needs none (python/csrc/autograd.cpp, C++ so that a call that needs
# no gradient pays no Python).


def fused_all_gather_matmul(
    A: Optional[torch.Tensor] = None,
    Bs: Optional[List[torch.Tensor]] = None,
    gather_dim: int = 0,
    group: Union[None, str, dist.ProcessGroup] = None,
    *,
    return_A: bool = True,
    algo: str = "auto",
    gathered_size: Optional[int] = None,
    pieces: Optional[int] = None,
    piece_sizes: Optional[str] = None,
    A_shard: Optional[torch.Tensor] = None,
) -> Tuple[Optional[torch.Tensor], List[torch.Tensor]]:
    """All-gather of ``A`` along ``gather_dim`` and its product with each B, the transfers
    overlapped with the GEMMs. The result, unfused::

        G = torch.cat(all_gather(A over group), dim=gather_dim)   # every rank's size as it comes
        return (G if return_A else None), [G @ B for B in Bs]

    Args:
        A: this rank's shard of A, [..., K]; any size along ``gather_dim`` (each rank its own:
            a sequence of any length sharded any way). Or a DTensor ``Shard(gather_dim)`` on a 1-D
            mesh: then the group and gathered size are its own, Bs may be DTensors (``Shard(1)`` or
            ``Replicate()``), and the results are DTensors (A ``Replicate()``, C ``Shard(-1)``).
        Bs: [K, N_i] matrices, row-major or the transposed view of an ``nn.Linear`` weight
            (``w.t()``, read in place); ``Bs[0]``'s N split over the ranks any way (each rank's
            N_r its own); the others are multiplied after the gather.
        gather_dim: the dim of A gathered. 0, or a dim with only size-1 dims before it, is read in
            place; another one costs one copy of ``A``. The last (K gathered, each B [sum of the
            ranks' K, N]): the gather, then the GEMMs (not overlapped); the outputs contiguous.
        group: a ``ProcessGroup``, its ``group_name``, or None (the default group).
        return_A: return the gathered A (else None, and it stays in collmm's scratch).
        algo: "auto" (the cost model's pick), one of ``ALGOS``, or an algorithm with plan options
            of its own as collmm-bench's ``--algo`` spells them. Examples: "ring:pieces4" (the last
            chunk's transfer and GEMM cut in 4 pieces), "ring:pieces4h" (pieces of 1/2, 1/4, ...
            of the chunk, the largest moved first), "ring:merge2".
        gathered_size: the size of A along ``gather_dim`` (the sum over the ranks). Only
            torch.compile needs it, and only where the ranks' sizes differ; checked when given.
            Under torch.compile, without it: P times this rank's size (checked).
        pieces, piece_sizes: deprecated (a FutureWarning): ``algo="ring", pieces=4,
            piece_sizes="halving"`` is ``algo="ring:pieces4h"``.
        A_shard: deprecated (a FutureWarning): the old name of ``A`` (torch's op names it ``A``).
    Autograd: ``dA`` is the reduce-scatter op on the output gradients (with algo's algorithm,
    without its options), ``dB_i = A^T @ dC_i``.
    """
    with _counted_if_refused(group):
        if A_shard is not None:
            if A is not None:
                raise TypeError("collmm.fused_all_gather_matmul: pass A (A_shard is its deprecated name), not both")
            warnings.warn("collmm.fused_all_gather_matmul: A_shard= is deprecated; pass A= (torch's name)",
                          FutureWarning, stacklevel=3)
            A = A_shard
        if A is None or Bs is None:
            raise TypeError("collmm.fused_all_gather_matmul: missing A or Bs")
        algo = _algo_with_pieces(algo, pieces, piece_sizes, "fused_all_gather_matmul")
    if isinstance(A, DTensor) or any(isinstance(b, DTensor) for b in Bs):
        from .dtensor import all_gather_matmul

        return all_gather_matmul(A, Bs, gather_dim, return_A, algo=algo)
    if gathered_size is None and torch.compiler.is_compiling():
        # The fake kernel's assumption, passed on: the kernel checks it and names gathered_size.
        gathered_size = A.shape[gather_dim] * process_group_of(group).size()
    return torch.ops.collmm.fused_all_gather_matmul(
        A, Bs, gather_dim, group_name_of(group), return_A=return_A, algo=algo, gathered_size=gathered_size
    )


def fused_matmul_reduce_scatter(
    A: torch.Tensor,
    B: torch.Tensor,
    reduce_op: str = "sum",
    scatter_dim: int = 0,
    group: Union[None, str, dist.ProcessGroup] = None,
    *,
    algo: str = "auto",
    scatter_size: Optional[int] = None,
    pieces: Optional[int] = None,
    piece_sizes: Optional[str] = None,
) -> torch.Tensor:
    """A @ B reduced over the group and scattered along ``scatter_dim``, the transfers overlapped
    with the GEMMs. The result on rank r, unfused::

        S = sum(A_q @ B_q for every rank q)            # reduce_op "avg": S / group size
        sizes = all_gather(scatter_size or block_size(S.size(scatter_dim), P, r))
        return S.split(sizes, dim=scatter_dim)[r]

    Args:
        A: this rank's [..., K_r] (K split over the ranks any way). Or a DTensor ``Shard(-1)`` on a
            1-D mesh with B a DTensor ``Shard(0)``: the result is a DTensor ``Shard(scatter_dim)``
            (torch.chunk's split), the group the mesh's.
        B: [K_r, N], row-major or the transposed view of an ``nn.Linear`` weight (``w.t()``).
        reduce_op: "sum" or "avg".
        scatter_dim: the dim of the result split over the ranks. 0, or a dim with only size-1 dims
            before it, is read in place; another one costs one copy of A. The last (N scattered):
            the transposed problem, one copy of B. The result is contiguous, as torch's.
        group: a ``ProcessGroup``, its ``group_name``, or None (the default group).
        algo: "auto" (the cost model's pick), one of ``ALGOS``, or an algorithm with plan options
            of its own as collmm-bench's ``--algo`` spells them. Examples: "ring:pieces4" (the
            first partial's GEMM and send cut in 4 pieces), "ring:pieces4h" (pieces of halving
            size, 1/8, 1/8, 1/4, 1/2 of the block, the smallest computed and sent first).
        scatter_size: this rank's size of the result along ``scatter_dim`` (any split whose sizes
            add up to A's); default ``block_size(A.size(scatter_dim), P, rank)``.
        pieces, piece_sizes: deprecated (a FutureWarning): ``algo="ring", pieces=4,
            piece_sizes="halving"`` is ``algo="ring:pieces4h"``.
    Autograd: ``dA = all_gather(dC) @ B^T``, ``dB = A^T @ all_gather(dC)`` (the all-gather op, with
    algo's algorithm, without its options).
    """
    with _counted_if_refused(group):
        algo = _algo_with_pieces(algo, pieces, piece_sizes, "fused_matmul_reduce_scatter")
    if isinstance(A, DTensor) or isinstance(B, DTensor):
        from .dtensor import matmul_reduce_scatter

        return matmul_reduce_scatter(A, B, reduce_op, scatter_dim, algo=algo)
    return torch.ops.collmm.fused_matmul_reduce_scatter(
        A, B, reduce_op, scatter_dim, group_name_of(group), algo=algo, scatter_size=scatter_size
    )


def fused_matmul_all_reduce(
    A: torch.Tensor,
    B: torch.Tensor,
    reduce_op: str = "sum",
    group: Union[None, str, dist.ProcessGroup] = None,
    *,
    algo: str = "auto",
) -> torch.Tensor:
    """A @ B summed over the group, the whole sum on every rank, the transfers overlapped with the
    GEMMs (the row-parallel linear without sequence parallelism). The result, unfused::

        C = A @ B                                      # this rank's partial, [..., N]
        all_reduce(C, group)                           # reduce_op "avg": then C / group size
        return C

    Args:
        A: this rank's [..., K_r] (K split over the ranks any way, each rank's K_r its own; the dims
            before K the same on every rank). Or a DTensor ``Shard(-1)`` on a 1-D mesh with B a
            DTensor ``Shard(0)``: the result is a DTensor ``Replicate()``, the group the mesh's.
        B: [K_r, N], row-major or the transposed view of an ``nn.Linear`` weight (``w.t()``).
        reduce_op: "sum" or "avg".
        group: a ``ProcessGroup``, its ``group_name``, or None (the default group).
        algo: "auto" (the cost model's pick), one of ``ALGOS``, or an algorithm with plan options
            of its own as collmm-bench's ``--algo`` spells them: "ring:waves2" (the ring in 2 waves).
    Autograd: ``dA = dC @ B^T``, ``dB = A^T @ dC`` (no communication: dC is the same on every rank).
    """
    if isinstance(A, DTensor) or isinstance(B, DTensor):
        from .dtensor import matmul_all_reduce

        return matmul_all_reduce(A, B, reduce_op, algo=algo)
    return torch.ops.collmm.fused_matmul_all_reduce(A, B, reduce_op, group_name_of(group), algo=algo)
