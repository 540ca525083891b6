"""The all-reduce op beyond its values (op_cases.ar_cases): autograd against the unsharded float64
autograd (sum and avg), torch.compile(fullgraph=True), the Python wrapper on DTensors, and
Megatron's MLP without sequence parallelism (collmm's ColwiseParallel on a replicated input,
RowwiseParallel with its default Replicate() output) training as the unsharded MLP, traced by
collmm.trace; RowParallelLinear(sequence_parallel=False). For test_all_reduce.py (CPU, gloo) and
gpu_cases.py (CUDA, NCCL); no pytest here."""
import copy

import torch
import torch.distributed as dist
from torch import nn

from collmm import ALGOS
from dist_util import assert_close, block, chunk, local, seeded
from op_cases import as_layout


def autograd_cases(rank, world, device="cpu"):
    """dA and dB of the op (float32 and float64, sum and avg, both B layouts, every algo) equal the
    gradients of the unsharded float64 A @ B (their blocks of K): no communication in backward."""
    group = dist.group.WORLD.group_name
    s, bt, k, n = 2 * world + 1, 2, 3 * world + 1, 4
    ks = chunk(k, world, rank)  # torch.chunk's split, as a parallel layer's weight
    for algo in ALGOS:
        for dtype, layout, reduce_op in ((torch.float64, "kn", "sum"), (torch.float32, "nk", "avg")):
            what = f"ar autograd {algo} {dtype} {layout} {reduce_op} rank {rank}/{world}"
            a_full = seeded(40, s, bt, k, dtype=torch.float64).requires_grad_()
            b_full = seeded(41, k, n, dtype=torch.float64).requires_grad_()
            target = seeded(42, s, bt, n, dtype=torch.float64)
            want = a_full @ b_full / (world if reduce_op == "avg" else 1)
            (want * target).sum().backward()

            a = a_full.detach()[..., ks].to(dtype).contiguous().to(device).requires_grad_()
            b_leaf = as_layout(b_full.detach()[ks].to(dtype).to(device), layout).requires_grad_()
            c = torch.ops.collmm.fused_matmul_all_reduce(a, b_leaf, reduce_op, group, algo=algo)
            (c * target.to(dtype).to(device)).sum().backward()
            assert_close(c, want.detach().to(dtype), what + " C")
            assert_close(a.grad, a_full.grad[..., ks].to(dtype), what + " dA")
            assert_close(b_leaf.grad, b_full.grad[ks].to(dtype), what + " dB")


def compile_case(rank, world):
    """torch.compile(fullgraph=True) of a call and its backward (the fake kernel: no graph break), of
    the op and of the Python wrapper: the values and gradients of the eager call."""
    import collmm

    group = dist.group.WORLD.group_name
    k = 2 * world + 1
    a = seeded(43, 3, 2, k)[..., block(k, world, rank)].contiguous()
    w = seeded(44, 5, k)[:, block(k, world, rank)].contiguous()

    def step(a, w):
        y = torch.ops.collmm.fused_matmul_all_reduce(a, w.t(), "sum", group, algo="ring")
        return torch.relu(collmm.fused_matmul_all_reduce(a, w.t(), "avg", group)) + y

    ae, we = a.clone().requires_grad_(), w.clone().requires_grad_()
    ac, wc = a.clone().requires_grad_(), w.clone().requires_grad_()
    ye = step(ae, we)
    ye.square().sum().backward()
    yc = torch.compile(step, fullgraph=True, backend="aot_eager")(ac, wc)
    yc.square().sum().backward()
    assert_close(yc, ye, f"compiled y rank {rank}/{world}")
    assert_close(ac.grad, ae.grad, f"compiled dA rank {rank}/{world}")
    assert_close(wc.grad, we.grad, f"compiled dW rank {rank}/{world}")


def dtensor_case(rank, world):
    """collmm.fused_matmul_all_reduce on A Shard(-1) and B Shard(0) gives C Replicate(), the product."""
    import collmm
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    a_full, b_full = seeded(45, 4, 3, 2 * world + 1), seeded(46, 2 * world + 1, 5)
    c = collmm.fused_matmul_all_reduce(distribute_tensor(a_full, mesh, [Shard(2)]),
                                       distribute_tensor(b_full, mesh, [Shard(0)]), algo="ring")
    assert c.placements == (Replicate(),) and c.shape == (4, 3, 5), (c.placements, c.shape)
    assert_close(c.to_local(), (a_full.double() @ b_full.double()).float(), f"DTensor C rank {rank}/{world}")
    try:
        collmm.fused_matmul_all_reduce(distribute_tensor(a_full, mesh, [Replicate()]),
                                       distribute_tensor(b_full, mesh, [Shard(0)]))
    except ValueError as e:
        assert "Shard(-1)" in str(e), str(e)
    else:
        raise AssertionError("a replicated A was taken")


def mlp_train_case(rank, world, path, steps=4):
    """Megatron's MLP without sequence parallelism as one parallelize_module call: collmm's
    ColwiseParallel() (a replicated input, no communication) and RowwiseParallel() (a Replicate()
    output: collmm's GEMM + all-reduce), hidden width 2P + 1 (torch.chunk's split: a rank of none at
    P = 4). AdamW steps give the unsharded MLP's loss at every step, its input gradient and its
    parameters; collmm.trace records one gemm_ar call per step, made by the Rowwise linear."""
    import collmm
    from collmm.parallel import ColwiseForward, RowwiseForward
    from collmm.torch import ColwiseParallel, RowwiseParallel
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    torch.manual_seed(0)
    dim, hidden = 6, 2 * world + 1
    ref = nn.Sequential(nn.Linear(dim, hidden, dtype=torch.float64), nn.GELU(),
                        nn.Linear(hidden, dim, dtype=torch.float64))
    model = parallelize_module(copy.deepcopy(ref), init_device_mesh("cpu", (world,)),
                               {"0": ColwiseParallel(), "2": RowwiseParallel(algo="ring")})
    assert isinstance(model[2], RowwiseForward), type(model[2]).__mro__  # collmm's forward, not torch's
    assert not isinstance(model[0], ColwiseForward)  # torch's style: no communication forward
    opt, ref_opt = (torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, ref))
    x_all, target = seeded(47, steps, 3, 2, dim, dtype=torch.float64), seeded(48, 3, 2, dim, dtype=torch.float64)
    for step in range(steps):
        x, x_ref = (x_all[step].clone().requires_grad_() for _ in range(2))
        with collmm.trace(f"{path}-{step}", model) as t:
            y = model(x)
        assert not hasattr(y, "placements") and y.shape == (3, 2, dim), (type(y), y.shape)
        rows = [line.split(None, 14) for line in t.table.strip().splitlines()[1:]]
        assert [(r[1], r[2], r[14]) for r in rows] == [("gemm_ar", "ring", "2 forward")], t.table
        loss = (y * target).sum()
        loss.backward()
        ref_loss = (ref(x_ref) * target).sum()
        ref_loss.backward()
        what = f"step {step} rank {rank}/{world}"
        assert_close(loss.detach(), ref_loss.detach(), what + " loss")
        assert_close(x.grad, x_ref.grad, what + " dx")
        for o in (opt, ref_opt):
            o.step()
            o.zero_grad()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert_close(local(p.detach()) if not hasattr(p, "full_tensor") else p.detach().full_tensor(), q.detach(),
                     f"{name} after {steps} steps rank {rank}/{world}")


def row_layer_case(rank, world):
    """RowParallelLinear(sequence_parallel=False): the output whole on every rank, the unsharded
    nn.Linear's; its input, weight and bias gradients too (no communication in backward)."""
    from collmm.torch import RowParallelLinear

    torch.manual_seed(0)
    lin = nn.Linear(2 * world + 1, 4, dtype=torch.float64)
    row = RowParallelLinear.from_linear(lin, sequence_parallel=False)
    assert not row.sequence_parallel and RowParallelLinear.from_linear(lin).sequence_parallel
    ks = chunk(2 * world + 1, world, rank)
    h_full = seeded(49, 5, 3, 2 * world + 1, dtype=torch.float64).requires_grad_()
    target = seeded(50, 5, 3, 4, dtype=torch.float64)
    (lin(h_full) * target).sum().backward()
    h = h_full.detach()[..., ks].clone().requires_grad_()
    y = row(h)
    (y * target).sum().backward()
    what = f"RowParallelLinear(sequence_parallel=False) rank {rank}/{world}"
    assert_close(y, lin(h_full).detach(), what + " y")
    assert_close(h.grad, h_full.grad[..., ks], what + " dh")
    assert_close(local(row.weight.grad), lin.weight.grad[:, ks], what + " dW")
    assert_close(local(row.bias.grad), lin.bias.grad, what + " db")
