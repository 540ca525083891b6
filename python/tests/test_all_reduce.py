"""The all-reduce op (fused_matmul_all_reduce) beyond its values, on gloo, world sizes 1..4, one
launch per world (ar_cases.py): autograd against float64 autograd, the Python wrapper on DTensors,
Megatron's MLP without sequence parallelism trained with collmm's styles and traced,
RowParallelLinear(sequence_parallel=False); torch.compile(fullgraph=True) at world 2. The op's values
against A @ B + all_reduce are test_ops.py's; bad input, test_errors.py's."""
import pytest

import ar_cases
from dist_util import run_world


def all_cases(rank, world, path):
    import collmm
    import torch

    assert "all_reduce(C, group)" in torch.ops.collmm.fused_matmul_all_reduce.__doc__  # help() shows it
    assert collmm.fused_matmul_all_reduce.__doc__ == torch.ops.collmm.fused_matmul_all_reduce.__doc__
    ar_cases.autograd_cases(rank, world)
    ar_cases.dtensor_case(rank, world)
    ar_cases.mlp_train_case(rank, world, path)
    ar_cases.row_layer_case(rank, world)
    if world == 2:
        ar_cases.compile_case(rank, world)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_all_reduce(world, tmp_path):
    run_world(world, all_cases, str(tmp_path / "trace"))
