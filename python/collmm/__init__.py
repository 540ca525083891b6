"""collmm: collective matmul for PyTorch.

Importing collmm loads its extension, which registers two dispatcher ops with the arguments of
torch.ops.symm_mem's fused ops (plus ``algo`` and the sizes one rank cannot know):

    torch.ops.collmm.fused_all_gather_matmul(A_shard, Bs, gather_dim, group_name, *, return_A=True, algo="auto",
                                             gathered_size=None)
    torch.ops.collmm.fused_matmul_reduce_scatter(A, B, reduce_op, scatter_dim, group_name, *, algo="auto",
                                                 scatter_size=None)

their fake (meta) kernels, so torch.compile(fullgraph=True) traces models that call them, and their
autograd formulas (each op's backward is the other op). collmm.fused_all_gather_matmul and
collmm.fused_matmul_reduce_scatter take a group or its name and document each result as unfused
code. collmm.torch holds the tensor-parallel layers built on them (ColumnParallelLinear,
RowParallelLinear) and shard / gather_state_dict / load_full_state_dict.
"""
import os

import torch

torch.ops.load_library(os.path.join(os.path.dirname(__file__), "_C.so"))

from .ops import ALGOS, block_size, fused_all_gather_matmul, fused_matmul_reduce_scatter  # noqa: E402


def set_cpu_executor(kind: str) -> None:
    """Which executor runs the ops on CPU tensors, for groups first used after this call: "aten"
    (the default: ATen GEMMs, torch's own BLAS, on the calling thread, the group's comm asynchronous
    beside them: what CUDA tensors get) or "host" (the cpu backend's: OpenBLAS GEMMs on lane
    threads beside the group's comm)."""
    torch.ops.collmm.set_cpu_executor(kind)


__all__ = ["ALGOS", "block_size", "fused_all_gather_matmul", "fused_matmul_reduce_scatter", "set_cpu_executor"]
