"""Cases of the ops inside a training step on CPU (gloo), for test_runtime.py: the agreement's
channel (the group's Store or its collectives), check="first", bounded waits, the named ranges a
profiler sees, and collmm.trace's files."""
import json
import os
import re
import time

import torch
import torch.distributed as dist

from dist_util import assert_close, block, seeded


def _ag_inputs(rank, world, rows=8, k=16, n=8):
    a_full, b = seeded(1, rows * world + 1, k), seeded(2, k, n)
    return a_full, a_full[block(rows * world + 1, world, rank)].clone(), b


def _disagree_on_k_then_go_on(rank, world, group, a_full, a, b, label, check):
    """The last rank's K differs: ValueError on every rank; then the group's next call is right."""
    bad_k = 17 if rank == world - 1 else 16
    try:
        torch.ops.collmm.fused_all_gather_matmul(seeded(5, 2, bad_k), [seeded(6, bad_k, 3)], 0, group)
        raise AssertionError(f"{label}: ranks that disagree on K: no error")
    except ValueError as e:
        assert "disagree on K" in str(e), str(e)
    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")  # the group still in step
    assert_close(c, (a_full.double() @ b.double()).float(), f"{label}: after the disagreement")
    if check != "every":  # check "first" trusts a known call: it would exchange nothing
        return
    # The same where the other ranks' call is the one they just made (with check "every" it sends
    # what it sent then): still the error on every rank, and the group goes on.
    bad = (seeded(5, 2, 17), [seeded(6, 17, 3)]) if rank == world - 1 else (a, [b])
    try:
        torch.ops.collmm.fused_all_gather_matmul(*bad, 0, group, algo="ring")
        raise AssertionError(f"{label}: a known call against one of another K: no error")
    except ValueError as e:
        assert "disagree on K" in str(e), str(e)
    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")
    assert_close(c, (a_full.double() @ b.double()).float(), f"{label}: after the second disagreement")


def channel_case(rank, world, channel, check):
    """Right results on repeated calls, and a disagreement raises ValueError on every rank (also after
    check="first", for a problem not seen before), on the given channel."""
    import collmm

    collmm.set_channel(channel)
    collmm.set_check(check)
    group = dist.group.WORLD.group_name
    a_full, a, b = _ag_inputs(rank, world)
    for algo in ("ring", "sequential", "ring"):
        for _ in range(3):
            _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo=algo)
            assert_close(c, (a_full.double() @ b.double()).float(), f"{channel} {check} {algo}")
            h_full, w = seeded(3, 6 * world, 4 * world), seeded(4, 4 * world, 5)
            cols = block(4 * world, world, rank)
            y = torch.ops.collmm.fused_matmul_reduce_scatter(h_full[:, cols].contiguous(), w[cols], "sum", 0, group,
                                                             algo=algo)
            assert_close(y, (h_full.double() @ w.double()).float()[block(6 * world, world, rank)], "rs")
    # What a call settled is reused for inputs of the same properties only: fresh data, a B with the
    # strides of w.t() (read as nk) and another dtype, all of the same shapes, each get their answer.
    for name, a_i, a_full_i, b_i in (("fresh data", a + 1, a_full + 1, seeded(7, *b.shape)),
                                     ("B as w.t()", a, a_full, b.t().contiguous().t()),
                                     ("float64", a.double(), a_full.double(), b.double())):
        for _ in range(2):
            _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a_i, [b_i], 0, group, algo="ring")
            assert_close(c, (a_full_i.double() @ b_i.double()).to(c.dtype), f"{channel} {check} {name}")
    if world > 1:
        _disagree_on_k_then_go_on(rank, world, group, a_full, a, b, f"{channel} {check}", check)
    collmm.set_check("every")


def shm_case(rank, world, env):
    """The shared-memory channel with the environment `env` (a dict; {rank} in a value is this rank):
    right results, a disagreement raised on every rank, or, where the ranks are not on one host,
    ValueError on every rank at the first call."""
    import collmm

    os.environ.update({k: v.format(rank=rank) for k, v in env.items()})
    collmm.set_channel("shm")
    group = dist.new_group(list(range(world))).group_name  # a session made after set_channel
    a_full, a, b = _ag_inputs(rank, world)
    if "COLLMM_SHM_HOST" in env:
        try:
            torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group)
            raise AssertionError("ranks on different hosts: no error")
        except ValueError as e:
            assert "not all on one host" in str(e), str(e)
        return
    for _ in range(3):
        _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")
        assert_close(c, (a_full.double() @ b.double()).float(), f"shm {env}")
    _disagree_on_k_then_go_on(rank, world, group, a_full, a, b, f"shm {env}", "every")


def mixed_channel_case(rank, world):
    """Rank 0 chose shared memory, the others the Store alone: every rank raises ValueError at the
    group's first call, before any data moves, and the group's next call works (over the Store)."""
    import collmm

    collmm.set_channel("shm" if rank == 0 else "store")
    group = dist.new_group(list(range(world))).group_name
    a_full, a, b = _ag_inputs(rank, world)
    try:
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group)
        raise AssertionError("ranks on different channels: no error")
    except ValueError as e:
        assert "chose different channels" in str(e), str(e)
    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")
    assert_close(c, (a_full.double() @ b.double()).float(), "after the channels' disagreement")


def timeout_case(rank, world, channel):
    """The last rank skips the first call of a shape: every other rank raises DistBackendError naming
    the call it waited in within the timeout (plus a little), and goes on. Every later call on that
    group raises: the ranks that waited at once, posting nothing; the late rank within the timeout
    (on the group's collectives at once: gloo closed the group's connections when the others' wait
    ran out, and the message says a peer left), and no process dies (gloo ends one that receives a message of another size than it
    posted, as the late rank did when the others called again). A new group works."""
    import collmm

    collmm.set_channel(channel)
    group = dist.group.WORLD.group_name
    a_full, a, b = _ag_inputs(rank, world)
    torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group)
    collmm.set_timeout(2)
    _, a6, b6 = _ag_inputs(rank, world, rows=6)  # a shape no call had: its first call
    if rank != world - 1:
        t0 = time.monotonic()
        try:
            torch.ops.collmm.fused_all_gather_matmul(a6, [b6], 0, group)
            raise AssertionError("a skipped call: no error")
        except dist.DistBackendError as e:
            waited = time.monotonic() - t0
            assert "fused_all_gather_matmul's agreement" in str(e) and "within 2 s" in str(e), str(e)
            assert waited < 10, f"raised after {waited:.1f} s, timeout 2 s"
    else:
        time.sleep(6)  # alive and connected, just not calling
    # The rounds (the group's posted collectives) no longer match: every later call raises.
    for call in range(2):
        t0 = time.monotonic()
        try:
            torch.ops.collmm.fused_all_gather_matmul(a6, [b6], 0, group)
            raise AssertionError(f"call {call} after the timeout: no error")
        except dist.DistBackendError as e:
            waited = time.monotonic() - t0
            if rank != world - 1:
                assert "out of step" in str(e), str(e)
                assert waited < 1, f"a rank out of step raised after {waited:.1f} s"
            elif call == 0:
                want = "a peer left" if channel == "group" else "gave up waiting"
                assert want in str(e), str(e)
                assert waited < 10, f"the late rank raised after {waited:.1f} s, timeout 2 s"
            else:
                assert "out of step" in str(e), str(e)
    collmm.set_timeout(0)
    fresh = dist.new_group(backend="gloo")
    (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, fresh.group_name)[1]
    torch.testing.assert_close(c, a_full @ b)


def step_names(op, algo, rank, world):
    """Regexes of the ranges every step of `op` (ag_gemm ring) runs in, as the bench names its boxes."""
    names = [rf"collmm {op} {algo} step {j} chunk \d+ gemm$" for j in range(world)]
    names += [rf"collmm {op} {algo} step {j} chunk \d+ sendrecv$" for j in range(world - 1)]
    return names


def profiler_case(rank, world):
    """A torch.profiler trace of one call holds every step's range."""
    import collmm

    collmm.set_cpu_executor("aten")
    group = dist.group.WORLD.group_name
    a_full, a, b = _ag_inputs(rank, world)
    torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")
    seen = {e.name for e in prof.events()}
    for want in step_names("ag_gemm", "ring", rank, world):
        assert any(re.match(want, s) for s in seen), f"no range {want!r} in {sorted(x for x in seen if 'collmm' in x)}"
    collmm.set_cpu_executor("host")


def trace_case(rank, world, path):
    """collmm.trace around a tensor-parallel MLP step (forward and backward): files written, parseable,
    every call present."""
    import collmm
    from collmm.torch import ColumnParallelLinear, RowParallelLinear

    torch.manual_seed(0)
    fc1, fc2 = torch.nn.Linear(64, 256), torch.nn.Linear(256, 64, bias=False)
    mlp = torch.nn.Sequential(ColumnParallelLinear.from_linear(fc1, algo="ring"), torch.nn.GELU(),
                              RowParallelLinear.from_linear(fc2, algo="ring"))
    x = seeded(7, 128, 64)[block(128, world, rank)].clone().requires_grad_()
    with collmm.trace(path, mlp) as t:
        mlp(x).square().sum().backward()
    lines = t.table.strip().splitlines()
    assert len(lines) == 5, t.table  # header + 4 calls: forward ag, rs; backward ag, rs
    rows = [line.split(None, 14) for line in lines[1:]]
    ops = [row[1] for row in rows]
    assert sorted(ops) == ["ag_gemm", "ag_gemm", "gemm_rs", "gemm_rs"], t.table
    # each call named by its module and pass; E from the same (slowest) rank's time, t_gemm, t_comm
    assert [row[14] for row in rows] == ["0 forward", "2 forward", "2 backward", "0 backward"], t.table
    for row in rows:
        time_us, gemm, comm, e = float(row[8]), float(row[9]), float(row[10]), float(row[12])
        if min(gemm, comm) > 1:
            assert abs(e - (gemm + comm - time_us) / min(gemm, comm)) < 0.01 + 0.2 / min(gemm, comm), row
        assert row[13] == "-", row  # 128 rows split as collmm splits them: not padded
    if rank == 0:
        trace = json.load(open(path + ".json"))
        names = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
        assert any(n.startswith("ag_gemm ring step") for n in names) and any(n.startswith("gemm_rs ring") for n in names)
        assert {e["pid"] for e in trace["traceEvents"] if e.get("ph") == "X"} == set(range(world))
        for i, op in enumerate(ops):
            svg = open(f"{path}-{i}-{op}-ring.svg").read()
            assert svg.startswith("<svg") or "<svg" in svg[:200], svg[:200]
        assert open(path + ".txt").read() == t.table
    # an uneven split of [seq, batch] rows runs padded: the table has the caller's M and the plan's
    x = seeded(8, 5, 2, 16)[block(5, world, rank)]
    with collmm.trace(path + "-padded") as t:
        collmm.fused_all_gather_matmul(x, [seeded(9, 16, 8)], algo="ring")
    row = t.table.strip().splitlines()[1].split(None, 14)
    padded = "-" if world == 1 else str(2 * collmm.block_size(5, world, 0) * world)
    assert row[3] == "10" and row[13] == padded and row[14] == "(no module) forward", t.table


def memo_case(rank, world):
    """What a call settled is reused only as agreed now: a rank's sizes that changed while rank 0's
    call stayed the same (check "every": rank 0 sends what it sent before) or under another
    spelling of the same call (gather_dim -2 for 0) reach every rank, also after check="first";
    scatter_size=-1 after None is refused on every rank, not taken for None."""
    import collmm

    collmm.set_timeout(60)  # a wrong memo makes the ranks run different plans: bounded, not a hang
    group = dist.group.WORLD.group_name
    k, n = 16, 8
    b = seeded(2, k, n)
    even, uneven = [4] * world, [4 + 2 * q for q in range(world)]  # rank 0's shard the same in both
    for sizes, gather_dim, check in ((even, 0, "every"), (uneven, 0, "every"), (even, 0, "every"),
                                     (uneven, -2, "every"), (uneven, 0, "first")):
        collmm.set_check(check)
        a_full = seeded(1, sum(sizes), k)
        a = a_full[sum(sizes[:rank]):sum(sizes[:rank + 1])].clone()
        for _ in range(2):
            _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], gather_dim, group, algo="ring")
            assert_close(c, (a_full.double() @ b.double()).float(), f"rows {sizes} gather_dim {gather_dim} {check}")
    h, w = seeded(3, 4 * world, 6), seeded(4, 6, 5)
    torch.ops.collmm.fused_matmul_reduce_scatter(h, w, "sum", 0, group)
    try:
        torch.ops.collmm.fused_matmul_reduce_scatter(h, w, "sum", 0, group, scatter_size=-1)
        raise AssertionError("scatter_size=-1 after None: no error")
    except ValueError as e:
        assert "scatter_size is -1" in str(e), str(e)
    collmm.set_check("every")
    collmm.set_timeout(0)


def plan_cache_case(rank, world):
    """More shapes than a session keeps plans for (16), twice over, with check "every" and "first":
    every result is right, also for a shape called again after its plan was dropped (the memos that
    pointed at dropped plans go with them)."""
    import collmm

    group = dist.group.WORLD.group_name
    k, n = 8, 4
    b = seeded(2, k, n)
    for check in ("every", "first"):
        collmm.set_check(check)
        for _ in range(2):
            for rows in range(1, 19):
                a_full = seeded(1, rows * world, k)
                a = a_full[rows * rank:rows * (rank + 1)].clone()
                _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")
                assert_close(c, (a_full.double() @ b.double()).float(), f"rows {rows} {check}")
    collmm.set_check("every")


def comm_path_case(rank, world):
    """collmm.set_comm takes "auto" and "c10d" and refuses anything else on every rank; on a gloo
    group every transfer goes through c10d whatever it says (the direct path is NCCL's), and
    torch.ops.collmm.last_comm() says so; a run without a transfer says "none"."""
    import collmm

    try:
        collmm.set_comm("nccl-please")
        raise AssertionError("set_comm of an unknown path: no error")
    except ValueError as e:
        assert "auto or c10d" in str(e), str(e)
    group = dist.group.WORLD.group_name
    a_full, a, b = _ag_inputs(rank, world)
    for path in ("auto", "c10d", "auto"):
        collmm.set_comm(path)
        for _ in range(2):
            _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")
            assert_close(c, (a_full.double() @ b.double()).float(), f"ring, comm {path}")
            assert torch.ops.collmm.last_comm() == ("c10d" if world > 1 else "none"), torch.ops.collmm.last_comm()
            assert "algo=ring" in torch.ops.collmm.last_plan().split(), torch.ops.collmm.last_plan()
    collmm.set_comm("auto")
    # auto's report: the model's alternatives and, at world > 1, the candidates timed, each with its
    # steps, and the pick, which is the plan the call ran; the same text on every rank.
    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="auto")
    assert_close(c, (a_full.double() @ b.double()).float(), "auto")
    report = torch.ops.collmm.last_auto()
    assert "# auto:" in report and "alternatives (predicted, fastest first)" in report, report
    if world > 1:
        assert "# auto measured:" in report and "to the fewest host steps" in report and "<- pick" in report, report
        pick = [line for line in report.splitlines() if line.endswith("<- pick") or "<- pick  (" in line]
        assert len(pick) == 1 and f"algo={pick[0].split()[1]}" in torch.ops.collmm.last_plan().split(), (
            pick, torch.ops.collmm.last_plan())
    reports = [None] * world
    dist.all_gather_object(reports, report)
    assert all(r == report for r in reports), reports
    # A repeated call reuses its first call's decision and reports that one, with either check.
    a2_full, a2, b2 = _ag_inputs(rank, world, rows=24, k=16, n=40)
    for check in ("every", "first"):
        collmm.set_check(check)
        torch.ops.collmm.fused_all_gather_matmul(a2, [b2], 0, group, algo="auto")
        other = torch.ops.collmm.last_auto()
        assert other != report, other
        _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="auto")
        assert_close(c, (a_full.double() @ b.double()).float(), f"auto again, check {check}")
        assert torch.ops.collmm.last_auto() == report, (check, torch.ops.collmm.last_auto(), report)
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")  # not auto: the report stays
        assert torch.ops.collmm.last_auto() == report, check
    collmm.set_check("every")

