"""collmm: collective matmul for PyTorch.

Importing collmm loads its extension, which registers two dispatcher ops with the arguments of
torch.ops.symm_mem's fused ops (plus ``algo``):

    torch.ops.collmm.fused_all_gather_matmul(A_shard, Bs, gather_dim, group_name, *, return_A=True, algo="auto")
    torch.ops.collmm.fused_matmul_reduce_scatter(A, B, reduce_op, scatter_dim, group_name, *, algo="auto")

and their fake (meta) kernels, so torch.compile(fullgraph=True) traces models that call them.
collmm.torch holds the tensor-parallel layers built on them (ColumnParallelLinear,
RowParallelLinear).
"""
import os

import torch

torch.ops.load_library(os.path.join(os.path.dirname(__file__), "_C.so"))

from .ops import ALGOS, block_size, fused_all_gather_matmul, fused_matmul_reduce_scatter  # noqa: E402


def set_cpu_executor(kind: str) -> None:
    """Which executor runs the ops on CPU tensors, for groups first used after this call:
    "host" (the default: OpenBLAS GEMMs on lane threads beside the group's comm) or "aten" (ATen
    GEMMs on the calling thread, the group's comm asynchronous beside them: what CUDA tensors get)."""
    torch.ops.collmm.set_cpu_executor(kind)


__all__ = ["ALGOS", "block_size", "fused_all_gather_matmul", "fused_matmul_reduce_scatter", "set_cpu_executor"]
