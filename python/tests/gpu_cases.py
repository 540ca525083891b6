"""The GPU cases (CUDA tensors, NCCL groups), for test_gpu.py and for machines without pytest:

    PYTHONPATH=python python python/tests/gpu_cases.py     # every GPU case; exit code 1 on a failure
"""
import os
import sys

import torch

from dist_util import run_world


def gpu_cases(rank, world, share_gpu):
    from layer_cases import mlp_cases, weight_grad_layout_cases
    from ar_cases import autograd_cases
    from op_cases import ag_cases, ar_cases, entry_cases, rs_cases
    from shard_cases import seq_parallel_mlp

    device = torch.device("cuda", 0 if share_gpu else rank)
    if torch.distributed.get_backend() == "nccl":  # CPU tensors on an NCCL-only group: collmm's error, at once
        try:
            torch.ops.collmm.fused_all_gather_matmul(torch.ones(2, 2), [torch.ones(2, 2)], 0,
                                                     torch.distributed.group.WORLD.group_name)
            raise AssertionError("CPU tensors on an NCCL-only group: no error")
        except ValueError as e:
            assert "has no backend for cpu" in str(e), str(e)
    ag_cases(rank, world, device)
    rs_cases(rank, world, device)
    ar_cases(rank, world, device)
    autograd_cases(rank, world, device)  # the all-reduce's
    entry_cases(rank, world, device)
    mlp_cases(rank, world, device)
    weight_grad_layout_cases(rank, world, device)
    seq_parallel_mlp(rank, world, device)  # uneven [seq, batch, hidden] shards, biases
    trace_on_gpu(rank, world, device)
    kernels_under_ranges(rank, world, device)
    direct_comm_cases(rank, world, device)


def direct_comm_cases(rank, world, device):
    """Every algorithm of both ops (the ring in pieces too, even and uneven M) gives the same bits with
    its transfers on the group's NCCL communicator called directly (collmm.set_comm "auto", once c10d
    has made the communicator) as through c10d's calls; last_comm() after each call says which way it
    went: the rings' sends and receives always on the communicator, the collectives too where their
    parts are equal (uneven parts go through c10d's padded collectives)."""
    import collmm
    from collmm import ALGOS
    from dist_util import assert_close, block, seeded

    group = torch.distributed.group.WORLD.group_name
    ag, rs = torch.ops.collmm.fused_all_gather_matmul, torch.ops.collmm.fused_matmul_reduce_scatter

    def want(algo, m):
        if world == 1:
            return ("nccl", "none")  # sequential's gather of one rank is a transfer; the ring moves nothing
        if algo.split(":")[0] in ("ring", "bidir") or (algo == "sequential" and m % world == 0):
            return ("nccl",)
        return ("nccl", "nccl+c10d", "c10d")  # pipelined's stages, auto's pick, uneven parts

    for m in (64 * world, 64 * world + 5):
        a_full, b = seeded(80, m, 96, dtype=torch.bfloat16), seeded(81, 96, 32 * world, dtype=torch.bfloat16)
        h, w = seeded(82, m, 48 * world, dtype=torch.bfloat16), seeded(83, 48 * world, 40, dtype=torch.bfloat16)
        a = a_full[block(m, world, rank)].to(device)
        b_r = b[:, block(32 * world, world, rank)].to(device)
        h_r = h[:, block(48 * world, world, rank)].contiguous().to(device)
        w_r = w[block(48 * world, world, rank)].to(device)
        for algo in ALGOS + ("ring:pieces3", "bidir:pieces2"):
            what = f"M {m} {algo} rank {rank}/{world}"
            got = {}
            for path in ("c10d", "auto", "auto"):  # the second auto: the plan already prepared
                collmm.set_comm(path)
                _, (c,) = ag(a, [b_r], 0, group, algo=algo)
                took_ag = torch.ops.collmm.last_comm()
                y = rs(h_r, w_r, "sum", 0, group, algo=algo)
                took_rs = torch.ops.collmm.last_comm()
                if path == "c10d":
                    assert "nccl" not in (took_ag + took_rs), f"{what}: set_comm c10d, yet {took_ag} / {took_rs}"
                else:
                    assert took_ag in want(algo, m), f"{what}: ag went through {took_ag}, not {want(algo, m)}"
                    assert took_rs in want(algo, m), f"{what}: rs went through {took_rs}, not {want(algo, m)}"
                got.setdefault(path, []).append((c, y))
            collmm.set_comm("auto")
            assert_close(got["auto"][1][0], (a_full.double() @ b[:, block(32 * world, world, rank)].double()).to(
                torch.bfloat16), what + " ag")
            for c, y in got["auto"]:
                if algo != "auto":  # auto's pick may differ between the calls: its choice is measured
                    assert torch.equal(c, got["c10d"][0][0]), f"{what}: ag differs between nccl and c10d"
                    assert torch.equal(y, got["c10d"][0][1]), f"{what}: rs differs between nccl and c10d"


def kernels_under_ranges(rank, world, device):
    """In a torch.profiler trace of one ring call (CPU and CUDA activity), every GEMM kernel was
    launched inside a `collmm ... gemm` range and every NCCL kernel inside a `collmm ... sendrecv`
    range (the launch's CPU time, found through the kernel's correlation id, within the range)."""
    import json
    import tempfile

    from dist_util import block, seeded

    group = torch.distributed.group.WORLD.group_name
    a = seeded(70, 256 * world, 512)[block(256 * world, world, rank)].to(device)
    b = seeded(71, 512, 256).to(device)
    ag = torch.ops.collmm.fused_all_gather_matmul
    ag(a, [b], 0, group, algo="ring")  # the plan, before the profile
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with tempfile.TemporaryDirectory() as d:
        with torch.profiler.profile(activities=acts) as prof:
            ag(a, [b], 0, group, algo="ring")
            torch.cuda.synchronize()
        prof.export_chrome_trace(f"{d}/trace.json")
        events = json.load(open(f"{d}/trace.json"))["traceEvents"]
    ranges = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("collmm ag_gemm ring step")]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert ranges, "no collmm range in the profile"
    assert kernels, "no kernel in the profile"

    def kind(name):
        low = name.lower()
        return "sendrecv" if "nccl" in low else "gemm" if any(w in low for w in ("gemm", "cutlass", "xmma", "nvjet")) \
            else None

    checked, misplaced = 0, []
    for k in kernels:
        want = kind(k["name"])
        launch = launches.get(k.get("args", {}).get("correlation"))
        if want is None or launch is None:
            continue
        around = [r for r in ranges if r["ts"] <= launch["ts"] <= r["ts"] + r["dur"]]
        if not any(r["name"].endswith(want) for r in around):
            misplaced.append(f"{k['name'][:60]} ({want}) launched under {[r['name'] for r in around]}")
        checked += 1
    gemm_ranges = sum(r["name"].endswith("gemm") for r in ranges)
    assert checked >= gemm_ranges, f"{checked} kernels matched to launches, {gemm_ranges} gemm ranges"
    assert not misplaced, "kernels outside their ranges:\n" + "\n".join(misplaced)
    if world > 1:
        assert any(kind(k["name"]) == "sendrecv" for k in kernels), "no NCCL kernel in the profile"


def shared_gather_case(rank, world, share_gpu):
    """SharedGather on CUDA (the torchtitan-style Llama of python/examples/llama_tp.py, f64): q, k, v
    and w1, w3 share one gather each, so a forward and backward runs as many collectives of each kind
    as torch's plan, with its gradients; 3 AdamW steps at an uneven and an even sequence length give
    the unsharded model's losses and parameters."""
    import shared_gather_cases as sg

    device = torch.device("cuda", 0 if share_gpu else rank)
    sg.llama_collectives_vs_torch(rank, world, device)
    sg.llama_trains_as_unsharded(rank, world, seq=4 * world + 1, device=device)
    sg.llama_trains_as_unsharded(rank, world, seq=4 * world, device=device)


def compiled_case(rank, world, share_gpu):
    """torch.compile(mode="reduce-overhead") of a function of both ops (CUDA graphs by inductor's
    cudagraph trees) after one eager call of the shape: every call equals the eager op's, and
    inductor skipped no CUDA graph."""
    from torch._dynamo.utils import counters

    from dist_util import block, seeded

    device = torch.device("cuda", 0 if share_gpu else rank)
    group = torch.distributed.group.WORLD.group_name
    rows, k, n = 64 * world, 256, 128
    b = seeded(81, k, n).to(device)
    w = seeded(82, n * world, k)[block(n * world, world, rank)].to(device)

    def step(a, b, w):
        _, (h,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, return_A=False, algo="ring")
        return torch.ops.collmm.fused_matmul_reduce_scatter(torch.relu(h), w, "sum", 0, group, algo="ring")

    a0 = seeded(80, rows, k)[block(rows, world, rank)].to(device)
    step(a0, b, w)  # the eager first call of each shape
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for i in range(6):
        a_i = seeded(90 + i, rows, k)[block(rows, world, rank)].to(device)
        got = compiled(a_i, b, w).clone()
        want = step(a_i, b, w)
        assert torch.equal(got, want), f"call {i}: the compiled step differs from the eager one"
    skips = dict(counters["inductor"])
    assert not any("cudagraph_skips" in key and v for key, v in skips.items()), f"inductor skipped CUDA graphs: {skips}"


def trace_on_gpu(rank, world, device):
    """collmm.trace on CUDA tensors (CUDA events per step): a table row per call, with times."""
    import tempfile

    import collmm

    from dist_util import block, seeded

    group = torch.distributed.group.WORLD.group_name
    a = seeded(60, 64 * world, 256)[block(64 * world, world, rank)].to(device)
    b = seeded(61, 256, 128).to(device)
    with tempfile.TemporaryDirectory() as d, collmm.trace(f"{d}/gpu") as t:
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="sequential")
    rows = [line.split() for line in t.table.strip().splitlines()[1:]]
    assert [r[2] for r in rows] == ["ring", "sequential"], t.table
    assert all(float(r[8]) > 0 for r in rows), t.table  # time_us from the CUDA events


def no_host_sync_case(rank, world, share_gpu):
    """The op only enqueues work on its second and later calls (the agreement over a gloo side, or
    over the group's Store on an NCCL-only group): it returns while a long GEMM queued before it is
    still running, and the result is right afterwards."""
    import time

    from dist_util import assert_close, block, seeded

    device = torch.device("cuda", 0 if share_gpu else rank)
    group = torch.distributed.group.WORLD.group_name
    big = torch.randn(8192, 8192, device=device)
    a_full, b = seeded(30, 64 * world, 256), seeded(31, 256, 128)
    a, b_dev = a_full[block(64 * world, world, rank)].to(device), b.to(device)  # copies from pageable memory wait
    torch.ops.collmm.fused_all_gather_matmul(a, [b_dev], 0, group, algo="ring")  # plan prepared
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    busy = big @ big @ big  # ~ms of work queued on the current stream
    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b_dev], 0, group, algo="ring")
    issued = time.perf_counter() - t0
    torch.cuda.synchronize()
    done = time.perf_counter() - t0
    assert issued < 0.5 * done, f"the op waited for the device: issued after {issued:.4f} s, done after {done:.4f} s"
    assert_close(c, (a_full.double() @ b.double()).float(), "ring on CUDA")
    took = torch.ops.collmm.last_comm()
    assert took == ("nccl" if world > 1 else "none"), f"the timed call's transfers went through {took}"
    del busy


def host_bounded_case(rank, world, share_gpu):
    """Each op's second and later calls return within a few ms while a queue of GEMMs runs,
    on every rank, the first of each kind of transfer on the group's NCCL communicator included
    (NCCL connects a peer or a collective's algorithm on its first use: 12-42 ms in ncclGroupEnd,
    which collmm now pays in a plan's first call). The bound is loose (timing on a shared machine);
    python/bench/host_wait.py measures the worst case. Results are checked on every call."""
    import time

    import collmm
    from dist_util import assert_close, block, seeded

    device = torch.device("cuda", 0 if share_gpu else rank)
    group = torch.distributed.group.WORLD.group_name
    m, n, k = 64 * world, 128, 256
    a_full, b_full = seeded(40, m, k), seeded(41, k, n)
    rows, cols = block(m, world, rank), block(k, world, rank)
    a, b = a_full[rows].to(device), b_full.to(device)
    a_k, b_k = a_full[:, cols].contiguous().to(device), b_full[cols].to(device)
    full = (a_full.double() @ b_full.double()).float()
    big = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    ops = [("ag ring", lambda: torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")[1][0], full),
           ("ag sequential",
            lambda: torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="sequential")[1][0], full),
           ("rs ring", lambda: torch.ops.collmm.fused_matmul_reduce_scatter(a_k, b_k, "sum", 0, group, algo="ring"),
            full[rows]),
           ("rs sequential",
            lambda: torch.ops.collmm.fused_matmul_reduce_scatter(a_k, b_k, "sum", 0, group, algo="sequential"),
            full[rows]),
           ("ar ring", lambda: torch.ops.collmm.fused_matmul_all_reduce(a_k, b_k, "sum", group, algo="ring"), full)]
    collmm.set_check("first")  # "every" agrees with the other ranks on every call: their skew is not the op's
    try:
        for label, call, want in ops:
            assert_close(call(), want, f"{label}, first call")  # plan prepared, transfers connected
            worst = 0.0
            for i in range(6):
                torch.cuda.synchronize()
                torch.distributed.barrier()
                torch.cuda.synchronize()
                for _ in range(12):  # > 10 ms of work per rank queued before the call
                    big @ big
                t0 = time.perf_counter()
                c = call()
                took = time.perf_counter() - t0
                running = not torch.cuda.current_stream().query()
                worst = max(worst, took)
                assert took < 0.005, (f"{label}: call {i + 2} held the host {took * 1e3:.1f} ms "
                                      f"(the queue still running at return: {running})")
                assert_close(c, want, f"{label}, call {i + 2}")
            if world > 1:
                assert torch.ops.collmm.last_comm() == "nccl", f"{label}: {torch.ops.collmm.last_comm()}"
            print(f"rank {rank} {label}: worst host time of calls 2-7 {worst * 1e6:.0f} us", flush=True)
    finally:
        collmm.set_check("every")


def stopped_peer_case(rank, world, share_gpu):
    """A peer that stops calling, where nothing on the host waits for it (check "first": no
    agreement; the transfers enqueued on the group's communicator by collmm itself): the last rank
    sleeps, rank 0's call returns, and rank 0's synchronization returns within the bound
    (collmm.set_timeout) plus a few seconds, because collmm's watchdog aborts the group's
    communicator; rank 0's next call raises DistBackendError saying why."""
    import time

    import collmm
    from dist_util import block, seeded

    device = torch.device("cuda", 0 if share_gpu else rank)
    group = torch.distributed.group.WORLD.group_name
    collmm.set_check("first")
    collmm.set_timeout(5)
    a = seeded(60, 64 * world, 128)[block(64 * world, world, rank)].to(device)
    b = seeded(61, 128, 64).to(device)
    ag = torch.ops.collmm.fused_all_gather_matmul
    for _ in range(3):  # the first call through c10d, the next ones on the communicator itself
        ag(a, [b], 0, group, algo="ring")
    torch.cuda.synchronize()
    assert torch.ops.collmm.last_comm() == "nccl", torch.ops.collmm.last_comm()
    torch.distributed.barrier()
    if rank == world - 1:
        time.sleep(25)  # stopped: never calls again
        return
    t0 = time.perf_counter()
    ag(a, [b], 0, group, algo="ring")
    issued = time.perf_counter() - t0
    torch.cuda.synchronize()
    waited = time.perf_counter() - t0
    assert issued < 1.0, f"the call itself waited {issued:.1f} s"
    assert 4.0 < waited < 15.0, f"the synchronization returned after {waited:.1f} s (bound 5 s)"
    try:
        ag(a, [b], 0, group, algo="ring")
        raise AssertionError("a call after the watchdog aborted the group: no error")
    except torch.distributed.DistBackendError as e:
        assert "has not finished on the device" in str(e) and "peer stopped" in str(e), str(e)


def capture_case(rank, world, share_gpu):
    """After one eager call of each shape, the three ops are captured in a CUDA graph (torch.cuda.graph)
    and replayed 100 times with fresh inputs copied into the static ones: each result equals the
    eager op's. A shape never run eagerly raises collmm's ValueError under capture. The
    tensor-parallel MLP's forward and backward captured by torch.cuda.make_graphed_callables give
    the eager step's output and gradients."""
    from dist_util import assert_close, block, local, seeded

    from collmm.torch import ColumnParallelLinear, RowParallelLinear

    device = torch.device("cuda", 0 if share_gpu else rank)
    group = torch.distributed.group.WORLD.group_name
    ag, rs = torch.ops.collmm.fused_all_gather_matmul, torch.ops.collmm.fused_matmul_reduce_scatter
    ar = torch.ops.collmm.fused_matmul_all_reduce
    rows, k, n = 64 * world + 3, 256, 128
    b = seeded(41, k, n).to(device)
    w = seeded(42, k * world, n)[block(k * world, world, rank)].to(device)
    static_a = seeded(40, rows, k)[block(rows, world, rank)].to(device)
    static_h = torch.zeros(rows, block(k * world, world, rank).stop - block(k * world, world, rank).start,
                           device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # the eager first calls (agreement, plans), as torch.cuda.graph wants warm-up
        ag(static_a, [b], 0, group, algo="ring")
        rs(static_h, w, "sum", 0, group, algo="ring")
        ar(static_h, w, "sum", group, algo="ring")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            _, (static_c,) = ag(static_a, [b], 0, group, algo="ring")
            static_y = rs(static_h, w, "sum", 0, group, algo="ring")
            static_s = ar(static_h, w, "sum", group, algo="ring")
    except Exception as e:  # noqa: BLE001 - say which layer refused
        where = "several ranks on one GPU (NCCL_HOSTID)" if share_gpu and world > 1 else f"world {world}"
        raise AssertionError(f"capture refused with {where}: {type(e).__name__}: {e}") from None
    for i in range(100):
        a_i = seeded(100 + i, rows, k)[block(rows, world, rank)].to(device)
        h_i = seeded(300 + i, rows, k * world)[:, block(k * world, world, rank)].contiguous().to(device)
        static_a.copy_(a_i)
        static_h.copy_(h_i)
        graph.replay()
        _, (want_c,) = ag(a_i, [b], 0, group, algo="ring")
        want_y = rs(h_i, w, "sum", 0, group, algo="ring")
        want_s = ar(h_i, w, "sum", group, algo="ring")
        assert torch.equal(static_c, want_c), f"replay {i}: ag differs from the eager op"
        assert torch.equal(static_y, want_y), f"replay {i}: rs differs from the eager op"
        assert torch.equal(static_s, want_s), f"replay {i}: ar differs from the eager op"
    # An eager call's transfers are watched (comm_watch.hpp): its event is polled while another
    # capture runs (begun at once, no synchronization before it, held 100 ms), which must neither
    # fail the poll nor invalidate the capture.
    import time

    eager_c = ag(static_a, [b], 0, group, algo="ring")[1][0].clone()
    side.wait_stream(torch.cuda.current_stream())
    held = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        held.capture_begin()
        _, (held_c,) = ag(static_a, [b], 0, group, algo="ring")
        time.sleep(0.1)
        held.capture_end()
    torch.cuda.current_stream().wait_stream(side)
    held.replay()
    assert torch.equal(held_c, eager_c), "the capture held while the watchdog polled: a different result"
    try:  # a shape never run eagerly
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            ag(static_a, [b[:, :64].contiguous()], 0, group, algo="ring")
        raise AssertionError("capture of an unknown shape: no error")
    except ValueError as e:
        assert "capture" in str(e) and "eager" in str(e), str(e)

    torch.manual_seed(0)
    fc1, fc2 = torch.nn.Linear(k, 512, device=device), torch.nn.Linear(512, k, bias=False, device=device)
    mlp = torch.nn.Sequential(ColumnParallelLinear.from_linear(fc1, algo="ring"), torch.nn.GELU(),
                              RowParallelLinear.from_linear(fc2, algo="ring"))
    x = seeded(50, rows, k)[block(rows, world, rank)].to(device).requires_grad_()
    # The eager step on a side stream, as torch.cuda.graph wants warm-up, and no reference to its
    # autograd graph kept (its AccumulateGrad nodes would stay on the default stream and break the
    # backward's capture).
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y_eager = mlp(x)
        y_eager.square().sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    y_eager = y_eager.detach()
    grads = [local(p.grad).clone() for p in mlp.parameters()] + [x.grad.clone()]
    for p in mlp.parameters():
        p.grad = None
    graphed = torch.cuda.make_graphed_callables(mlp, (x.detach().clone().requires_grad_(),))
    xs = x.detach().clone().requires_grad_()
    y = graphed(xs)
    y.square().sum().backward()
    assert_close(y, y_eager, "captured MLP forward")
    for got, want in zip([local(p.grad) for p in mlp.parameters()] + [xs.grad], grads):
        assert_close(got, want, "captured MLP gradients")


def main() -> int:
    """Runs what test_gpu.py runs, without pytest: one GPU at world 1..4, the no-host-sync check, and
    one GPU per rank where there are several. Prints one line per case."""
    runs = [(f"one GPU, NCCL, world {w}", lambda w=w: run_world(w, gpu_cases, True, backend="nccl", share_gpu=True,
                                                                 timeout=900)) for w in (1, 2, 3, 4)]
    runs.append(("one GPU, gloo + NCCL, world 2, no host sync",
                 lambda: run_world(2, no_host_sync_case, True, backend="cpu:gloo,cuda:nccl", share_gpu=True)))
    for w in (2, 4):
        runs.append((f"one GPU, NCCL-only group, world {w}, no host sync",
                     lambda w=w: run_world(w, no_host_sync_case, True, backend="nccl", share_gpu=True)))
    for w in (2, 4):
        runs.append((f"one GPU, NCCL-only group, world {w}, host time bounded while GEMMs queue",
                     lambda w=w: run_world(w, host_bounded_case, True, backend="nccl", share_gpu=True, timeout=150)))
    runs.append(("one GPU, NCCL, world 2, a peer stops: the watchdog",
                 lambda: run_world(2, stopped_peer_case, True, backend="nccl", share_gpu=True, timeout=150)))
    for w in (1, 2, 3, 4):
        runs.append((f"one GPU, NCCL, world {w}, CUDA graph capture",
                     lambda w=w: run_world(w, capture_case, True, backend="nccl", share_gpu=True, timeout=150)))
    runs.append(("one GPU, NCCL, world 2, shared gather: Llama against torch's plan",
                 lambda: run_world(2, shared_gather_case, True, backend="nccl", share_gpu=True, timeout=300)))
    for w in (1, 2):
        runs.append((f"one GPU, NCCL, world {w}, torch.compile reduce-overhead",
                     lambda w=w: run_world(w, compiled_case, True, backend="nccl", share_gpu=True, timeout=300)))
    for w in (2, 4, 8):
        if torch.cuda.device_count() >= w:
            runs.append((f"{w} GPUs, NCCL", lambda w=w: run_world(w, gpu_cases, False, backend="nccl", timeout=900)))
            runs.append((f"{w} GPUs, NCCL, CUDA graph capture",
                         lambda w=w: run_world(w, capture_case, False, backend="nccl", timeout=600)))
            runs.append((f"{w} GPUs, NCCL, torch.compile reduce-overhead",
                         lambda w=w: run_world(w, compiled_case, False, backend="nccl", timeout=300)))
            runs.append((f"{w} GPUs, NCCL, shared gather: Llama against torch's plan",
                         lambda w=w: run_world(w, shared_gather_case, False, backend="nccl", timeout=300)))
    # GPU_CASES="part|part$": the cases whose names hold a part (one ending in $: whose names end with it).
    only = [part for part in os.environ.get("GPU_CASES", "").split("|") if part]
    runs = [(name, run) for name, run in runs
            if not only or any(name.endswith(part[:-1]) if part.endswith("$") else part in name for part in only)]
    failed = 0
    for name, run in runs:
        try:
            run()
            print(f"PASS {name}", flush=True)
        except AssertionError as e:
            failed += 1
            print(f"FAIL {name}\n{e}", flush=True)
    print(f"{len(runs) - failed} of {len(runs)} passed (torch {torch.__version__}, {torch.cuda.device_count()} GPUs)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
