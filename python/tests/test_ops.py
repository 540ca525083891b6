"""torch.ops.collmm.* (all three ops) on gloo, world sizes 1..4 in real processes, on both CPU executors (host:
OpenBLAS on lane threads; aten: the plan walked with ATen ops, as on CUDA): every op x algo, uneven M
(and uneven N / K splits), both B layouts (row-major [K, N] and an nn.Linear weight's w.t()),
several Bs, leading batch dims, float32 / float64 / bfloat16, against the plain computation on
the same seeded global tensors."""
import pytest

from dist_util import run_world
from op_cases import ag_cases, ar_cases, deprecated_keyword_cases, entry_cases, rs_cases


def both(rank, world, executor):
    import collmm

    collmm.set_cpu_executor(executor)
    ag_cases(rank, world)
    rs_cases(rank, world)
    ar_cases(rank, world)
    entry_cases(rank, world)


@pytest.mark.parametrize("executor", ["host", "aten"])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_ops(world, executor):
    run_world(world, both, executor)


def test_deprecated_pieces_keywords():
    run_world(2, deprecated_keyword_cases)
