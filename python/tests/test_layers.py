"""collmm.torch.ColumnParallelLinear -> gelu -> RowParallelLinear (sequence-parallel MLP) on
gloo, world sizes 1..4: outputs, input gradients and weight/bias gradients equal those of the
unsharded nn.Linear pair, for every algo, with an uneven sequence split (2-D input) and an uneven
hidden split, and with [s, b, K] inputs."""
import pytest

from dist_util import run_world
from layer_cases import compile_cache_case, compile_cases, group_not_held_case, mlp_cases, weight_grad_layout_cases


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_mlp_forward_backward(world):
    run_world(world, mlp_cases)


@pytest.mark.parametrize("world", [1, 2])
def test_weight_gradients_contiguous(world):
    run_world(world, weight_grad_layout_cases)


@pytest.mark.parametrize("world", [1, 2])
def test_compile_fullgraph(world):
    run_world(world, compile_cases)


@pytest.mark.parametrize("world", [1, 2])
def test_layers_hold_no_group(world):
    run_world(world, group_not_held_case)


def test_compile_cache_keyed_on_group(tmp_path, monkeypatch):
    """inductor's caches shared by a world-1 run and two world-2 runs (TORCHINDUCTOR_CACHE_DIR): no
    run loads a graph compiled for another world or rank (the fake kernels' sizes come from the group)."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    for world in (1, 2, 2):
        run_world(world, compile_cache_case)
