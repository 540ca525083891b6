"""torch's CommDebugMode (torch.distributed.tensor.debug) counts collmm's ops as the collectives they
perform: fused_all_gather_matmul as an all_gather_into_tensor, fused_matmul_reduce_scatter as a
reduce_scatter_tensor, fused_matmul_all_reduce as an all_reduce (the c10d_functional ops that torch's
styles run and torch's tests count), in the forward and in the backward the ops' autograd runs.

CommDebugMode is a TorchDispatchMode that counts the ops in its registry, built when a
CommDebugMode is made from the module's native-to-legacy funcol mapping: collmm's ops join that
mapping when collmm is imported. torch's profiler records the ops by their own names
("collmm::fused_all_gather_matmul"), as it records any dispatcher op.
"""
import torch

try:
    from torch.distributed.tensor.debug import _comm_mode
except ImportError:  # a torch without CommDebugMode: nothing to tell
    _comm_mode = None


def _register() -> None:
    mapping = getattr(_comm_mode, "NATIVE_TO_PY_MAPPING", None)
    if mapping is None:
        return
    funcol = torch.ops.c10d_functional
    mapping[torch.ops.collmm.fused_all_gather_matmul] = funcol.all_gather_into_tensor
    mapping[torch.ops.collmm.fused_matmul_reduce_scatter] = funcol.reduce_scatter_tensor
    mapping[torch.ops.collmm.fused_matmul_all_reduce] = funcol.all_reduce


_register()
