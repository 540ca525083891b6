"""collmm: collective matmul for PyTorch.

Importing collmm loads its extension, which registers three dispatcher ops. The first two take the
arguments of torch.ops.symm_mem's fused ops (plus ``algo`` and the sizes one rank cannot know):

    torch.ops.collmm.fused_all_gather_matmul(A, Bs, gather_dim, group_name, *, return_A=True, algo="auto",
                                             gathered_size=None)
    torch.ops.collmm.fused_matmul_reduce_scatter(A, B, reduce_op, scatter_dim, group_name, *, algo="auto",
                                                 scatter_size=None)
    torch.ops.collmm.fused_matmul_all_reduce(A, B, reduce_op, group_name, *, algo="auto")

It also registers their fake (meta) kernels, so torch.compile(fullgraph=True) traces models that
call them, and their autograd formulas (the all-gather and reduce-scatter ops' backward is the other
op; the all-reduce's needs no communication). collmm.fused_all_gather_matmul,
collmm.fused_matmul_reduce_scatter and collmm.fused_matmul_all_reduce take a group or its name and
document each result as unfused code. collmm.torch holds the ParallelStyles for torch's
parallelize_module (ColwiseParallel, RowwiseParallel), the tensor-parallel layers built on them
(ColumnParallelLinear, RowParallelLinear) and shard / gather_state_dict / load_full_state_dict. No
collmm call draws from torch's RNG.
"""
import os
from importlib import metadata as _metadata
from typing import Optional

import torch as _torch  # as _torch: the submodule collmm.torch is this package's attribute `torch`
import torch.distributed as dist

_torch.ops.load_library(os.path.join(os.path.dirname(__file__), "_C.so"))
_ops = _torch.ops.collmm

from .ops import (ALGOS, block_size, fused_all_gather_matmul, fused_matmul_all_reduce,  # noqa: E402
                  fused_matmul_reduce_scatter)
from . import dtensor as _dtensor  # noqa: E402,F401  (DTensor's dispatch of the ops refuses with what to pass)
from . import comm_debug as _comm_debug  # noqa: E402,F401  (CommDebugMode counts the ops as collectives)

try:
    __version__ = _metadata.version("collmm")
except _metadata.PackageNotFoundError:  # imported from the source tree, not installed
    __version__ = "0+unknown"

# help(torch.ops.collmm.<op>) shows what help(collmm.<op>) shows.
_ops.fused_all_gather_matmul.__doc__ = fused_all_gather_matmul.__doc__
_ops.fused_matmul_reduce_scatter.__doc__ = fused_matmul_reduce_scatter.__doc__
_ops.fused_matmul_all_reduce.__doc__ = fused_matmul_all_reduce.__doc__


def set_cpu_executor(kind: str) -> None:
    """Which executor runs the ops on CPU tensors, for groups first used after this call.

    "aten" (the default) is what CUDA tensors get: ATen GEMMs, torch's own BLAS, on the calling
    thread, the group's comm asynchronous beside them. "host" is the cpu backend's: OpenBLAS GEMMs on
    lane threads beside the group's comm."""
    _ops.set_cpu_executor(kind)


def set_check(check: str) -> None:
    """"every" (the default): every call agrees with the other ranks on the problem before data moves.
    "first": a call whose problem (shapes, dtype, layout, algo, this rank's split) this process
    agreed before exchanges nothing, as torch.ops.symm_mem trusts its callers. Ranks that then
    disagree are not caught: they fail or hang in the data's exchange, bounded by the group's
    timeout."""
    _ops.set_check(check)


def set_channel(channel: str) -> None:
    """How groups first used after this call agree.

    - "auto" (the default): over the group's c10d Store where the group has no CPU backend (an
      NCCL-only group), so no call waits for the device; through shared memory where every rank is
      on this host. Else over the group's own collectives.
    - "shm": shared memory set up over the group's Store. Every rank must be on this host, else
      ValueError at the group's first call, whose later calls agree over the Store.
    - "store": the Store alone (two round trips to its server per call).
    - "group": the group's own collectives.

    Set the same on every rank: ranks on different Store channels raise ValueError at the group's
    first call. After a wait of the agreement ran out, every later call on that group raises
    torch.distributed.DistBackendError (the ranks are out of step)."""
    _ops.set_channel(channel)


def set_comm(path: str) -> None:
    """How the ops' runs on CUDA tensors move data, from the next run on.

    - "auto" (the default): once c10d has made the group's NCCL communicator, in a shape's first
      call, every later transfer calls that communicator directly. That is ncclSend/ncclRecv in one
      ncclGroup per step, or one ncclAllGather / ncclReduceScatter, on a stream of collmm's: a few
      us of host time per step where c10d's calls cost tens. A watchdog of collmm's bounds them as
      c10d's bounds its own. A shape's first call runs its transfers once more on scratch memory, so
      that NCCL connects what they use then, not in a later call.
    - "c10d": every transfer through the group's c10d calls.

    ``torch.ops.collmm.last_comm()`` says how the last run went: "nccl", "c10d", "nccl+c10d" or
    "none". ``torch.ops.collmm.last_plan()`` gives its plan's options ("algo=ring ...": what "auto"
    picked)."""
    _ops.set_comm(path)


def set_timeout(seconds: float) -> None:
    """Bounds every wait of the ops for the other ranks by `seconds`: their agreement (over the
    group, its Store or shared memory, each request to the Store included) and, on CPU tensors, the
    run's transfers. A rank left waiting raises torch.distributed.DistBackendError naming the call
    it waited in, and the ranks that did not answer, the rank that left, or the Store that did not
    answer. After that error the group is done for collmm: every later call on it raises at once
    (on gloo, the group's connections are closed, so its own collectives fail too). It can still be
    destroyed: dist.destroy_process_group() returns, and the process exits, within the bound
    whatever the late rank does. Make a new group (dist.new_group) to go on. It also bounds a CPU
    run on the host executor (plans prepared later), whose watchdog ends the process (300 s by
    default). 0: the group's own timeout for the waits."""
    _ops.set_timeout(float(seconds))


class trace:
    """``with collmm.trace("out/step", model) as t:`` records the steps of every collmm call inside
    (clock times on CPU, CUDA events on GPUs; nothing outside a trace).

    At the end it writes, on global rank 0, what collmm-bench writes for its runs:

    - out/step.json: a Chrome trace, one box per step, named like "ag_gemm ring step 2 chunk 3
      gemm", calls laid end to end;
    - out/step-<i>-<op>-<algo>.svg: the timeline of call i;
    - out/step.txt: the table per call (op, algo, M N K, P, dtype, time_us, t_gemm_us, t_comm_us,
      hidden%, E, padded_M, label).

    time, t_gemm, t_comm and E are the slowest rank's (t_gemm and t_comm read off its own steps);
    hidden% is the mean over ranks. M is the caller's rows; padded_M the plan's where they were
    padded to the largest rank's (an uneven split), else "-". With `model` (an nn.Module), each
    call's label is the name of the innermost module of `model` whose forward made it and "forward".
    The call its autograd made from that forward gets "backward". ``t.table`` holds the table on
    every rank. Each traced call gathers its steps over the group (an exchange)."""

    def __init__(self, path: str, model: Optional[_torch.nn.Module] = None):
        self.path, self.table, self.model, self._hooks = str(path), "", model, []

    def __enter__(self) -> "trace":
        if self.model is not None:
            stack = []

            def enter(name):
                def hook(module, args):
                    stack.append(name)
                    _ops.trace_module(name)
                return hook

            def leave(module, args, output):
                stack.pop()
                _ops.trace_module(stack[-1] if stack else "")

            for name, module in self.model.named_modules():
                self._hooks += [module.register_forward_pre_hook(enter(name or type(module).__name__)),
                                module.register_forward_hook(leave, always_call=True)]
        _ops.trace_start()
        return self

    def __exit__(self, *exc) -> bool:
        for h in self._hooks:
            h.remove()
        _ops.trace_module("")
        write = not dist.is_initialized() or dist.get_rank() == 0
        if write and os.path.dirname(self.path):
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.table = _ops.trace_stop(self.path, write)
        return False


__all__ = ["ALGOS", "block_size", "fused_all_gather_matmul", "fused_matmul_all_reduce", "fused_matmul_reduce_scatter",
           "set_channel",
           "set_check", "set_comm", "set_cpu_executor", "set_timeout", "trace"]
