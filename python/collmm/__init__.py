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

__all__ = ["ALGOS", "block_size", "fused_all_gather_matmul", "fused_matmul_reduce_scatter"]
