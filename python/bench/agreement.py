"""Host time per call of collmm's agreement, by channel and check, on a problem so small that the
call is almost all agreement (ag_gemm, M = 8 P, N = K = 8, sequential, or --algo auto):

    torchrun --nproc-per-node P python/bench/agreement.py [--device cpu|cuda [--share-gpu]] [--iters I]
             [--algo sequential|auto] [--channels group,store,shm] [--repeats R]

Rows: the group's collectives (gloo on CPU; on an NCCL-only group they run on the device), the
group's Store (TCPStore under torchrun) and shared memory set up over the Store, each with
check="every" (every call exchanges a fingerprint) and check="first" (later calls of a known
problem exchange nothing); plus the all_gather_into_tensor + matmul of the same problem. Median microseconds of the slowest rank
(with --repeats R: the rows taken R times in turn, each row's least median and the median of them).
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import collmm
import launch


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    launch.add_args(p)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--algo", default="sequential", help="the op's algo (auto: its decision per shape, kept)")
    p.add_argument("--channels", default="group,store,shm", help="the channels to measure, comma-separated")
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    args.nccl_only = args.device == "cuda"  # the channels' costs on an NCCL-only group
    device = launch.init(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    a, b = torch.randn(8, 8, device=device), torch.randn(8, 8, device=device)
    gathered = torch.empty(8 * world, 8, device=device)
    rows = []
    for channel in args.channels.split(","):
        collmm.set_channel(channel)
        group = dist.new_group(list(range(world)))
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group.group_name, algo=args.algo)  # its session
        for check in ("every", "first"):
            collmm.set_check(check)
            rows.append((f"collmm {channel} {check}", lambda g=group.group_name: torch.ops.collmm.fused_all_gather_matmul(
                a, [b], 0, g, return_A=False, algo=args.algo)))

    def plain():
        dist.all_gather_into_tensor(gathered, a)
        return gathered @ b

    rows.append(("all_gather_into_tensor + matmul", plain))
    if rank == 0:
        print(f"# P = {world}, device {args.device}, store {type(dist.distributed_c10d._get_default_store()).__name__}")
    medians = {name: [] for name, _ in rows}
    for _ in range(args.repeats):
        for name, fn in rows:
            collmm.set_check("first" if name.endswith("first") else "every")
            for _ in range(10):
                fn()
            us = []
            for _ in range(args.iters):
                t0 = time.perf_counter()
                fn()
                us.append((time.perf_counter() - t0) * 1e6)
            if args.device == "cuda":
                torch.cuda.synchronize()
            t = torch.tensor([statistics.median(us)], dtype=torch.float64, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            medians[name].append(t.item())
    if rank == 0:
        for name, m in medians.items():
            spread = f"  (least {min(m):.1f})" if len(m) > 1 else ""
            print(f"  {name:<34} {statistics.median(m):9.1f} us per call{spread}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
