"""Cases of a PyTorch user who shards and trains (for test_shard_train.py on CPU/gloo; no pytest
here): any split of the sequence with batch > 1, gather/scatter along other dims, one-wide shards,
the raw ops under autograd, bias on RowParallelLinear, state_dict gather and re-shard."""
import torch
import torch.distributed as dist
from torch import nn

from dist_util import assert_close, block, chunk, local, seeded
from mlp_check import check_mlp

F64 = torch.float64


def uneven_split(total: int, world: int) -> list:
    """A split that is not collmm's: rank 0 holds the most, the last rank one, the rest share."""
    if world == 1:
        return [total]
    sizes = [1] * world
    sizes[0] = total - (world - 1)
    return sizes


def slice_of(sizes: list, rank: int) -> slice:
    first = sum(sizes[:rank])
    return slice(first, first + sizes[rank])


def seq_parallel_mlp(rank, world, device="cpu"):
    """[seq, batch, hidden] with seq % P != 0 and batch > 1 (collmm's split and an uneven one)
    through ColumnParallelLinear -> GELU -> RowParallelLinear, both with bias, against the unsharded
    model: output, input gradient, every weight and bias gradient."""
    seq, batch, width, hidden = 2 * world + 1, 3, 6, 2 * world + 1
    for algo in ("auto", "ring"):
        for sizes in ([block(seq, world, q).stop - block(seq, world, q).start for q in range(world)],
                      uneven_split(seq, world)):
            torch.manual_seed(0)
            fc1, fc2 = nn.Linear(width, hidden, dtype=F64).to(device), nn.Linear(hidden, width, dtype=F64).to(device)
            x_full = seeded(30, seq, batch, width, dtype=F64).to(device)
            target = seeded(31, seq, batch, width, dtype=F64).to(device)
            check_mlp(fc1, fc2, x_full, target, slice_of(sizes, rank), rank, world, algo,
                      f"mlp {algo} split {sizes} rank {rank}/{world}", scatter_size=sizes[rank])


def other_dims(rank, world):
    """gather_dim / scatter_dim 1 of [batch, seq, hidden] (seq split unevenly) against torch."""
    ag, rs = torch.ops.collmm.fused_all_gather_matmul, torch.ops.collmm.fused_matmul_reduce_scatter
    group = dist.group.WORLD.group_name
    batch, seq, k, n = 2, 2 * world + 1, 5, 3 * world
    sizes = uneven_split(seq, world)
    x_full, w = seeded(32, batch, seq, k), seeded(33, k, n)
    x = x_full[:, slice_of(sizes, rank)].contiguous()
    cols = block(n, world, rank)
    gathered, (y,) = ag(x, [w[:, cols].contiguous()], 1, group, gathered_size=seq)
    assert_close(gathered, x_full, f"gather_dim 1 A rank {rank}")
    assert_close(y, x_full @ w[:, cols], f"gather_dim 1 C rank {rank}")
    h_full, v = seeded(34, batch, seq, 3 * world + 1), seeded(35, 3 * world + 1, 4)
    kb = block(3 * world + 1, world, rank)
    out = rs(h_full[..., kb].contiguous(), v[kb].contiguous(), "sum", -2, group, scatter_size=sizes[rank])
    assert_close(out, (h_full.double() @ v.double()).float()[:, slice_of(sizes, rank)], f"scatter_dim 1 rank {rank}")


def one_wide_shard(rank, world):
    """ColumnParallelLinear(16, 5) at world 4 (torch.chunk's shards of 2, 2, 1, 0 features: a B one
    column wide reads as either layout, one none wide) and RowParallelLinear(5, 16), against nn.Linear."""
    from collmm.torch import ColumnParallelLinear, RowParallelLinear

    torch.manual_seed(0)
    fc1, fc2 = nn.Linear(16, 5, dtype=F64), nn.Linear(5, 16, dtype=F64)
    x_full = seeded(36, 2 * world + 1, 2, 16, dtype=F64).requires_grad_()
    y_full = fc2(fc1(x_full))
    y_full.square().sum().backward()
    col, row = ColumnParallelLinear.from_linear(fc1), RowParallelLinear.from_linear(fc2)
    rows = block(2 * world + 1, world, rank)
    x = x_full.detach()[rows].clone().requires_grad_()
    y = row(col(x))
    y.square().sum().backward()
    assert_close(y, y_full.detach()[rows], f"one-wide y rank {rank}")
    assert_close(x.grad, x_full.grad[rows], f"one-wide dx rank {rank}")
    assert_close(local(col.weight.grad), fc1.weight.grad[chunk(5, world, rank)], f"one-wide dW1 rank {rank}")
    assert_close(local(row.weight.grad), fc2.weight.grad[:, chunk(5, world, rank)], f"one-wide dW2 rank {rank}")


def raw_ops_autograd(rank, world):
    """The raw ops inside autograd (every output used, uneven shards, avg) against the plain
    computation of the sum over ranks of each rank's loss."""
    ag, rs = torch.ops.collmm.fused_all_gather_matmul, torch.ops.collmm.fused_matmul_reduce_scatter
    group = dist.group.WORLD.group_name
    seq, batch, k, n = 2 * world + 1, 2, 4, 2 * world + 1
    sizes = uneven_split(seq, world)
    a_full, b0, b1 = seeded(40, seq, batch, k, dtype=F64), seeded(41, k, n, dtype=F64), seeded(42, k, 3, dtype=F64)
    cols = block(n, world, rank)

    def cols1(q, sharded):  # Bs[1]: unsharded, or sharded too (N = 3: with B_0's split, the backward's
        return block(3, world, q) if sharded else slice(None)  # inner sizes add to no collmm split)

    def targets(q, sharded):
        return (seeded(50 + q, seq, batch, n, dtype=F64)[..., block(n, world, q)],
                seeded(60 + q, seq, batch, 3, dtype=F64)[..., cols1(q, sharded)], seeded(70 + q, seq, batch, k, dtype=F64))

    for return_a, sharded in ((True, False), (False, False), (True, True), (False, True)):
        a = a_full[slice_of(sizes, rank)].clone().requires_grad_()
        w0 = b0[:, cols].t().contiguous().requires_grad_()  # an nn.Linear weight, passed as w0.t()
        w1 = b1[:, cols1(rank, sharded)].clone().requires_grad_()
        gathered, (c0, c1) = ag(a, [w0.t(), w1], 0, group, return_A=return_a)
        t0, t1, ta = targets(rank, sharded)
        loss = (c0 * t0).sum() + (c1 * t1).sum() + ((gathered * ta).sum() if return_a else 0)
        loss.backward()
        # plain: A_full feeds every rank's loss; w0 and w1 only this rank's
        ap = a_full.clone().requires_grad_()
        total = sum((ap @ b0[:, block(n, world, q)] * targets(q, sharded)[0]).sum()
                    + (ap @ b1[:, cols1(q, sharded)] * targets(q, sharded)[1]).sum()
                    + ((ap * targets(q, sharded)[2]).sum() if return_a else 0) for q in range(world))
        total.backward()
        what = f"ag autograd return_A={return_a} Bs[1] sharded={sharded} rank {rank}/{world}"
        assert_close(a.grad, ap.grad[slice_of(sizes, rank)], what + " dA_shard")
        w0p, w1p = b0[:, cols].t().clone().requires_grad_(), b1[:, cols1(rank, sharded)].clone().requires_grad_()
        ((a_full @ w0p.t() * t0).sum() + (a_full @ w1p * t1).sum()).backward()
        assert_close(w0.grad, w0p.grad, what + " dB0")
        assert_close(w1.grad, w1p.grad, what + " dB1")

    for reduce_op in ("sum", "avg"):
        kk = 2 * world + 1
        h_full, v = seeded(43, seq, batch, kk, dtype=F64), seeded(44, kk, 5, dtype=F64)
        kb = block(kk, world, rank)
        h = h_full[..., kb].contiguous().requires_grad_()
        vr = v[kb].clone().requires_grad_()
        y = rs(h, vr, reduce_op, 0, group, scatter_size=sizes[rank])
        t = seeded(45, seq, batch, 5, dtype=F64)
        (y * t[slice_of(sizes, rank)]).sum().backward()
        hp, vp = h_full.clone().requires_grad_(), v.clone().requires_grad_()
        s = hp @ vp / (world if reduce_op == "avg" else 1)
        (s * t).sum().backward()
        what = f"rs autograd {reduce_op} rank {rank}/{world}"
        assert_close(y, s.detach()[slice_of(sizes, rank)], what + " y")
        assert_close(h.grad, hp.grad[..., kb], what + " dA")
        assert_close(vr.grad, vp.grad[kb], what + " dB")


def inductor_uneven(rank, world):
    """torch.compile(fullgraph=True) with inductor on uneven shards (gathered_size and scatter_size
    give what one rank cannot know): the same outputs as eager."""
    group = dist.group.WORLD.group_name
    seq, batch, k, n = 2 * world + 1, 2, 4, 3 * world
    sizes = uneven_split(seq, world)
    x = seeded(80, seq, batch, k)[slice_of(sizes, rank)].contiguous()
    w1, w2 = seeded(81, k, n)[:, block(n, world, rank)].contiguous(), seeded(82, n, k)[block(n, world, rank)].contiguous()

    def f(x):
        _, (h,) = torch.ops.collmm.fused_all_gather_matmul(x, [w1], 0, group, return_A=False, gathered_size=seq)
        return torch.ops.collmm.fused_matmul_reduce_scatter(torch.relu(h), w2, "sum", 0, group,
                                                            scatter_size=sizes[rank])

    want = f(x)
    got = torch.compile(f, fullgraph=True, backend="inductor")(x)
    assert_close(got, want, f"inductor rank {rank}/{world}")
    # The backward traced too: with return_A=False, W1's gradient gathers A again, to the forward's
    # uneven rows (gathered_size), which the fake kernel cannot know from a shard.
    def g(x, w1, w2):
        _, (h,) = torch.ops.collmm.fused_all_gather_matmul(x, [w1], 0, group, return_A=False, gathered_size=seq)
        return torch.ops.collmm.fused_matmul_reduce_scatter(torch.relu(h), w2, "sum", 0, group,
                                                            scatter_size=sizes[rank])

    grads = []
    for step in (g, torch.compile(g, fullgraph=True, backend="aot_eager")):
        inputs = [t.clone().requires_grad_() for t in (x, w1, w2)]
        (step(*inputs) * seeded(83, *want.shape)).sum().backward()
        grads.append([t.grad for t in inputs])
    for name, got_grad, want_grad in zip(("dX", "dW1", "dW2"), grads[1], grads[0]):
        assert_close(got_grad, want_grad, f"compiled backward {name} rank {rank}/{world}")


def state_dict_round_trip(rank, world):
    """gather_state_dict gives the unsharded model's state_dict; load_full_state_dict of it into a
    fresh sharded model gives back every rank's shards."""
    from collmm.torch import ColumnParallelLinear, RowParallelLinear, gather_state_dict, load_full_state_dict

    torch.manual_seed(0)
    full = nn.Sequential(nn.Linear(6, 2 * world + 1), nn.GELU(), nn.Linear(2 * world + 1, 6), nn.LayerNorm(6))
    sharded = nn.Sequential(ColumnParallelLinear.from_linear(full[0]), nn.GELU(), RowParallelLinear.from_linear(full[2]),
                            nn.LayerNorm(6))
    sharded[3].load_state_dict(full[3].state_dict())
    got = gather_state_dict(sharded)
    assert got.keys() == full.state_dict().keys(), (got.keys(), full.state_dict().keys())
    for key, value in full.state_dict().items():
        assert torch.equal(got[key], value), f"gathered {key} rank {rank}"
    fresh = nn.Sequential(ColumnParallelLinear(6, 2 * world + 1), nn.GELU(), RowParallelLinear(2 * world + 1, 6),
                          nn.LayerNorm(6))
    load_full_state_dict(fresh, got)
    for (key, a), b in zip(sharded.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(local(a), local(b)), f"re-sharded {key} rank {rank}"


def shard_helper(rank, world):
    """collmm.torch.shard gives this rank's block (collmm's split) along any dim; a name works as a group."""
    from collmm.torch import ColumnParallelLinear, shard

    x = seeded(90, 3, 2 * world + 1, 4)
    assert torch.equal(shard(x, 1), x[:, block(2 * world + 1, world, rank)])
    assert torch.equal(shard(x, 0, dist.group.WORLD.group_name), x[block(3, world, rank)])
    layer = ColumnParallelLinear(4, world + 1, group=dist.group.WORLD.group_name)
    assert layer(shard(x.transpose(0, 1).contiguous())).shape == (2 * world + 1, 3, layer.local_out)
