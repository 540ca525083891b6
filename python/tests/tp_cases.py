"""Cases of collmm inside PyTorch's tensor parallelism (CPU, gloo; for test_parallel.py, no pytest
here): the Llama block parallelized with collmm's styles trains as the unsharded one (uneven
sequence, activation checkpointing) and as torch's styles at an even one; layers built directly
initialize as nn.Linear; no collmm call moves torch's RNG; DTensors through the Python ops."""
import copy

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import parallelize_module

from dist_util import assert_close, seeded
from llama_block import Block, collmm_plan, torch_plan
from shard_cases import slice_of, uneven_split

F64 = torch.float64


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def train_uneven_block(rank, world, steps=20):
    """[seq, batch, hidden] with seq % P != 0, split unevenly (rank 0 the most), local tensors in and
    out: 20 AdamW steps of the block parallelized with collmm's styles (the feed-forward under
    activation checkpointing) give the unsharded block's loss at every step and its parameters."""
    seq, batch, dim = 3 * world + 2, 2, 12
    sizes = uneven_split(seq, world)
    mine = slice_of(sizes, rank)
    torch.manual_seed(0)
    ref = Block(checkpoint_ffn=True)
    model = parallelize_module(copy.deepcopy(ref), init_device_mesh("cpu", (world,)), collmm_plan())
    assert isinstance(model.attention.wq.weight, DTensor) and model.attention.wq.weight.placements == (Shard(0),)
    assert model.feed_forward.w2.weight.placements == (Shard(1),)
    opt, ref_opt = (torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, ref))
    x, target = seeded(100, seq, batch, dim, dtype=F64), seeded(101, seq, batch, dim, dtype=F64)
    for step in range(steps):
        y = model(x[mine].clone())
        assert not isinstance(y, DTensor) and y.shape == (sizes[rank], batch, dim), (type(y), y.shape)
        loss = (y * target[mine]).sum()
        loss.backward()
        ref_loss = (ref(x) * target).sum()
        ref_loss.backward()
        total = loss.detach().clone()
        dist.all_reduce(total)
        assert_close(total, ref_loss.detach(), f"step {step} loss rank {rank}/{world}")
        for o in (opt, ref_opt):
            o.step()
            o.zero_grad()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert_close(full(p.detach()), q.detach(), f"{name} after {steps} steps rank {rank}/{world}")


def same_as_torch_styles(rank, world):
    """At an even sequence, collmm's styles and torch's give the same outputs and gradients (an even
    feed-forward width too: torch's RowwiseParallel takes a local input's width as 1/P of the whole)."""
    seq, batch, dim = 2 * world, 2, 12
    torch.manual_seed(0)
    base = Block(hidden=4 * world)
    mesh = init_device_mesh("cpu", (world,))
    ours = parallelize_module(copy.deepcopy(base), mesh, collmm_plan(algo="ring"))
    theirs = parallelize_module(copy.deepcopy(base), mesh, torch_plan())
    x = seeded(102, seq, batch, dim, dtype=F64).chunk(world)[rank]
    ys = []
    for model in (ours, theirs):
        y = model(x.clone())
        (y * seeded(103, *y.shape, dtype=F64)).sum().backward()
        ys.append(y)
    assert_close(ys[0], ys[1], f"collmm vs torch styles y rank {rank}")
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        assert p.placements == q.placements, (name, p.placements, q.placements)
        assert_close(full(p.grad), full(q.grad), f"collmm vs torch styles d{name} rank {rank}")


def layers_init_as_linear(rank, world):
    """ColumnParallelLinear / RowParallelLinear built directly with the same seed on every rank: their
    shards gather to the nn.Linear of the full size built from that seed (rank 0's draw scattered)."""
    from collmm.torch import ColumnParallelLinear, RowParallelLinear

    for cls in (ColumnParallelLinear, RowParallelLinear):
        torch.manual_seed(0)
        want = nn.Linear(64, 2 * world + 1)
        torch.manual_seed(0)
        layer = cls(64, 2 * world + 1)
        assert_close(full(layer.weight.detach()), want.weight.detach(), f"{cls.__name__} weight rank {rank}")
        assert_close(full(layer.bias.detach()), want.bias.detach(), f"{cls.__name__} bias rank {rank}")


def rng_untouched(rank, world):
    """The first algo="auto" call of a shape (auto's timed candidates) leaves torch's global RNG as it
    was: the same state after as before, on every rank."""
    from collmm import fused_all_gather_matmul, fused_matmul_reduce_scatter

    torch.manual_seed(7)
    before = torch.get_rng_state()
    a = seeded(104, 5 + rank, 24)
    fused_all_gather_matmul(a, [seeded(105, 24, 16)], algo="auto")
    fused_matmul_reduce_scatter(seeded(106, 9, 16), seeded(107, 16, 24), algo="auto")
    assert torch.equal(torch.get_rng_state(), before), f"rank {rank}: the global RNG moved"
    draws = [torch.empty(3) for _ in range(world)]
    dist.all_gather(draws, torch.randn(3))
    assert all(torch.equal(d, draws[0]) for d in draws), f"rank {rank}: torch.randn differs over ranks: {draws}"


def dtensors_through_ops(rank, world):
    """collmm.fused_all_gather_matmul / fused_matmul_reduce_scatter take DTensors (group and sizes from
    them, DTensors back); the dispatcher ops refuse them with a message that says what to pass."""
    import collmm

    mesh = init_device_mesh("cpu", (world,))
    a_full, b_full = seeded(108, 2 * world + 1, 3, 8), seeded(109, 8, 2 * world + 1)
    a, b = distribute_tensor(a_full, mesh, [Shard(0)]), distribute_tensor(b_full, mesh, [Shard(1)])
    gathered, (c,) = collmm.fused_all_gather_matmul(a, [b])
    assert gathered.placements == (Replicate(),) and c.placements == (Shard(2),), (gathered.placements, c.placements)
    assert_close(c.full_tensor(), a_full @ b_full, f"DTensor ag rank {rank}")
    h, w = distribute_tensor(a_full, mesh, [Shard(2)]), distribute_tensor(b_full, mesh, [Shard(0)])
    y = collmm.fused_matmul_reduce_scatter(h, w, scatter_dim=0)
    assert y.placements == (Shard(0),) and y.shape == (2 * world + 1, 3, 2 * world + 1)
    assert_close(y.full_tensor(), (a_full.double() @ b_full.double()).float(), f"DTensor rs rank {rank}")
    try:
        collmm.fused_all_gather_matmul(distribute_tensor(a_full, mesh, [Replicate()]), [b])
        raise AssertionError("a Replicate() A_shard was taken")
    except ValueError as e:
        assert "collmm" in str(e) and "Shard(0)" in str(e), str(e)
    try:
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, dist.group.WORLD.group_name)
        raise AssertionError("the dispatcher op took a DTensor")
    except Exception as e:  # noqa: BLE001 - DTensor's dispatch may wrap the ValueError
        assert "collmm.fused_all_gather_matmul (it takes DTensors)" in str(e) and "to_local()" in str(e), str(e)


def expect_value_error(fn, *fragments) -> None:
    try:
        fn()
    except ValueError as e:
        assert "collmm" in str(e) and all(f in str(e) for f in fragments), f"{str(e)!r} lacks {fragments}"
        return
    raise AssertionError(f"no ValueError (wanted {fragments})")


def misuse_errors(rank, world):
    """A bad algo is refused when a style or layer is built; a rank outside a group gets a clear error;
    a layer's wrong input is named in the layer's terms; the output of gather_dim=1 (not contiguous)
    goes into the dual op; help(torch.ops.collmm.<op>) shows the op's docstring; collmm.__version__."""
    import pydoc

    import collmm
    from collmm.torch import ColumnParallelLinear, ColwiseParallel, RowParallelLinear, RowwiseParallel

    expect_value_error(lambda: ColwiseParallel(input_layouts=Shard(0), algo="zigzag"), "ColwiseParallel", "zigzag")
    expect_value_error(lambda: RowwiseParallel(algo="zigzag"), "RowwiseParallel", "unknown algorithm 'zigzag'",
                       "algo is auto or ALGO[:wavesW][:mergeG][:piecesS[h]]")
    expect_value_error(lambda: ColwiseParallel(algo="ring:pieces4x"), "ColwiseParallel", "pieces takes a count")
    assert RowwiseParallel(algo="ring:pieces4h").algo == "ring:pieces4h"  # an algorithm with options of its own
    expect_value_error(lambda: RowParallelLinear(4, 4, algo="zigzag"), "RowParallelLinear", "zigzag")
    sub = dist.new_group([0, 1])
    if rank >= 2:
        expect_value_error(lambda: ColumnParallelLinear(4, 4, group=sub), "not a member")
        expect_value_error(lambda: collmm.fused_all_gather_matmul(seeded(1, 2, 4), [seeded(2, 4, 3)], group=sub),
                           "not a member")
    col = ColumnParallelLinear(6, 2 * world)
    expect_value_error(lambda: col(seeded(3, 2, 5)), "ColumnParallelLinear(in_features=6", "in_features")
    row = RowParallelLinear(2 * world, 6)
    expect_value_error(lambda: row(seeded(4, 2 * world, 2 * world)), "RowParallelLinear(in_features=",
                       "not the full input")
    # gather_dim 1 of [batch, seq, K]: its outputs are views with the seq dim moved back (not contiguous)
    a = seeded(5, 2, rank + 1, 4)
    gathered, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [seeded(6, 4, 3)], 1, dist.group.WORLD.group_name)
    y = torch.ops.collmm.fused_matmul_reduce_scatter(c, seeded(7, 3, 5), "sum", 1, dist.group.WORLD.group_name,
                                                    scatter_size=rank + 1)
    want = (gathered.double() @ seeded(6, 4, 3).double() @ seeded(7, 3, 5).double() * world).float()
    assert_close(y, want[:, sum(range(1, rank + 1)):sum(range(1, rank + 2))], f"dual op of gather_dim 1 rank {rank}")
    assert "All-gather of" in pydoc.render_doc(torch.ops.collmm.fused_all_gather_matmul)
    assert "reduced over the group" in pydoc.render_doc(torch.ops.collmm.fused_matmul_reduce_scatter)
    assert collmm.__version__ and collmm.__version__[0].isdigit(), collmm.__version__
