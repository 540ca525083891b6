"""The ops' cases, for test_ops.py (CPU, gloo) and test_gpu.py / gpu_cases.py (CUDA, NCCL): every
op x algo, uneven M (and uneven N / K splits: collmm's and torch.chunk's, one that leaves a rank no K),
both B layouts (row-major [K, N] and an
nn.Linear weight's w.t()), several Bs, leading batch dims, float32 / float64 / bfloat16, against
the plain computation on the same seeded global tensors. No pytest here (gpu_cases.py runs
without it)."""
import torch
import torch.distributed as dist

from collmm import ALGOS
from dist_util import assert_close, block, chunk, seeded



def as_layout(b: torch.Tensor, layout: str) -> torch.Tensor:
    """b [K, N] itself (kn), or the transposed view of a row-major [N, K] copy, as w.t() of nn.Linear (nk)."""
    return b.contiguous() if layout == "kn" else b.t().contiguous().t()


def ag_cases(rank, world, device="cpu"):
    group = dist.group.WORLD.group_name
    cases = [(d, algo, layout) for d in (torch.float32, torch.float64) for algo in ALGOS for layout in ("kn", "nk")]
    cases += [(torch.bfloat16, "ring", "nk"), (torch.bfloat16, "sequential", "kn")]
    for dtype, algo, layout in cases:
        what = f"ag {dtype} {algo} {layout} rank {rank}/{world}"
        m, k, n = 4 * world + 1, 6, 3 * world + 2  # neither M nor N divisible by the world size (world > 1)
        a_full, b_full, b2 = seeded(1, m, k, dtype=dtype), seeded(2, k, n, dtype=dtype), seeded(3, k, 5, dtype=dtype)
        a = a_full[block(m, world, rank)].to(device)
        b_r = b_full[:, block(n, world, rank)]
        b = as_layout(b_r.to(device), layout)
        a_before, b_before = a.clone(), b.clone()
        gathered, (c, c2) = torch.ops.collmm.fused_all_gather_matmul(a, [b, b2.to(device)], 0, group, return_A=True,
                                                                     algo=algo)
        assert_close(gathered, a_full, what + " gathered A")
        assert_close(c, (a_full.double() @ b_r.double()).to(dtype), what + " A @ Bs[0]")
        assert_close(c2, (a_full.double() @ b2.double()).to(dtype), what + " A @ Bs[1]")
        assert torch.equal(a, a_before) and torch.equal(b, b_before), what + ": inputs changed"

    for algo in ALGOS:  # leading dims [s, b, K] gathered along dim 0; return_A=False; w's rows (N)
        what = f"ag 3-D {algo} rank {rank}/{world}"  # split as torch.chunk splits them (3, 3, 1 at world 3)
        s, bt, k, n = 2 * world, 3, 4, 7
        x_full, w = seeded(4, s, bt, k), seeded(5, n, k)  # w as nn.Linear stores it
        x = x_full[block(s, world, rank)].to(device)
        w_r = w[chunk(n, world, rank)].to(device)
        none, (y,) = torch.ops.collmm.fused_all_gather_matmul(x, [w_r.t()], 0, group, return_A=False, algo=algo)
        assert none is None, what
        assert_close(y, (x_full.double() @ w[chunk(n, world, rank)].t().double()).float(), what)


def ran(fields, what):
    """The last call ran a plan with these options, where its executor tells (the ATen executor's
    last_plan(): on CUDA, and on CPU unless set_cpu_executor("host"))."""
    plan = torch.ops.collmm.last_plan()
    assert not plan or set(fields) <= set(plan.split()), (what, plan)


def entry_cases(rank, world, device="cpu"):
    """algo strings with plan options of their own, as collmm-bench's --algo spells them: pieces 1..4
    with the ring and bidir of both ops (the rings' exposed edge cut in pieces), equal and halving
    sizes (where the edge chunk has the 2^(pieces-1) rows halving needs), uneven M; the all-reduce's
    ring in waves (ring:waves2); the ag ring's merge, its backward without it. Each runs the plan it
    names (ran)."""
    group = dist.group.WORLD.group_name
    cases = [(a, s, p) for a in ("ring", "bidir") for s in ("equal", "halving") for p in (1, 2, 3, 4)
             if s == "equal" or (p > 1 and 2 ** (p - 1) <= (8 if a == "ring" else 4))]
    for base, sizes, pieces in cases:
        algo = base if pieces == 1 else f"{base}:pieces{pieces}" + ("h" if sizes == "halving" else "")
        plan = {f"algo={base}", f"pieces={pieces}", f"piece_sizes={sizes if pieces > 1 else 'equal'}"}
        what = f"{algo} rank {rank}/{world}"
        m, k, n = 8 * world + world // 2 + 1, 6, 3 * world + 2  # bidir: every half chunk has >= 4 rows
        a_full, b_full = seeded(10, m, k, dtype=torch.float64), seeded(11, k, n, dtype=torch.float64)
        b_r = b_full[:, block(n, world, rank)].contiguous()
        _, (c,) = torch.ops.collmm.fused_all_gather_matmul(
            a_full[block(m, world, rank)].to(device), [b_r.to(device)], 0, group, return_A=False, algo=algo)
        assert_close(c, a_full @ b_r, "ag " + what)
        ran(plan, "ag " + what)
        h_full, w_full = seeded(12, m, 4 * world + 1, dtype=torch.float64), seeded(13, 4 * world + 1, 5,
                                                                                  dtype=torch.float64)
        kb = block(4 * world + 1, world, rank)
        y = torch.ops.collmm.fused_matmul_reduce_scatter(
            h_full[:, kb].contiguous().to(device), w_full[kb].to(device), "sum", 0, group, algo=algo)
        assert_close(y, (h_full @ w_full)[block(m, world, rank)], "rs " + what)
        ran(plan, "rs " + what)
    m = 4 * world + 1
    h_full, w_full = seeded(14, m, 2 * world + 1, dtype=torch.float64), seeded(15, 2 * world + 1, 5,
                                                                              dtype=torch.float64)
    kb = block(2 * world + 1, world, rank)
    y = torch.ops.collmm.fused_matmul_all_reduce(h_full[:, kb].contiguous().to(device), w_full[kb].to(device),
                                                 "sum", group, algo="ring:waves2")
    assert_close(y, h_full @ w_full, f"ar ring:waves2 rank {rank}/{world}")
    ran({"algo=ring", "waves=2"}, "ar ring:waves2")
    a_full, b_full = seeded(16, m, 6, dtype=torch.float64), seeded(17, 6, 3, dtype=torch.float64)
    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a_full[block(m, world, rank)].to(device), [b_full.to(device)],
                                                       0, group, algo="ring:merge2")
    assert_close(c, a_full @ b_full, f"ag ring:merge2 rank {rank}/{world}")
    ran({"algo=ring", "merge=2"}, "ag ring:merge2")
    # The backward's reduce-scatter runs the ring without the forward's options (gemm_rs has no merge).
    a_r = a_full[block(m, world, rank)].to(device).requires_grad_()
    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a_r, [b_full.to(device)], 0, group, algo="ring:merge2")
    c.sum().backward()
    ran({"algo=ring", "merge=1"}, "ag ring:merge2's backward")
    assert_close(a_r.grad, (world * torch.ones(m, 3, dtype=torch.float64) @ b_full.t())[block(m, world, rank)],
                 f"ag ring:merge2 backward rank {rank}/{world}")
    try:  # pieces is for the ring and bidir only: refused on every rank
        torch.ops.collmm.fused_all_gather_matmul(torch.ones(2, 3, device=device), [torch.ones(3, 2, device=device)],
                                                 0, group, algo="pipelined:pieces2")
    except ValueError as e:
        assert "ag_gemm's pipelined does not take these options" in str(e), str(e)
    else:
        raise AssertionError("pipelined:pieces2 was accepted")
    m = 8 * world + world // 2 + 1  # bidir's half chunks: 4 rows, so 3 pieces of halving size at most
    try:
        torch.ops.collmm.fused_matmul_reduce_scatter(torch.ones(m, 2, device=device), torch.ones(2, 3, device=device),
                                                     "sum", 0, group, algo="bidir:pieces4h")
    except ValueError as e:
        assert "halving needs 8" in str(e) and "at most 3 pieces" in str(e), str(e)
    else:
        raise AssertionError("bidir with 4 pieces of halving size of 4-row halves was accepted")


def rs_cases(rank, world, device="cpu"):
    group = dist.group.WORLD.group_name
    cases = [(d, algo, layout, op) for d in (torch.float32, torch.float64) for algo in ALGOS
             for layout in ("kn", "nk") for op in ("sum", "avg")]
    cases += [(torch.bfloat16, "ring", "nk", "sum"), (torch.bfloat16, "pipelined", "kn", "avg")]
    for dtype, algo, layout, reduce_op in cases:
        what = f"rs {dtype} {algo} {layout} {reduce_op} rank {rank}/{world}"
        m, k, n = 3 * world + 1, 4 * world + 1, 5  # M and K not divisible by the world size (world > 1)
        a_full, b_full = seeded(6, m, k, dtype=dtype), seeded(7, k, n, dtype=dtype)
        a = a_full[:, block(k, world, rank)].contiguous().to(device)
        b_r = b_full[block(k, world, rank)]
        b = as_layout(b_r.to(device), layout)
        c = torch.ops.collmm.fused_matmul_reduce_scatter(a, b, reduce_op, 0, group, algo=algo)
        want = a_full.double() @ b_full.double()
        if reduce_op == "avg":
            want = want / world
        # bf16 inputs: every rank's partial is rounded from its f32 GEMM before the sum
        assert_close(c, want[block(m, world, rank)].to(dtype), what)

    for algo in ALGOS:  # leading dims [s, b, K_r] scattered along dim 0; K split as torch.chunk splits it
        what = f"rs 3-D {algo} rank {rank}/{world}"
        s, bt, k, n = 2 * world, 2, 3 * world + 1, 4
        h_full, w = seeded(8, s, bt, k), seeded(9, n, k)
        h = h_full[..., chunk(k, world, rank)].contiguous().to(device)
        w_r = w[:, chunk(k, world, rank)].contiguous().to(device)
        y = torch.ops.collmm.fused_matmul_reduce_scatter(h, w_r.t(), "sum", 0, group, algo=algo)
        assert_close(y, (h_full.double() @ w.t().double()).float()[block(s, world, rank)], what)


def ar_cases(rank, world, device="cpu"):
    """fused_matmul_all_reduce against A @ B and all_reduce (in float64) on the same seeded global
    tensors: every algo, float32 / float64 (bfloat16 for two), both B layouts, sum and avg, K split
    unevenly (collmm's split, torch.chunk's with a rank of no K at world 4, one rank with all of it),
    a 1-D A and [s, b, K_r] inputs."""
    group = dist.group.WORLD.group_name
    cases = [(d, algo, layout, op) for d in (torch.float32, torch.float64) for algo in ALGOS
             for layout in ("kn", "nk") for op in ("sum", "avg")]
    cases += [(torch.bfloat16, "ring", "nk", "sum"), (torch.bfloat16, "bidir", "kn", "avg")]
    m, k, n = 3 * world + 1, 4 * world + 1, 5  # K not divisible by the world size (world > 1)
    for dtype, algo, layout, reduce_op in cases:
        what = f"ar {dtype} {algo} {layout} {reduce_op} rank {rank}/{world}"
        a_full, b_full = seeded(30, m, k, dtype=dtype), seeded(31, k, n, dtype=dtype)
        ks = block(k, world, rank)
        a = a_full[:, ks].contiguous().to(device)
        b = as_layout(b_full[ks].to(device), layout)
        a_before, b_before = a.clone(), b.clone()
        c = torch.ops.collmm.fused_matmul_all_reduce(a, b, reduce_op, group, algo=algo)
        want = a.double() @ b.double()  # the unfused computation: this rank's product, all-reduced
        dist.all_reduce(want)
        if reduce_op == "avg":
            want = want / world
        assert_close(c, want.to(dtype), what)
        assert torch.equal(a, a_before) and torch.equal(b, b_before), what + ": inputs changed"

    splits = {"chunk": [chunk(3 * world + 1, world, q) for q in range(world)],  # world 4: 4, 4, 4, 1
              "chunk of world + 1": [chunk(world + 1, world, q) for q in range(world)],  # worlds 3, 4: a rank of none
              "one rank": [slice(0, 5) if q == 0 else slice(5, 5) for q in range(world)]}
    for algo in ALGOS:
        for name, parts in splits.items():  # [s, b, K_r] with K split as named, w.t() as nn.Linear holds it
            what = f"ar 3-D {algo} K split {name} rank {rank}/{world}"
            k = parts[-1].stop
            h_full, w = seeded(32, 2 * world, 2, k), seeded(33, 4, k)
            h = h_full[..., parts[rank]].contiguous().to(device)
            y = torch.ops.collmm.fused_matmul_all_reduce(h, w[:, parts[rank]].contiguous().to(device).t(), "sum",
                                                         group, algo=algo)
            assert_close(y, (h_full.double() @ w.t().double()).float(), what)
        a_full, b_full = seeded(34, 2 * world + 1), seeded(35, 2 * world + 1, 3)  # a 1-D A: [K_r] -> [N]
        ks = block(2 * world + 1, world, rank)
        y = torch.ops.collmm.fused_matmul_all_reduce(a_full[ks].to(device), b_full[ks].to(device), "sum", group,
                                                     algo=algo)
        assert_close(y, (a_full.double() @ b_full.double()).float(), f"ar 1-D A {algo} rank {rank}/{world}")


def deprecated_keyword_cases(rank, world):
    """collmm.fused_all_gather_matmul's and fused_matmul_reduce_scatter's deprecated pieces= and
    piece_sizes=: a FutureWarning (at the caller's line) naming the one algo string, and the same bits
    as that string."""
    import warnings

    import collmm

    m, k, n = 8 * world + 3, 6, 5  # every rank's chunk has the 8 rows 4 pieces of halving size need
    a_full, b_full = seeded(30, m, k, dtype=torch.float64), seeded(31, k, n, dtype=torch.float64)
    a = a_full[block(m, world, rank)]
    h = seeded(32, m, 2 * world, dtype=torch.float64)[:, block(2 * world, world, rank)].contiguous()
    w = seeded(33, 2 * world, n, dtype=torch.float64)[block(2 * world, world, rank)]
    calls = [(lambda **kw: collmm.fused_all_gather_matmul(a, [b_full], return_A=False, **kw)[1][0], "ag"),
             (lambda **kw: collmm.fused_matmul_reduce_scatter(h, w, **kw), "rs")]
    for call, what in calls:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            old = call(algo="ring", pieces=4, piece_sizes="halving")
        assert [x.category for x in seen] == [FutureWarning], (what, [str(x.message) for x in seen])
        assert "algo='ring:pieces4h'" in str(seen[0].message) and seen[0].filename == __file__, (what, seen[0])
        ran({"pieces=4", "piece_sizes=halving"}, what)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            new = call(algo="ring:pieces4h")
        assert torch.equal(old, new), what
