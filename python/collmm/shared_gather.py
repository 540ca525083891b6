"""SharedGather: one all-gather of a sub-block's input for the sibling Colwise linears that read it.

torch's plans gather a sub-block's input once (PrepareModuleInput on the attention or feed-forward
module, then ColwiseParallel on a replicated input). collmm's Colwise linears gather their own input
inside the fused op, so wq, wk and wv would gather the same rows three times. With SharedGather on
the parent module, the first of the named linears that the parent's forward calls runs one
fused_all_gather_matmul for all of them (collmm.fused_linear.colwise_linears: their weights side by
side). Each sibling called with the same input takes its part of the result. The backward
reduce-scatters the input's gradient once. The linears stay separate nn.Linear modules (their
state_dict keys, checkpoints and DTensor parameters unchanged):

    plan = {
        "attention": SharedGather("wq", "wk", "wv"),
        "attention.wq": ColwiseParallel(input_layouts=Shard(1)), ...,   # collmm's styles
        "feed_forward": SharedGather("w1", "w3"), ...
    }

A named linear whose style is not collmm's sequence-sharded Colwise, or that is called with another
input, outside the parent's forward or a second time on the same input, runs as it would alone.
"""
from typing import Dict, Optional

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel.style import ParallelStyle

from .fused_linear import colwise_linears
from .parallel import ColwiseForward


class _Sharing:
    """The named children of one module and, during its forward, the outputs computed for those not
    yet called, keyed by the input they were computed from (_key)."""

    def __init__(self, parent: nn.Module, names):
        self.parent, self.names = parent, tuple(names)
        self.active = 0  # the parent's forwards in progress (a forward may re-enter: recomputation)
        self.pending: Dict[tuple, tuple] = {}  # _key(input) -> (input, {child: output})

    def open(self, module, args) -> None:
        self.active += 1

    def close(self, module, args, output) -> None:
        self.active -= 1
        if not self.active:
            self.pending.clear()

    def output(self, member: nn.Module, x: torch.Tensor) -> Optional[torch.Tensor]:
        """`member`'s output for `x` from one gather shared with its siblings, or None: run alone."""
        if not self.active:
            return None
        key = _key(x)
        entry = self.pending.get(key)
        if entry is not None:
            return entry[1].pop(member, None)
        members = [m for m in (getattr(self.parent, n) for n in self.names)
                   if m is member or _fusable(m, member)]
        if len(members) < 2:
            return None
        outputs = _run(members, x)
        mine = outputs.pop(member)
        self.pending[key] = (x, outputs)  # x held: its memory is not reused while the key stands
        return mine


def _key(x: torch.Tensor) -> tuple:
    """What identifies the input's data: its memory, layout and version (a DTensor's local tensor and
    placements). Not the Python object: a full backward hook (register_full_backward_hook, torch's
    CommDebugMode) hands each module call a new alias of the same tensor. Under torch.compile the
    object itself (no memory to name)."""
    if torch.compiler.is_compiling():
        return (id(x),)
    extra = ()
    if isinstance(x, DTensor):
        extra, x = (x.placements, tuple(x.shape)), x._local_tensor
    return (x.untyped_storage().data_ptr(), x.storage_offset(), tuple(x.shape), x.stride(), x.dtype, x.device,
            x._version) + extra


def _fusable(m: nn.Module, member: nn.Module) -> bool:
    """Whether sibling `m` runs collmm's Colwise forward on the same group, sequence dim and algo as `member`."""
    if not isinstance(m, ColwiseForward):
        return False
    a, b = m._collmm, member._collmm
    return (a.group_name == b.group_name
            and a.seq_dim == b.seq_dim and a.algo == b.algo and m.in_features == member.in_features
            and _dtype(m) == _dtype(member))


def _dtype(m: nn.Module) -> torch.dtype:
    return m.weight.dtype


def _run(members, x: torch.Tensor) -> dict:
    """Every member's output for `x`: one fused all-gather + GEMM of their weights side by side."""
    first = members[0]._collmm
    x_local, total = first.input(x, Shard(first.seq_dim))
    d = first.dim_of(x_local, members[0])
    for m in members:
        m.check_input(x_local)
    gathered_size = first.compiled_size(x_local, d, total)
    weights = [m.local_weight() for m in members]
    biases = [m.local_bias() for m in members]
    ys = colwise_linears(x_local, weights, biases, d, first.group_name, first.algo, gathered_size)
    first.record_split(ys[0].shape[d], x_local.shape[d], total is not None)
    return {m: m._collmm.output(y, Shard(-1), (*y.shape[:-1], m.weight.shape[0])) for m, y in zip(members, ys)}


class SharedGather(ParallelStyle):
    """A parent module's style: its children `names` (collmm ColwiseParallel linears with
    ``input_layouts=Shard(d)``, parallelized by the same plan) gather an input they share once per
    forward of the parent. No names: every direct child nn.Linear."""

    def __init__(self, *names: str):
        super().__init__()
        for n in names:
            if not isinstance(n, str) or not n or "." in n:
                raise ValueError(f"collmm: SharedGather takes the names of direct children (\"wq\"), got {n!r}")
        self.names = names

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        names = self.names or tuple(n for n, c in module.named_children() if isinstance(c, nn.Linear))
        for n in names:
            child = getattr(module, n, None)
            if not isinstance(child, nn.Linear):
                raise ValueError(f"collmm: SharedGather: {type(module).__name__} has no nn.Linear child {n!r} "
                                 f"(its children: {[c for c, _ in module.named_children()]})")
        sharing = _Sharing(module, names)
        module.register_forward_pre_hook(sharing.open)
        module.register_forward_hook(sharing.close, always_call=True)
        for n in names:
            getattr(module, n)._collmm_shared = sharing
        return module

    def __repr__(self) -> str:
        return f"SharedGather({', '.join(repr(n) for n in self.names)})"


__all__ = ["SharedGather"]
