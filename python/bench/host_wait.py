"""Whether a call holds the host while the device is busy: each op's host time per call with a queue
of GEMMs enqueued just before it, the worst of many calls on every rank, beside the plain path.

    torchrun --nproc-per-node P python/bench/host_wait.py [--device cuda --share-gpu --nccl-only]
             [--calls 16] [--queue 40] [--check first,every] [--rows REGEX] [--json FILE]

Before each timed call: the device drained, a barrier, then --queue bf16 8192^3 GEMMs enqueued
(tens of ms of work). The call is timed on the host. It should return while that queue still runs
(the `queued` column counts the calls that did), within the plain path's time.
Each row's first call is not timed: it prepares the plan (and the group's first call goes through
c10d, which makes the NCCL communicator). Its second call is the first timed one: that is where a
transfer NCCL had not connected yet held the host for 12-42 ms (issue 48).
Rows:
  plain ag+mm / mm+rs / mm+ar   all_gather_into_tensor + matmul, matmul + reduce_scatter_tensor,
                                matmul + all_reduce (c10d's calls, torch's matmul)
  <op> <algo> <check>           collmm's op (ag, rs, ar) with that algorithm and check mode
Printed by rank 0: per row the worst and median us of every rank, the worst over the ranks, that
worst minus the plain row's worst of the same op, and how many calls returned with the queue still
running. --json FILE writes the same numbers.
"""
import argparse
import json
import re
import statistics
import time

import torch
import torch.distributed as dist

import collmm
import launch

OPS = {"ag": ("ring", "sequential", "auto"), "rs": ("ring", "auto"), "ar": ("ring", "auto")}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    launch.add_args(p, device="cuda")
    p.add_argument("--calls", type=int, default=16, help="timed calls per row and rank (default 16)")
    p.add_argument("--queue", type=int, default=40, help="bf16 8192^3 GEMMs queued before each call (default 40)")
    p.add_argument("--check", default="first,every", help="collmm.set_check modes, comma-separated")
    p.add_argument("--rows", default="", help="only the rows whose label matches REGEX")
    p.add_argument("--json", help="write the rows here (rank 0)")
    args = p.parse_args()
    device = launch.init(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    name = dist.group.WORLD.group_name
    m, n, k = 64 * world, 128, 256
    a = torch.randn(m // world, k, device=device)
    b = torch.randn(k, n, device=device)
    a_k, b_k = torch.randn(m, k // world, device=device), torch.randn(k // world, n, device=device)
    gathered = torch.empty(m, k, device=device)
    c_rs = torch.empty(m // world, n, device=device)
    big = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16) if device.type == "cuda" else None
    ag, rs, ar = (torch.ops.collmm.fused_all_gather_matmul, torch.ops.collmm.fused_matmul_reduce_scatter,
                  torch.ops.collmm.fused_matmul_all_reduce)

    def plain_ag():
        dist.all_gather_into_tensor(gathered, a)
        return gathered @ b

    def plain_rs():
        dist.reduce_scatter_tensor(c_rs, a_k @ b_k)
        return c_rs

    def plain_ar():
        c = a_k @ b_k
        dist.all_reduce(c)
        return c

    rows = [("plain ag+mm", "ag", None, plain_ag), ("plain mm+rs", "rs", None, plain_rs),
            ("plain mm+ar", "ar", None, plain_ar)]
    calls = {"ag": lambda algo: ag(a, [b], 0, name, algo=algo),
             "rs": lambda algo: rs(a_k, b_k, "sum", 0, name, algo=algo),
             "ar": lambda algo: ar(a_k, b_k, "sum", name, algo=algo)}
    for check in args.check.split(","):
        for op, algos in OPS.items():
            for algo in algos:
                rows.append((f"{op} {algo} {check}", op, check, lambda op=op, algo=algo: calls[op](algo)))
    rows = [r for r in rows if re.search(args.rows, r[0])]

    cuda = device.type == "cuda"  # on CPU (gloo): no queue, a check of this script itself
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    queue = args.queue if cuda else 0
    results = []
    for label, op, check, fn in rows:
        if check:
            collmm.set_check(check)
        fn()  # the first call: not timed
        us, queued = [], 0
        for _ in range(args.calls):
            sync()
            dist.barrier()
            sync()
            for _ in range(queue):
                big @ big
            t0 = time.perf_counter()
            fn()
            us.append((time.perf_counter() - t0) * 1e6)
            queued += cuda and not torch.cuda.current_stream(device).query()  # the queue still ran at return
        sync()
        mine = torch.tensor([max(us), statistics.median(us), queued], dtype=torch.float64, device=device)
        every = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(every, mine)
        every = [t.tolist() for t in every]
        results.append({"row": label, "op": op, "check": check, "P": world, "calls": args.calls,
                        "queue": queue, "worst_us": [r[0] for r in every],
                        "median_us": [r[1] for r in every], "queued": [int(r[2]) for r in every],
                        "path": torch.ops.collmm.last_comm() if check else "c10d"})
    collmm.set_check("every")
    if rank == 0:
        plain = {r["op"]: max(r["worst_us"]) for r in results if r["check"] is None}
        card = torch.cuda.get_device_name(device) if cuda else "CPU"
        print(f"# host time per call, us, P = {world}, {args.calls} calls per rank, {queue} GEMMs queued before "
              f"each; torch {torch.__version__}, {card}")
        print(f"# {'row':<20} {'worst / median per rank':<{12 * world}} {'worst':>7} {'-plain':>7} {'queued':>8} path")
        for r in results:
            worst = max(r["worst_us"])
            r["over_plain_us"] = worst - plain[r["op"]] if r["op"] in plain else None
            per_rank = " ".join(f"{w:5.0f}/{md:<5.0f}" for w, md in zip(r["worst_us"], r["median_us"]))
            over = f"{r['over_plain_us']:7.0f}" if r["over_plain_us"] is not None else "      -"
            print(f"  {r['row']:<20} {per_rank:<{12 * world}} {worst:7.0f} {over} "
                  f"{sum(r['queued']):>4}/{args.calls * world:<3} {r['path']}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
