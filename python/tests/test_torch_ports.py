"""PyTorch's tests of the tensor-parallel styles (test_tp_style.py, test_parallelize_api.py,
test_tp_examples.py) ported onto collmm's styles, with their CommDebugMode counts, and collmm's
torchtitan-style plan against torch's (CPU, gloo, real processes); each world starts its processes
once."""
import pytest

import shared_gather_cases as sg
import torch_example_cases as ex
import torch_style_cases as st
from dist_util import run_world


def torch_ports(rank, world):
    import torch

    st.colwise_parallel_style(rank, world)
    st.colwise_parallel_embedding(rank, world)
    st.preserves_requires_grad(rank, world)
    st.rowwise_parallel_style(rank, world)
    st.rowwise_parallel_embedding(rank, world)
    st.prepare_module_input_multiple_inputs(rank, world)
    st.prepare_module_kwargs_input(rank, world)
    st.parallelize_api(rank, world)
    st.parallelize_module_src_data_rank(rank, world)
    for seq_parallel in (True, False):
        ex.mlp_training(rank, world, seq_parallel)
    ex.mlp_inference(rank, world)
    ex.transformer_training(rank, world, True, torch.float32)
    ex.transformer_training(rank, world, True, torch.float64)
    ex.transformer_training(rank, world, False, torch.float64)
    ex.transformer_req_grad(rank, world)
    ex.weight_tying(rank, world)


def collmm_vs_torch_plan(rank, world):
    sg.llama_collectives_vs_torch(rank, world)
    sg.llama_trains_as_unsharded(rank, world, seq=4 * world + 1)  # every rank some rows
    sg.shared_gather_misuse(rank, world)
    sg.algo_refused_when_built(rank, world)
    sg.profiler_sees_ops(rank, world)
    if world == 4:
        sg.uneven_dtensor_refused(rank, world)


@pytest.mark.parametrize("world", [2, 4])
def test_torch_ports(world):
    run_world(world, torch_ports)


@pytest.mark.parametrize("world", [2, 4])
def test_collmm_vs_torch_plan(world):
    run_world(world, collmm_vs_torch_plan)
