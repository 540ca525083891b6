"""collmm's ops beside PyTorch's own ways of doing the same job, one table (nccl-tests style).

    torchrun --nproc-per-node P python/bench/bench.py [--device cuda [--share-gpu] [--nccl-only]] [--dtype bf16]
             [-m M [M ...] -n N -k K] [--op ag|rs|all] [--algo all|auto|ring|...] [--check every|first]
             [--iters I --warmup W] [--json FILE]

Rows per op (global sizes: A [M, K], B [K, N]; ag: rank r holds rows block r of A and columns block
r of B; rs: columns block r of A and rows block r of B):
  collmm:<algo>        torch.ops.collmm.fused_all_gather_matmul (return_A=False: C alone, as the
                       torch:matmul row) / fused_matmul_reduce_scatter
  torch:matmul         world size 1 only: torch.matmul on the same tensors (the ceiling)
  torch:ag+mm / torch:mm+rs
                       all_gather_into_tensor then matmul / matmul then reduce_scatter_tensor
  symm_mem:fused       torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter,
                       where this torch has them (CUDA, NCCL groups)
time_us: median over iterations of the slowest rank, the rows timed side by side (each iteration
runs every row once; CUDA: events around each run, runs enqueued back to back); vs_base: the torch:ag+mm (mm+rs) row's time
over this row's (> 1: faster); max_err: the largest difference from that row's output, relative
to its largest element. host_us: the time a call takes to return to Python (median over the
iterations, the slowest rank): on CUDA the host's cost of the call, with the device still busy
behind it (collmm's second and later calls of a shape enqueue their work and return). M, N and K
must divide by P (the torch rows need equal shards). --nccl-only: the group is
init_process_group("nccl") (torchrun's usual group: collmm agrees over its Store); else
"cpu:gloo,cuda:nccl". --check first: collmm.set_check("first") (later calls of a shape agree on
nothing).
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist

import collmm
import launch

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f64": torch.float64}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    launch.add_args(p)
    p.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    p.add_argument("-m", type=int, nargs="+", default=[1024])
    p.add_argument("-n", type=int, default=1024)
    p.add_argument("-k", type=int, default=1024)
    p.add_argument("--op", default="all", choices=["ag", "rs", "all"])
    p.add_argument("--algo", default="all", help="all (each of " + " ".join(collmm.ALGOS) + "), or one algo as "
                   "the ops take it: auto, ring, ring:pieces4h, ...")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", default=None)
    p.add_argument("--check", default="every", choices=["every", "first"])
    return p.parse_args()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_rows(rows, device, warmup, iters, report):
    """Every row's median time (us, over iterations, of the slowest rank) and its last output. Rows
    are timed side by side: each iteration runs every row once, so drift (clocks, power) hits all of
    them alike. On CUDA each run is timed by CUDA events around it on the current stream, enqueued
    back to back with no host synchronisation between runs (a host-bound op shows as the gaps it
    leaves); on CPU by the host clock after a barrier. A row that fails is reported and left out."""
    live = []
    for impl, fn in rows:
        try:
            for _ in range(warmup):
                out = fn()
            sync(device)
            live.append(dict(impl=impl, fn=fn, out=out, spans=[], host=[]))
        except Exception as e:  # noqa: BLE001 - a row that cannot run says why and the table goes on
            report(impl, e)
    for _ in range(iters):
        for row in live:
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                t0 = time.perf_counter()
                row["out"] = row["fn"]()
                row["host"].append((time.perf_counter() - t0) * 1e6)
                end.record()
                row["spans"].append((start, end))
            else:
                dist.barrier()
                t0 = time.perf_counter()
                row["out"] = row["fn"]()
                row["spans"].append((time.perf_counter() - t0) * 1e6)
                row["host"].append(row["spans"][-1])
    sync(device)
    timed = []
    for row in live:
        us = [s.elapsed_time(e) * 1e3 for s, e in row["spans"]] if device.type == "cuda" else row["spans"]
        slowest = torch.tensor([us, row["host"]], dtype=torch.float64)
        if dist.get_backend() == "nccl":  # an NCCL-only group: the reduction on the device
            slowest = slowest.to(device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # gloo or the default group's CPU side
        slowest = slowest.cpu()
        timed.append((row["impl"], statistics.median(slowest[0].tolist()), statistics.median(slowest[1].tolist()),
                      row["out"]))
    return timed


def symm_mem_op(name):
    ops = getattr(torch.ops, "symm_mem", None)
    try:
        return getattr(ops, name) if ops is not None else None
    except (AttributeError, RuntimeError):
        return None


def cases(args, device, dtype, rank, world, group):
    m, n, k = args.m_now, args.n, args.k
    algos = collmm.ALGOS if args.algo == "all" else (args.algo,)
    g = torch.Generator(device="cpu").manual_seed(rank)
    rand = lambda *s: torch.randn(*s, generator=g).to(device=device, dtype=dtype)  # noqa: E731
    name = group.group_name
    if args.op in ("ag", "all"):
        a, b = rand(m // world, k), rand(k, n // world)
        gathered = torch.empty(m, k, device=device, dtype=dtype)

        def ag_mm():
            dist.all_gather_into_tensor(gathered, a, group=group)
            return gathered @ b

        rows = [("torch:ag+mm", ag_mm)]
        if world == 1:
            rows.append(("torch:matmul", lambda: a @ b))
        for algo in algos:
            rows.append((f"collmm:{algo}", lambda algo=algo: torch.ops.collmm.fused_all_gather_matmul(
                a, [b], 0, name, return_A=False, algo=algo)[1][0]))
        fused = symm_mem_op("fused_all_gather_matmul")
        if fused is not None and device.type == "cuda":
            rows.append(("symm_mem:fused", lambda: fused(a, [b], 0, name)[1][0]))
        yield "ag_gemm", rows
    if args.op in ("rs", "all"):
        a, b = rand(m, k // world), rand(k // world, n)
        out = torch.empty(m // world, n, device=device, dtype=dtype)

        def mm_rs():
            dist.reduce_scatter_tensor(out, a @ b, group=group)
            return out

        rows = [("torch:mm+rs", mm_rs)]
        if world == 1:
            rows.append(("torch:matmul", lambda: a @ b))
        for algo in algos:
            rows.append((f"collmm:{algo}", lambda algo=algo: torch.ops.collmm.fused_matmul_reduce_scatter(
                a, b, "sum", 0, name, algo=algo)))
        fused = symm_mem_op("fused_matmul_reduce_scatter")
        if fused is not None and device.type == "cuda":
            rows.append(("symm_mem:fused", lambda: fused(a, b, "sum", 0, name)))
        yield "gemm_rs", rows


def main():
    args = parse_args()
    device = launch.init(args)
    rank, world, group = dist.get_rank(), dist.get_world_size(), dist.group.WORLD
    if any(m % world for m in args.m) or args.n % world or args.k % world:
        raise SystemExit(f"M, N and K must divide by P = {world}")
    collmm.set_check(args.check)
    dtype = DTYPES[args.dtype]
    results = []
    if rank == 0:
        print(f"# {'op':>8} {'impl':>18} {'M':>6} {'N':>6} {'K':>6} {'P':>3} {'dtype':>5} {'time_us':>10} "
              f"{'host_us':>8} {'TFLOP/s':>8} {'vs_base':>7} {'max_err':>9}  (device {device}, torch "
              f"{torch.__version__}, group {dist.get_backend()}, check {args.check})")
    for args.m_now in args.m:
        bench_one(args, device, dtype, rank, world, group, results)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    dist.destroy_process_group()


def bench_one(args, device, dtype, rank, world, group, results):
    m = args.m_now
    flops = 2.0 * m * args.n * args.k / world
    for op, rows in cases(args, device, dtype, rank, world, group):
        def report(impl, e, op=op):
            if rank == 0:
                print(f"  {op:>8} {impl:>18}  failed: {str(e).splitlines()[0][:100]}")

        base_us, base_out = None, None
        for impl, us, host_us, out in time_rows(rows, device, args.warmup, args.iters, report):
            if base_us is None:
                base_us, base_out = us, out
            err = ((out.double() - base_out.double()).abs().max() / base_out.double().abs().max().clamp_min(1e-30)).item()
            row = dict(op=op, impl=impl, m=m, n=args.n, k=args.k, world_size=world, dtype=args.dtype,
                       time_us=us, host_us=host_us, tflops=flops / us / 1e6, vs_base=base_us / us, max_err=err,
                       group=dist.get_backend(), check=args.check)
            results.append(row)
            if rank == 0:
                print(f"  {op:>8} {impl:>18} {m:>6} {args.n:>6} {args.k:>6} {world:>3} {args.dtype:>5} "
                      f"{us:>10.1f} {host_us:>8.1f} {row['tflops']:>8.3f} {row['vs_base']:>7.2f} {err:>9.2e}")


if __name__ == "__main__":
    main()
