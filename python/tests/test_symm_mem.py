"""PyTorch's AsyncTPTest (test/distributed/test_symmetric_memory.py, the fused ops without fp8) on
collmm's ops (CPU, gloo, real processes): gather_dim and scatter_dim 0, 1, 2 (the last dims
included), strided inputs, the bf16 reduce; keyword calls as torch's op names its arguments;
gradients of the last dims; the dims named in messages; calls out of step named on every rank."""
import pytest

from dist_util import run_world
from symm_mem_cases import (bfloat16_reduce_case, dims_named_case, fused_all_gather_matmul_case,
                            fused_matmul_reduce_scatter_case, last_dim_gradients_case, skipped_call_case,
                            strided_inputs_case)


@pytest.mark.parametrize("gather_dim", [0, 1, 2])
def test_fused_all_gather_matmul(gather_dim):
    run_world(2, fused_all_gather_matmul_case, gather_dim)


@pytest.mark.parametrize("scatter_dim", [0, 1, 2])
def test_fused_matmul_reduce_scatter(scatter_dim):
    run_world(2, fused_matmul_reduce_scatter_case, scatter_dim)


def test_fused_matmul_reduce_scatter_bfloat16_custom_reduce():
    run_world(2, bfloat16_reduce_case)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_strided_inputs(dim):
    run_world(2, strided_inputs_case, dim)


@pytest.mark.parametrize("world", [2, 3])
def test_last_dim_gradients(world):
    run_world(world, last_dim_gradients_case)


def test_dims_named():
    run_world(2, dims_named_case)


def test_skipped_call_named():
    run_world(2, skipped_call_case, timeout=120)
