"""Bad input on one rank raises ValueError("collmm: ...") on every rank before any data moves, and
the group is still in step afterwards (a good call right after each bad one gives the right
answer). World sizes 1..4 on gloo; the last rank is the one that errs."""
import pytest
import torch
import torch.distributed as dist

from dist_util import assert_close, block, run_world, seeded


def expect_error(fn, fragment: str, what: str) -> None:
    try:
        fn()
    except ValueError as e:
        assert "collmm" in str(e) and fragment in str(e), f"{what}: message {str(e)!r} lacks {fragment!r}"
        return
    raise AssertionError(f"{what}: no ValueError")


def good_call(rank, world, group):
    a_full, b = seeded(20, 2 * world + 1, 4), seeded(21, 4, 3)
    gathered, (c,) = torch.ops.collmm.fused_all_gather_matmul(a_full[block(2 * world + 1, world, rank)].clone(), [b], 0, group)
    assert_close(c, (a_full.double() @ b.double()).float(), "good call after a bad one")


def error_cases(rank, world):
    group = dist.group.WORLD.group_name
    bad = rank == world - 1
    ag, rs = torch.ops.collmm.fused_all_gather_matmul, torch.ops.collmm.fused_matmul_reduce_scatter
    a, b = seeded(22, 3, 4), seeded(23, 4, 5)
    cases = [
        # (call, fragment of the message every rank sees)
        (lambda: ag(a, [b], 0, group, algo="zigzag" if bad else "ring"), "algo"),
        (lambda: ag(a, [b[:, ::2] if bad else b[:, :3]], 0, group), "neither row-major"),
        (lambda: ag(a, [seeded(24, 5, 5) if bad else b], 0, group), "rows; A has 4 columns"),
        (lambda: ag(a.double() if bad else a, [b.double() if bad else b], 0, group), "disagree on dtype", 2),
        (lambda: ag(a, [b], 1 if bad else 0, group), "gather_dim must be 0"),
        (lambda: ag(a.t() if bad else a.t().contiguous(), [b[:3]], 0, group), "contiguous"),
        (lambda: ag(a, [], 0, group), "Bs is empty"),
        (lambda: rs(a, b, "max" if bad else "sum", 0, group), "reduce_op"),
        (lambda: rs(a, b.half() if bad else b, "sum", 0, group), "is Half"),
        (lambda: rs(seeded(25, 4, 4) if bad else a, b[:4], "sum", 0, group), "disagree on M", 2),
        # rows that are not collmm's split: the last rank holds one more than the first
        (lambda: ag(seeded(26, 3 if bad else 2, 4), [b], 0, group), "not collmm's split", 2),
    ]
    for i, (call, fragment, *min_world) in enumerate(cases):
        if world < (min_world[0] if min_world else 1):
            continue  # an error only between ranks
        expect_error(call, fragment, f"case {i} rank {rank}/{world}")
        good_call(rank, world, group)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_bad_input_on_one_rank(world):
    run_world(world, error_cases)
