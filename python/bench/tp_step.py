"""One training step of a tensor-parallel MLP (Megatron sequence-parallel: ColumnParallelLinear,
GELU, RowParallelLinear), timed with collmm's layers and with the same layers on plain collectives
(all_gather_into_tensor + matmul, matmul + reduce_scatter_tensor), side by side in one run.

    torchrun --nproc-per-node P python/bench/tp_step.py [--device cuda] [--dtype bf16]
             [--seq 4096] [--batch 1] [--width 4096] [--hidden 14336] [--steps 20 --warmup 5]
             [--algo auto] [--trace out/tp-step] [--json FILE] [--share-gpu]

A step is forward, an MSE loss and backward (weight and input gradients) on random data; both
versions hold the same weights and see the same inputs, and their losses and gradients are compared
(max relative difference printed). time_us: the median over steps of the slowest rank (CUDA events
around each step on GPUs, the host clock on CPUs); the steps of the two versions alternate, so drift
hits both alike. With --trace (and a collmm that has collmm.trace) one collmm step is recorded and
written as a Chrome trace, an SVG timeline and a table per call.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn

import collmm
import launch
from collmm.torch import ColumnParallelLinear, RowParallelLinear

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f64": torch.float64}


class _PlainAllGatherMatmul(torch.autograd.Function):
    """y = all_gather(x) @ w.t() with plain collectives; backward: dx = reduce_scatter(dy @ w)."""

    @staticmethod
    def forward(ctx, x, weight, group):
        world = dist.get_world_size(group)
        gathered = x.new_empty((x.shape[0] * world,) + tuple(x.shape[1:]))
        dist.all_gather_into_tensor(gathered, x.contiguous(), group=group)
        ctx.save_for_backward(gathered, weight)
        ctx.group = group
        return gathered @ weight.t()

    @staticmethod
    def backward(ctx, dy):
        gathered, weight = ctx.saved_tensors
        world = dist.get_world_size(ctx.group)
        full = dy @ weight
        dx = full.new_empty((full.shape[0] // world,) + tuple(full.shape[1:]))
        dist.reduce_scatter_tensor(dx, full.contiguous(), group=ctx.group)
        dw = dy.flatten(0, -2).t() @ gathered.flatten(0, -2)
        return dx, dw, None


class _PlainMatmulReduceScatter(torch.autograd.Function):
    """y = reduce_scatter(h @ w.t()) with plain collectives; backward: dh = all_gather(dy) @ w."""

    @staticmethod
    def forward(ctx, h, weight, group):
        world = dist.get_world_size(group)
        full = h @ weight.t()
        y = full.new_empty((full.shape[0] // world,) + tuple(full.shape[1:]))
        dist.reduce_scatter_tensor(y, full.contiguous(), group=group)
        ctx.save_for_backward(h, weight)
        ctx.group = group
        return y

    @staticmethod
    def backward(ctx, dy):
        h, weight = ctx.saved_tensors
        world = dist.get_world_size(ctx.group)
        gathered = dy.new_empty((dy.shape[0] * world,) + tuple(dy.shape[1:]))
        dist.all_gather_into_tensor(gathered, dy.contiguous(), group=ctx.group)
        dh = gathered @ weight
        dw = gathered.flatten(0, -2).t() @ h.flatten(0, -2)
        return dh, dw, None


class PlainMLP(nn.Module):
    """The same sharded MLP as collmm's layers hold, on plain collectives (equal shards only)."""

    def __init__(self, fc1: ColumnParallelLinear, fc2: RowParallelLinear, group):
        super().__init__()
        # collmm's layers hold DTensors: their local shards are what the plain collectives take.
        self.w1 = nn.Parameter(fc1.weight.to_local().detach().clone())
        self.b1 = nn.Parameter(fc1.bias.to_local().detach().clone()) if fc1.bias is not None else None
        self.w2 = nn.Parameter(fc2.weight.to_local().detach().clone())
        self.group = group

    def forward(self, x):
        h = _PlainAllGatherMatmul.apply(x, self.w1, self.group)
        if self.b1 is not None:
            h = h + self.b1
        return _PlainMatmulReduceScatter.apply(nn.functional.gelu(h), self.w2, self.group)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    launch.add_args(p)
    p.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--algo", default="auto")
    p.add_argument("--trace", default=None, help="path prefix for collmm.trace's files of one collmm step")
    p.add_argument("--json", default=None)
    return p.parse_args()


def main():
    args = parse_args()
    args.nccl_only = True  # torchrun's usual group on CUDA
    device = launch.init(args)
    group = dist.group.WORLD
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.seq % world or args.hidden % world:
        raise SystemExit(f"tp_step: --seq {args.seq} and --hidden {args.hidden} must divide by {world} "
                         "(the plain version's collectives need equal shards)")
    dtype = DTYPES[args.dtype]

    torch.manual_seed(0)  # the same unsharded weights on every rank
    fc1 = nn.Linear(args.width, args.hidden, device=device, dtype=dtype)
    fc2 = nn.Linear(args.hidden, args.width, bias=False, device=device, dtype=dtype)
    col = ColumnParallelLinear.from_linear(fc1, group, args.algo)
    row = RowParallelLinear.from_linear(fc2, group, args.algo)
    collmm_mlp = nn.Sequential(col, nn.GELU(), row)
    plain_mlp = PlainMLP(col, row, group)

    torch.manual_seed(1 + rank)  # this rank's block of the sequence
    rows = args.seq // world
    x = torch.randn(rows, args.batch, args.width, device=device, dtype=dtype)
    target = torch.randn(rows, args.batch, args.width, device=device, dtype=dtype)

    def step(model):
        model.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x).float(), target.float(), reduction="sum")
        loss.backward()
        return loss.detach()

    def timed(model):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = step(model)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e3, loss
        t0 = time.perf_counter()
        loss = step(model)
        return (time.perf_counter() - t0) * 1e6, loss

    for _ in range(args.warmup):
        step(collmm_mlp)
        step(plain_mlp)
    times = {"collmm": [], "plain": []}
    for _ in range(args.steps):
        for name, model in (("collmm", collmm_mlp), ("plain", plain_mlp)):
            us, _ = timed(model)
            t = torch.tensor([us], dtype=torch.float64, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's
            times[name].append(t.item())

    loss_c, loss_p = step(collmm_mlp), step(plain_mlp)
    grads = [(col.weight.grad.to_local(), plain_mlp.w1.grad), (row.weight.grad.to_local(), plain_mlp.w2.grad)]

    def rel(a, b):
        return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30)).item()

    err = max([rel(loss_c, loss_p)] + [rel(a, b) for a, b in grads])

    if args.trace and hasattr(collmm, "trace"):
        with collmm.trace(args.trace):
            step(collmm_mlp)

    med = {k: statistics.median(v) for k, v in times.items()}
    if rank == 0:
        flops = 3 * 2 * 2.0 * args.seq * args.batch * args.width * args.hidden / world  # fwd + 2 bwd GEMMs, 2 layers
        print(f"# tp_step: world {world}, {device.type}, {args.dtype}, seq {args.seq} batch {args.batch} "
              f"width {args.width} hidden {args.hidden}, algo {args.algo}, {args.steps} steps after {args.warmup}")
        print(f"{'version':>8} {'step_us':>10} {'TFLOP/s/rank':>13} {'vs_plain':>9}")
        for name in ("collmm", "plain"):
            print(f"{name:>8} {med[name]:10.1f} {flops / med[name] / 1e6:13.1f} {med['plain'] / med[name]:9.3f}")
        print(f"# max relative difference of loss and weight gradients, collmm vs plain: {err:.2e}")
        if args.json:
            with open(args.json + ".tmp", "w") as f:
                json.dump({"world": world, "device": device.type, "dtype": args.dtype, "seq": args.seq,
                           "batch": args.batch, "width": args.width, "hidden": args.hidden, "algo": args.algo,
                           "step_us": med, "max_rel_diff": err}, f, indent=1)
            os.replace(args.json + ".tmp", args.json)
    tol = 5e-2 if dtype == torch.bfloat16 else 1e-3
    ok = err <= tol
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(f"tp_step: collmm and plain versions differ by {err:.2e} (> {tol})")


if __name__ == "__main__":
    main()
