"""Where a call's host time goes: collmm's ops per algorithm beside the c10d calls they are made of.

    torchrun --nproc-per-node P python/bench/host_cost.py [--device cpu|cuda [--share-gpu]] [--nccl-only]
             [-m M -n N -k K] [--dtype bf16] [--iters I] [--rows REGEX] [--profile]

Every row is the median time (us) for a call to return to Python, of the slowest rank, in steady
state (warmed up; on CUDA the device is kept busy behind the calls, never waited for between
them, except every 10 calls so that the launch queue stays short). Rows:
  c10d all_gather_into_tensor, reduce_scatter_tensor, one send + recv (batch_isend_irecv), matmul:
                       the pieces the plain path and collmm's plans are made of
  torch ag+mm / mm+rs  the plain path
  collmm <op> <algo> check=<every|first> [c10d]
                       the op with each algorithm (ring:pieces2 too) and each check, its
                       transfers on the group's NCCL communicator called directly (collmm.set_comm
                       "auto"; the path taken is printed: nccl, c10d or none) and, with --comm both
                       (the default on CUDA), through c10d's calls
--comm auto|c10d|both: which of the ops' ways to move data to measure.
--rows: only the rows whose label matches REGEX. Where the auto rows ran, auto's decision of each op
follows (torch.ops.collmm.last_auto(): the candidates timed, their steps and times, the pick).
--profile: a torch.profiler table of the host's time (self CPU) per function over 20 calls of the
op with the ring, check first: what the call spends its host time on.
"""
import argparse
import re
import statistics
import time

import torch
import torch.distributed as dist

import collmm
import launch

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def host_us(fn, device, iters):
    """Median host time of `fn` over `iters` calls, after 10 unmeasured ones."""
    for _ in range(10):
        fn()
    us = []
    for i in range(iters):
        if device.type == "cuda" and i % 10 == 0:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        us.append((time.perf_counter() - t0) * 1e6)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return statistics.median(us)


def _plan_text():
    """The last run's plan options without the defaults: what auto picked, in short."""
    defaults = {"gemm_lanes=1", "merge=1", "pieces=1", "piece_sizes=equal", "stages=0", "post=comm-first"}
    return " ".join(f for f in torch.ops.collmm.last_plan().split() if f not in defaults)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    launch.add_args(p)
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    for dim, size in (("-m", 2048), ("-n", 4096), ("-k", 4096)):
        p.add_argument(dim, type=int, default=size)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--rows", default="", help="only the rows whose label matches this regex")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--comm", choices=("auto", "c10d", "both"), default=None,
                   help="the ops' transfers: collmm.set_comm's paths (default: both on CUDA, auto on CPU)")
    args = p.parse_args()
    device = launch.init(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    m, n, k, dtype = args.m, args.n, args.k, DTYPES[args.dtype]
    if m % world or n % world or k % world:
        raise SystemExit(f"M, N and K must divide by P = {world}")
    name = dist.group.WORLD.group_name
    a_ag, b_ag = torch.randn(m // world, k, device=device, dtype=dtype), torch.randn(k, n // world, device=device,
                                                                                       dtype=dtype)
    a_rs, b_rs = torch.randn(m, k // world, device=device, dtype=dtype), torch.randn(k // world, n, device=device,
                                                                                       dtype=dtype)
    gathered = torch.empty(m, k, device=device, dtype=dtype)
    scattered = torch.empty(m // world, n, device=device, dtype=dtype)
    partial = a_rs @ b_rs
    chunk, into = torch.randn(m // world, k, device=device, dtype=dtype), torch.empty(m // world, k, device=device,
                                                                                       dtype=dtype)
    peer = (rank + 1) % world, (rank - 1) % world

    def sendrecv():
        for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, chunk, peer[0]), dist.P2POp(dist.irecv, into, peer[1])]):
            w.wait()

    rows = [("c10d all_gather_into_tensor", lambda: dist.all_gather_into_tensor(gathered, a_ag)),
            ("c10d reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(scattered, partial))]
    if world > 1:
        rows.append(("c10d send + recv (batch_isend_irecv)", sendrecv))
    rows += [("matmul", lambda: gathered @ b_ag),
             ("torch ag+mm", lambda: (dist.all_gather_into_tensor(gathered, a_ag), gathered @ b_ag)),
             ("torch mm+rs", lambda: dist.reduce_scatter_tensor(scattered, a_rs @ b_rs))]
    ag, rs = torch.ops.collmm.fused_all_gather_matmul, torch.ops.collmm.fused_matmul_reduce_scatter
    comm = args.comm or ("both" if device.type == "cuda" else "auto")
    paths = ("auto", "c10d") if comm == "both" else (comm,)
    for algo in collmm.ALGOS + ("ring:pieces2",):
        for check in ("every", "first"):
            for path in paths:
                tail = " [c10d]" if path == "c10d" else ""
                rows.append((f"collmm ag_gemm {algo} check={check}{tail}", check, path,
                             lambda algo=algo: ag(a_ag, [b_ag], 0, name, return_A=False, algo=algo)))
                rows.append((f"collmm gemm_rs {algo} check={check}{tail}", check, path,
                             lambda algo=algo: rs(a_rs, b_rs, "sum", 0, name, algo=algo)))
    if rank == 0:
        print(f"# host_us per call: P = {world}, M N K = {m} {n} {k}, {args.dtype}, device {device}, group "
              f"{dist.get_backend()}, torch {torch.__version__}")
    for row in rows:
        label, fn = row[0], row[-1]
        if not re.search(args.rows, label):
            continue
        collmm.set_check(row[1] if len(row) == 4 else "every")
        collmm.set_comm(row[2] if len(row) == 4 else "auto")
        t = torch.tensor([host_us(fn, device, args.iters)], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        path = f"  ({torch.ops.collmm.last_comm()}; {_plan_text()})" if len(row) == 4 else ""
        if rank == 0:
            print(f"  {label:<52} {t.item():9.1f}{path}", flush=True)
    collmm.set_comm("auto")
    if any(re.search(args.rows, row[0]) for row in rows if " auto " in row[0]):
        collmm.set_check("every")  # the decision is looked up again (kept per shape), so it is reported
        for op, fn in (("ag_gemm", lambda: ag(a_ag, [b_ag], 0, name, return_A=False, algo="auto")),
                       ("gemm_rs", lambda: rs(a_rs, b_rs, "sum", 0, name, algo="auto"))):
            fn()
            if rank == 0:
                print(f"# {op}: auto's decision (torch.ops.collmm.last_auto())\n{torch.ops.collmm.last_auto()}",
                      end="", flush=True)
    if args.profile:
        collmm.set_check("first")
        fn = lambda: ag(a_ag, [b_ag], 0, name, return_A=False, algo="ring")  # noqa: E731
        host_us(fn, device, 10)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(20):
                fn()
        if rank == 0:
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
