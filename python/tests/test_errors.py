"""Bad input on one rank (any of the three ops) raises ValueError("collmm: ...") on every rank before any data moves, and
the group is still in step afterwards (a good call right after each bad one gives the right
answer). World sizes 1..4 on gloo; the last rank is the one that errs (a missing group name and
a meta B are refused on the rank itself, before any exchange: every rank passes them here)."""
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
    ar = torch.ops.collmm.fused_matmul_all_reduce
    a, b = seeded(22, 3, 4), seeded(23, 4, 5)
    cases = [
        # (call, fragment of the message every rank sees)
        (lambda: ag(a, [b], 0, group, algo="zigzag" if bad else "ring"), "algo"),
        (lambda: ag(a, [b[:, ::2] if bad else b[:, :3]], 0, group), "neither row-major"),
        (lambda: ag(a, [seeded(24, 5, 5) if bad else b], 0, group), "rows; A has 4 columns"),
        (lambda: ag(a.double() if bad else a, [b.double() if bad else b], 0, group), "disagree on dtype", 2),
        (lambda: ag(a, [b], 2 if bad else 0, group), "gather_dim must be a dim of A (-2 to 1); got 2"),
        (lambda: rs(a, b, "sum", -3 if bad else 0, group), "scatter_dim must be a dim of A (-2 to 1); got -3"),
        (lambda: ag(a, [], 0, group), "Bs is empty"),
        (lambda: rs(a, b, "max" if bad else "sum", 0, group), "reduce_op"),
        (lambda: rs(a, b.half() if bad else b, "sum", 0, group), "is Half"),
        (lambda: rs(seeded(25, 4, 4) if bad else a, b[:4], "sum", 0, group), "disagree on A's size along scatter_dim", 2),
        # different ops on different ranks: the same first exchange, the op's name disagrees
        (lambda: rs(a, b, "sum", 0, group) if bad else ag(a, [b], 0, group), "disagree on op", 2),
        (lambda: rs(a, b, "sum", 0, group, scatter_size=3), "adds up to", 2),
        (lambda: ag(a, [b], 0, group, gathered_size=1), "gathered_size is 1"),
        (lambda: ag(a, [b.t().contiguous().t() if bad else b], 0, group), "pass the same kind on every rank", 2),
        (lambda: ag(a, [b], 0, "no-such-group"), "no process group is named 'no-such-group'"),
        (lambda: ag(a, [b.to("meta")], 0, group), "Bs[0] is on meta, A on cpu"),
        (lambda: rs(a, b[:, :3], "sum", 0, group), ".contiguous()"),
        # the all-reduce: ranks that disagree on M, N, dtype, algo or the op; its own checks
        (lambda: ar(seeded(25, 4, 4) if bad else a, b, "sum", group), "disagree on M (A's dims before K)", 2),
        (lambda: ar(a.view(1, 3, 4) if bad else a, b, "sum", group), "disagree on M (A's dims before K)", 2),
        (lambda: ar(a, b[:, :3].contiguous() if bad else b, "sum", group), "disagree on N (B's columns)", 2),
        (lambda: ar(a.double() if bad else a, b.double() if bad else b, "sum", group), "disagree on dtype", 2),
        (lambda: ar(a, b, "sum", group, algo="ring" if bad else "bidir"), "disagree on algo", 2),
        (lambda: ar(a, b, "sum", group) if bad else rs(a, b, "sum", 0, group), "disagree on op", 2),
        (lambda: ar(a, b, "max" if bad else "avg", group), "reduce_op must be sum or avg"),
        (lambda: ar(a, b, "sum", group, algo="zigzag" if bad else "auto"), "algo"),
        (lambda: ar(a, seeded(24, 5, 5) if bad else b, "sum", group), "rows; A has 4 columns"),
        # algo strings (collmm-bench's --algo entries): the parser's message and the accepted spellings
        (lambda: ag(a, [b], 0, group, algo="rings" if bad else "ring"),
         "algo 'rings': unknown algorithm 'rings' (expected one of: sequential pipelined ring bidir); algo is auto or "
         "ALGO[:wavesW][:mergeG][:piecesS[h]]"),
        (lambda: rs(a, b, "sum", 0, group, algo="ring:pieces4:merge2" if bad else "ring"),
         "algo 'ring:pieces4:merge2': write it as 'ring:merge2:pieces4'"),
        (lambda: ag(a, [b], 0, group, algo="ring:pieces0" if bad else "ring:pieces2"), "pieces takes a count 1..64"),
        (lambda: rs(a, b, "sum", 0, group, algo="ring:merge2" if bad else "ring"),
         "algo 'ring:merge2': gemm_rs's ring does not take these options (it would run as ring)"),
        (lambda: ar(a, b, "sum", group, algo="bidir:waves2" if bad else "ring"),
         "algo 'bidir:waves2': gemm_ar's bidir does not take these options (it would run as bidir)"),
        (lambda: ag(a, [b], 0, group, algo="ring:pieces2" if bad else "ring"), "disagree on algo", 2),
        (lambda: ar(torch.ones(()) if bad else a, b, "sum", group), "A must have 1 or more dims"),
    ]
    for i, (call, fragment, *min_world) in enumerate(cases):
        if world < (min_world[0] if min_world else 1):
            continue  # an error only between ranks
        expect_error(call, fragment, f"case {i} rank {rank}/{world}")
        good_call(rank, world, group)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_bad_input_on_one_rank(world):
    run_world(world, error_cases)
