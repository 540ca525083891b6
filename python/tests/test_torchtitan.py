"""collmm.torchtitan on gloo (CPU): its Functions and modules against unsharded references (ports of
torchtitan 0.3.0's test_distributed_linear.py and test_dist_gemm.py, with uneven splits, biases and
separate QKV), torchtitan's sharding contracts after parallelize, and the llama3 debug model
trained at TP 2 through torchtitan's trainer with ``--module collmm.torchtitan``: its losses equal
torchtitan's own path on the same data, at an even and an uneven sequence length. Skipped where
torchtitan is not installed (pip install collmm[torchtitan])."""
import pytest

pytest.importorskip("torchtitan", reason="torchtitan is not installed (pip install 'collmm[torchtitan]')")

from dist_util import run_world  # noqa: E402
from titan_cases import all_cases  # noqa: E402


@pytest.mark.parametrize("world", [2, 3])
def test_functions_and_modules(world):
    """One group per world for every case: each process imports torchtitan once (seconds)."""
    run_world(world, all_cases)
