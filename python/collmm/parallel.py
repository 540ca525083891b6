"""collmm's ParallelStyles for torch.distributed.tensor.parallel.parallelize_module.

``collmm.torch.ColwiseParallel`` and ``collmm.torch.RowwiseParallel`` are torch's styles of those
names (the same arguments, the same DTensor parameters: the weight ``Shard(0)`` / ``Shard(1)`` on the
TP mesh, as torch.chunk splits it) plus ``algo``. Where a linear's communication can overlap its
GEMM, collmm's fused op runs it:

    ColwiseParallel(input_layouts=Shard(d))    y = all_gather(x, d) @ W_r^T + b_r   fused_all_gather_matmul
    RowwiseParallel(output_layouts=Shard(d))   y = reduce_scatter(h @ W_r^T, d) + b  fused_matmul_reduce_scatter
    RowwiseParallel()  (a Replicate() output)  y = all_reduce(h @ W_r^T) + b         fused_matmul_all_reduce

(d: the sequence dim, any but the last). Every other layout is torch's style as it is: a Colwise on
a replicated input (no communication forward; Megatron's MLP without sequence parallelism is that
and a Rowwise with a Replicate() output), nn.Embedding.

The sequence may be split any way. A Rowwise's output rows on each rank are the rows that the last
Colwise input of the same sequence length had on that rank (on this group). So a block's output adds
to its input (the residual); without such a Colwise, torch.chunk's split (DTensor's) holds. An input
may come as a local tensor (this rank's rows) or as a DTensor. Under torch.compile, the gathered
length comes from the DTensor's global shape. For a local tensor it is P times its own rows, and a
call whose ranks hold other sizes raises collmm's ValueError naming gathered_size. A sequence whose
torch.chunk split leaves a rank no rows is refused by a Rowwise embedding with local outputs (see
_EmptyRankCheck); a DTensor with the true sizes runs with a zero-row rank.
"""
import atexit
import gc
from typing import Optional, Tuple

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Placement, Replicate, Shard, distribute_module
from torch.distributed.tensor.parallel import style as _torch_style

from .dtensor import as_dtensor, chunk_size
from .fused_linear import colwise_linears, rowwise_linear
from .ops import process_group_of

# (group name) -> (sequence length, this rank's rows, whether the split is torch.chunk's on every
# rank: the input was a DTensor) of the last input a collmm Colwise linear gathered on that group:
# the split that the Rowwise linears after it give back.
_last_split: dict = {}


def checked_algo(algo: str, who: str, op: Optional[str] = None) -> str:
    """`algo` as the ops take it ("auto", "ring", "ring:pieces4h") and, where `op` is given ("ag_gemm",
    "gemm_rs", "gemm_ar"), with options that op takes; else ValueError."""
    if not isinstance(algo, str):
        raise ValueError(f"collmm: {who}: algo must be a str (got {algo!r})")
    misfit = torch.ops.collmm.algo_misfit(algo, op)
    if misfit:
        raise ValueError(f"collmm: {who}: {misfit}")
    return algo


def _sequence_dim(placement: Placement) -> Optional[int]:
    """d where `placement` is Shard(d) on a dim that is not the last (-1), else None."""
    return placement.dim if isinstance(placement, Shard) and placement.dim != -1 else None


def _local(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    return t.to_local() if isinstance(t, DTensor) else t


def _describe(module: nn.Module) -> str:
    return f"{type(module).__name__}(in_features={module.in_features}, out_features={module.out_features})"


class _Fused:
    """What a collmm linear's forward needs: its mesh and group, algo, the sequence dim (None: a
    Rowwise with a replicated output), the output's layout and whether it leaves as a local tensor."""

    def __init__(self, mesh: DeviceMesh, algo: str, seq_dim: Optional[int], output_layouts: Tuple[Placement, ...],
                 use_local_output: bool):
        self.mesh, self.algo, self.seq_dim = mesh, algo, seq_dim
        self.group_name = mesh.get_group().group_name
        self.world, self.rank = mesh.size(), mesh.get_local_rank()
        self.output_layouts, self.use_local_output = output_layouts, use_local_output

    def dim_of(self, x: torch.Tensor, module: nn.Module) -> int:
        d = self.seq_dim % x.dim() if x.dim() else 0
        if x.dim() < 2 or d == x.dim() - 1:
            raise ValueError(f"collmm: {_describe(module)}: the sequence dim {self.seq_dim} must be a dim of the "
                             f"input other than its last (got an input of shape {list(x.shape)})")
        return d

    def input(self, x: torch.Tensor, placement: Placement) -> Tuple[torch.Tensor, Optional[int]]:
        """This rank's part of `x` (a DTensor redistributed to `placement` first) and, for a DTensor,
        its global size along the placement's dim."""
        if not isinstance(x, DTensor):
            return x, None
        if x.placements != (placement,):
            x = x.redistribute(self.mesh, [placement])
        return x.to_local(), x.shape[placement.dim]

    def compiled_size(self, x: torch.Tensor, d: int, total: Optional[int]) -> Optional[int]:
        """The gathered size to pass under torch.compile (else None: eager calls learn it from the
        ranks): a DTensor's global one, else the fake kernel's assumption (P times this rank's),
        made explicit so that the kernel checks it."""
        if not torch.compiler.is_compiling():
            return None
        return total if total is not None else x.shape[d] * self.world

    def record_split(self, total: int, rows: int, chunked: bool) -> None:
        """Notes this rank's `rows` of a gathered sequence of `total` for the Rowwise linears after it;
        `chunked`: torch.chunk's split on every rank (a DTensor input)."""
        _last_split[self.group_name] = (total, rows, chunked)

    def output(self, y: torch.Tensor, placement: Placement, shape, chunked: bool = True,
               module: Optional[nn.Module] = None) -> torch.Tensor:
        """`y` (this rank's part, `placement` over the mesh, global `shape`) in the output's layout.
        `chunked` False: the split along placement's dim may be any; a DTensor (which assumes
        torch.chunk's) is made only after every rank's size is checked."""
        if self.use_local_output and self.wanted(y.dim()) == _from_front((placement,), y.dim()):
            return y
        if not chunked:
            self.check_chunk_split(y.shape[placement.dim], shape[placement.dim], module)
        return self.finish(as_dtensor(y, self.mesh, placement, shape))

    def check_chunk_split(self, rows: int, total: int, module: Optional[nn.Module]) -> None:
        """ValueError on every rank unless the ranks' `rows` are torch.chunk's split of `total` (one
        all-gather of the sizes)."""
        from torch.distributed._functional_collectives import all_gather_tensor

        sizes = all_gather_tensor(torch.tensor([rows], device=self.mesh.device_type), 0, self.mesh).tolist()
        chunks = [chunk_size(total, self.world, q) for q in range(self.world)]
        if sizes != chunks:
            raise ValueError(f"collmm: {_describe(module)}: the output's rows split {total} as {sizes} over the "
                             f"ranks; a DTensor Shard holds torch.chunk's split {chunks} only. Pass "
                             "use_local_output=True (local tensors, any split), or split the input as torch.chunk "
                             "does (a DTensor input)")

    def finish(self, out: DTensor) -> torch.Tensor:
        """`out` redistributed to the output's layout, local where the style says so (as torch's styles)."""
        if out.placements != self.wanted(out.dim()):
            out = out.redistribute(placements=self.wanted(out.dim()))
        return out.to_local() if self.use_local_output else out

    def wanted(self, ndim: int) -> Tuple[Placement, ...]:
        """The output's layout, Shard dims counted from the front."""
        return _from_front(self.output_layouts, ndim)


def _from_front(placements: Tuple[Placement, ...], ndim: int) -> Tuple[Placement, ...]:
    return tuple(Shard(p.dim % ndim) if isinstance(p, Shard) else p for p in placements)


class ColwiseForward:
    """The forward of a Colwise linear on a sequence-sharded input (in place of nn.Linear's). With a
    SharedGather on its parent, siblings reading the same input share one gather."""

    _collmm: _Fused

    def forward(self, x: torch.Tensor, gathered_size: Optional[int] = None) -> torch.Tensor:
        shared = getattr(self, "_collmm_shared", None)
        if shared is not None and gathered_size is None:
            y = shared.output(self, x)
            if y is not None:
                return y
        fused = self._collmm
        x, total = fused.input(x, Shard(fused.seq_dim))
        d = fused.dim_of(x, self)
        self.check_input(x)
        if gathered_size is None:
            gathered_size = fused.compiled_size(x, d, total)
        (y,) = colwise_linears(x, [self.local_weight()], [self.local_bias()], d, fused.group_name, fused.algo,
                               gathered_size)
        fused.record_split(y.shape[d], x.shape[d], total is not None)
        return fused.output(y, Shard(-1), (*y.shape[:-1], self.weight.shape[0]))

    def check_input(self, x: torch.Tensor) -> None:
        """ValueError unless `x` (local) holds this linear's in_features in its last dim."""
        if x.shape[-1] != self.in_features:
            raise ValueError(f"collmm: {_describe(self)}: the input's last dim is {x.shape[-1]}, not in_features "
                             f"{self.in_features} (pass this rank's rows of the whole input features)")

    def local_weight(self) -> torch.Tensor:
        """This rank's rows of the weight ([N_r, K]; a DTensor's gradient flows back Shard(0))."""
        return _local(self.weight)

    def local_bias(self) -> Optional[torch.Tensor]:
        return _local(self.bias)


class RowwiseForward:
    """The forward of a Rowwise linear with a sequence-sharded output (seq_dim d) or, where its
    _Fused has no seq_dim, a Replicate() output (in place of nn.Linear's)."""

    _collmm: _Fused

    def forward(self, h: torch.Tensor, scatter_size: Optional[int] = None) -> torch.Tensor:
        fused = self._collmm
        weight = _local(self.weight)
        h, _ = fused.input(h, Shard(-1))
        if h.shape[-1] != weight.shape[1]:
            full = " (pass this rank's shard of the input features, not the full input)" \
                if h.shape[-1] == self.in_features and fused.world > 1 else ""
            raise ValueError(f"collmm: {_describe(self)}: the input's last dim is {h.shape[-1]}, not this rank's "
                             f"{weight.shape[1]} of in_features{full}")
        if fused.seq_dim is None:
            if scatter_size is not None:
                raise ValueError(f"collmm: {_describe(self)}: scatter_size is for a sequence-sharded output; this "
                                 "one is replicated")
            y = torch.ops.collmm.fused_matmul_all_reduce(h, weight.t(), "sum", fused.group_name, algo=fused.algo)
            if self.bias is not None:  # every rank adds the whole bias to the whole sum: its gradient is whole
                y = y + _local(self.bias)
            return fused.output(y, Replicate(), y.shape)
        d = fused.dim_of(h, self)
        total = h.shape[d]
        chunked = scatter_size is None
        if scatter_size is None:
            seen = _last_split.get(fused.group_name)
            if seen is not None and seen[0] == total:
                scatter_size, chunked = seen[1], seen[2]
            else:
                scatter_size = chunk_size(total, fused.world, fused.rank)
        # The bias, whole on every rank, gets a whole gradient (Replicate(), as torch's style gives it)
        # from the backward's all-gather of dy: no collective of its own.
        y = rowwise_linear(h, weight, _local(self.bias), d, fused.group_name, fused.algo, scatter_size)
        shape = list(y.shape)
        shape[d] = total
        return fused.output(y, Shard(d), shape, chunked, self)


class _EmptyRankCheck:
    """A forward pre-hook of an nn.Embedding under RowwiseParallel(output_layouts=Shard(d)) with local
    outputs: ValueError on every rank where torch.chunk's split of the sequence leaves a rank no rows.
    Such a local tensor into torch's SequenceParallel becomes, on that rank alone, a DTensor of global
    length 0 (from_local infers P times the local length), which DTensor gathers on that rank alone.
    The ranks' collectives then go out of step and the next collective waits until the group's
    timeout.
    The input (replicated by then) is the same on every rank, so every rank decides alike, with no
    collective."""

    def __init__(self, seq_dim: int, world: int):
        self.seq_dim, self.world = seq_dim, world

    def __call__(self, module: nn.Module, inputs) -> None:
        x = inputs[0]
        d = self.seq_dim % (x.dim() + 1)  # counted on the output: the input's dims plus the embedding's
        if d == x.dim():
            return
        total = x.shape[d]
        empty = [q for q in range(self.world) if chunk_size(total, self.world, q) == 0]
        if total and empty:
            rows = [chunk_size(total, self.world, q) for q in range(self.world)]
            raise ValueError(
                f"collmm: {type(module).__name__}: a sequence of {total} (dim {d}) splits as {rows} over the "
                f"{self.world} ranks (torch.chunk's split, RowwiseParallel(output_layouts=Shard({self.seq_dim}))), "
                f"so rank(s) {empty} hold no rows; as a local tensor into a SequenceParallel module that rank's "
                "DTensor has a global length of 0 and the ranks' collectives go out of step. Use a sequence "
                f"length whose torch.chunk split leaves every rank a row (a multiple of {self.world}), or, where the "
                "model takes DTensors throughout (its residual adds too), use_local_output=False (a DTensor "
                "with the true sizes)")


_classes: dict = {}


def install(module: nn.Module, forward_cls: type, fused: _Fused) -> nn.Module:
    """`module` with `forward_cls`'s forward: its class becomes a subclass of both, under the same
    name (as FSDP2's fully_shard does), its parameters untouched."""
    cls = type(module)
    if not issubclass(cls, forward_cls):
        if (forward_cls, cls) not in _classes:
            _classes[forward_cls, cls] = type(cls.__name__, (forward_cls, cls),
                                              {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
        module.__class__ = _classes[forward_cls, cls]
    module._collmm = fused
    return module


class ColwiseParallel(_torch_style.ColwiseParallel):
    """torch's ColwiseParallel (same arguments) plus ``algo`` ("auto", "ring", "ring:pieces4h": as
    collmm.fused_all_gather_matmul takes it, checked here). With ``input_layouts=Shard(d)`` (d the
    sequence dim, not the last) on an nn.Linear, the forward is collmm's all-gather + GEMM;
    otherwise torch's style as it is."""

    def __init__(self, *, input_layouts: Optional[Placement] = None, output_layouts: Optional[Placement] = None,
                 use_local_output: bool = True, algo: str = "auto"):
        super().__init__(input_layouts=input_layouts, output_layouts=output_layouts, use_local_output=use_local_output)
        self.algo = checked_algo(algo, "ColwiseParallel", "ag_gemm")

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        d = _sequence_dim(self.input_layouts[0])
        if not isinstance(module, nn.Linear) or d is None:
            return super()._apply(module, device_mesh)
        distribute_module(module, device_mesh, self._partition_linear_fn)  # torch's: weight and bias Shard(0)
        return install(module, ColwiseForward, _Fused(device_mesh, self.algo, d, self.output_layouts,
                                                      self.use_local_output))

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", algo={self.algo!r})"


class RowwiseParallel(_torch_style.RowwiseParallel):
    """torch's RowwiseParallel (same arguments) plus ``algo`` (checked here). On an nn.Linear whose
    input is sharded on its features (``Shard(-1)``, the default), the forward is collmm's. With
    ``output_layouts=Shard(d)`` (d the sequence dim, not the last) it is GEMM + reduce-scatter; with
    ``Replicate()`` (the default), GEMM + all-reduce. Otherwise torch's style as it is."""

    def __init__(self, *, input_layouts: Optional[Placement] = None, output_layouts: Optional[Placement] = None,
                 use_local_output: bool = True, algo: str = "auto"):
        super().__init__(input_layouts=input_layouts, output_layouts=output_layouts, use_local_output=use_local_output)
        replicated = isinstance(self.output_layouts[0], Replicate)
        self.algo = checked_algo(algo, "RowwiseParallel", "gemm_ar" if replicated else "gemm_rs")

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        d = _sequence_dim(self.output_layouts[0])
        replicated = isinstance(self.output_layouts[0], Replicate)
        if isinstance(module, nn.Embedding) and d is not None and self.use_local_output:
            # torch's style, then a check of its split: after torch's input hook, on the input it replicated.
            module = super()._apply(module, device_mesh)
            module.register_forward_pre_hook(_EmptyRankCheck(d, device_mesh.size()))
            return module
        if not isinstance(module, nn.Linear) or (d is None and not replicated) or self.input_layouts[0] != Shard(-1):
            # torch's style: an nn.Embedding, an input not sharded on its features, another output layout.
            return super()._apply(module, device_mesh)
        distribute_module(module, device_mesh, self._partition_linear_fn)  # torch's: weight Shard(1), bias Replicate
        return install(module, RowwiseForward, _Fused(device_mesh, self.algo, d, self.output_layouts,
                                                      self.use_local_output))

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", algo={self.algo!r})"


def _release_groups_at_exit() -> None:
    """At the interpreter's exit, before its finalization: DTensor's sharding-propagation caches hold
    the mesh (and through it the process group) of every DTensor op that ran. Cleared, with a
    collection, the groups of models already gone are destroyed while the interpreter still runs.
    Destroyed during finalization instead, after collmm's calls on it, a gloo group aborted the
    process in 2 of 6 runs of python/bench/tp_step.py ("terminate called without an active
    exception"; 0 of 8 with this)."""
    try:
        propagator = DTensor._op_dispatcher.sharding_propagator
    except AttributeError:  # another torch: nothing known to clear
        return
    for name in dir(propagator):
        cached = getattr(propagator, name, None)
        if callable(getattr(cached, "cache_clear", None)):
            cached.cache_clear()
    gc.collect()


atexit.register(_release_groups_at_exit)


def mesh_of(group, device) -> DeviceMesh:
    """The 1-D DeviceMesh of `group` (a ProcessGroup, its name, or None: the default group) for
    tensors on `device`."""
    return DeviceMesh.from_group(process_group_of(group), torch.device(device).type if device is not None else "cpu")


__all__ = ["ColwiseParallel", "RowwiseParallel"]
