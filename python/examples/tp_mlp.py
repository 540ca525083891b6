"""A two-layer tensor-parallel MLP (sequence-parallel, Megatron style) on collmm's layers, on CPU
with gloo: its loss and gradients equal those of the same MLP unsharded on one process.

    torchrun --nproc-per-node 3 python/examples/tp_mlp.py   # any world size: the sequence of 8 splits 3, 3, 2
"""
import torch
import torch.distributed as dist
from torch import nn

import collmm
from collmm.torch import ColumnParallelLinear, RowParallelLinear


def block(total: int, rank: int, world: int) -> slice:
    start = sum(collmm.block_size(total, world, q) for q in range(rank))
    return slice(start, start + collmm.block_size(total, world, rank))


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    seq, batch, width, hidden = 8, 2, 16, 64

    torch.manual_seed(0)  # the same unsharded MLP and data on every rank
    fc1, fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width, bias=False)
    x, target = torch.randn(seq, batch, width), torch.randn(seq, batch, width)
    loss_unsharded = nn.functional.mse_loss(fc2(nn.functional.gelu(fc1(x))), target, reduction="sum")
    loss_unsharded.backward()

    # Rank r: rows block r of fc1's weight, columns block r of fc2's (DTensors); its block of the sequence.
    mlp = nn.Sequential(ColumnParallelLinear.from_linear(fc1), nn.GELU(), RowParallelLinear.from_linear(fc2))
    rows = block(seq, rank, world)
    loss = nn.functional.mse_loss(mlp(x[rows]), target[rows], reduction="sum")
    loss.backward()

    total = loss.detach().clone()
    dist.all_reduce(total)  # the sum over the sequence blocks
    print(f"rank {rank}: loss {total.item():.6f}, unsharded {loss_unsharded.item():.6f}")
    assert torch.allclose(total, loss_unsharded, rtol=1e-5), "losses differ"
    # The weights and their gradients are DTensors: full_tensor() gathers the unsharded one.
    assert torch.allclose(mlp[0].weight.grad.full_tensor(), fc1.weight.grad, rtol=1e-4, atol=1e-5), "fc1 gradients differ"
    assert torch.allclose(mlp[2].weight.grad.full_tensor(), fc2.weight.grad, rtol=1e-4, atol=1e-5), "fc2 gradients differ"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
