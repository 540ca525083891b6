"""The layers' cases, for test_layers.py (CPU, gloo) and gpu_cases.py (CUDA, NCCL): the
sequence-parallel MLP against the unsharded nn.Linear pair (outputs and every gradient), and
torch.compile(fullgraph=True). No pytest here."""
import torch
import torch.distributed as dist
from torch import nn

from collmm import ALGOS
from dist_util import assert_close, block, local, seeded
from mlp_check import check_mlp



def mlp_cases(rank, world, device="cpu"):
    for algo in ALGOS + ("ring:pieces2",):  # an algorithm with options of its own too
        for shape in ((4 * world + 1, 6), (2 * world, 3, 6)):  # [M, K] with M uneven; [s, b, K]
            k, hidden = shape[-1], 2 * world + 1
            torch.manual_seed(0)  # the same unsharded layers on every rank
            lin1 = nn.Linear(k, hidden, dtype=torch.float64).to(device)
            lin2 = nn.Linear(hidden, k, bias=False, dtype=torch.float64).to(device)
            x_full = seeded(10, *shape, dtype=torch.float64).to(device)
            target = seeded(11, *shape, dtype=torch.float64).to(device)
            check_mlp(lin1, lin2, x_full, target, block(shape[0], world, rank), rank, world, algo,
                      f"mlp {algo} {shape} rank {rank}/{world}")


def weight_grad_layout_cases(rank, world, device="cpu"):
    """A weight passed as B = w.t(), as the layers pass theirs, gets a contiguous gradient from each
    op's backward (torch's mm backward gives one in B's layout). A strided one made torch 2.11's
    AccumulateGrad gather a DTensor weight's gradient whole: d col.weight came back Replicate()."""
    group = dist.group.WORLD.group_name
    ops = {"ag": lambda a, b: torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo="ring")[1][0],
           "rs": lambda a, b: torch.ops.collmm.fused_matmul_reduce_scatter(a, b, "sum", 0, group, algo="ring"),
           "ar": lambda a, b: torch.ops.collmm.fused_matmul_all_reduce(a, b, "sum", group, algo="ring")}
    for name, op in ops.items():
        w = seeded(16, 5, 6).to(device).requires_grad_()  # [N, K]: B = w.t() is column-major
        a = seeded(17, 2 * world, 6).to(device).requires_grad_()
        seen = []
        w.register_hook(lambda g: seen.append((tuple(g.shape), g.is_contiguous())))
        op(a, w.t()).sum().backward()
        assert seen == [((5, 6), True)], f"{name} rank {rank}/{world}: the weight's gradient as it came: {seen}"


def compile_cases(rank, world):
    """torch.compile(fullgraph=True) traces the layers (the ops' fake kernels, no graph break) and the
    compiled model's outputs and gradients equal the eager ones."""
    from collmm.torch import ColumnParallelLinear, RowParallelLinear

    torch.manual_seed(0)
    lin1, lin2 = nn.Linear(6, 2 * world + 1), nn.Linear(2 * world + 1, 6)  # both biases: cut and replicated
    model = nn.Sequential(ColumnParallelLinear.from_linear(lin1, algo="ring"), nn.GELU(),
                          RowParallelLinear.from_linear(lin2, algo="ring"))
    x = seeded(12, 2 * world, 3, 6)[block(2 * world, world, rank)]
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    ye = model(xe)
    ye.sum().backward()
    grads = [local(p.grad).clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    yc = compiled(xc)
    yc.sum().backward()
    assert_close(yc, ye, "compiled y")
    assert_close(xc.grad, xe.grad, "compiled dx")
    for p, g in zip(model.parameters(), grads):
        assert_close(local(p.grad), g, "compiled param grad")

    op = torch.compile(lambda a, b: torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, dist.group.WORLD.group_name),
                       fullgraph=True, backend="aot_eager")
    a, b = seeded(13, 2, 5), seeded(14, 5, 3)
    gathered, (c,) = op(a, b)
    assert_close(c, gathered @ b, "compiled op")


_held = []


def group_not_held_case(rank, world):
    """The layers name their group for the ops and hold it only as their DTensor parameters' mesh
    does (torch's DeviceMesh): a model of them alive past destroy_process_group (the worker calls
    it after this case) and into the interpreter's exit ends its process cleanly. (A layer holding
    a gloo group into the exit once aborted the process about one run in three: "terminate called
    without an active exception".)"""
    from collmm.torch import ColumnParallelLinear, RowParallelLinear, gather_state_dict

    torch.manual_seed(0)
    model = nn.Sequential(ColumnParallelLinear(6, 2 * world + 1), nn.GELU(), RowParallelLinear(2 * world + 1, 6))
    y = model(seeded(15, 2 * world, 6)[block(2 * world, world, rank)])
    gather_state_dict(model)
    y.sum().backward()
    assert model[2].bias.grad is not None
    assert model[0].group_name == dist.group.WORLD.group_name
    _held.append(model)  # alive until the process ends


def compile_cache_case(rank, world):
    """A step of both ops compiled by inductor, whose compile caches (AOTAutograd's, the FX graph
    cache) sit in a directory the caller shares between runs. Every rank's inputs have the same
    shapes at every world, so a step compiled at another world (the group's name is the same) or
    by another rank (x's scatter gives ranks different sizes) would be found by the caches' keys
    unless collmm keys them on the group. The compiled step equals the eager one."""
    group = dist.group.WORLD.group_name
    k, n = 12, 4
    a = seeded(15, 8 * world, k)[block(8 * world, world, rank)]
    b = seeded(16, k, n)
    w = seeded(17, n * world, k)[block(n * world, world, rank)]
    x = seeded(18, 7, n)

    def step(a, b, w, x):
        _, (h,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, return_A=False, algo="ring")
        return (torch.ops.collmm.fused_matmul_reduce_scatter(torch.relu(h), w, "sum", 0, group, algo="ring"),
                torch.ops.collmm.fused_matmul_reduce_scatter(x, w, "sum", 0, group, algo="sequential"))

    got, want = torch.compile(step, fullgraph=True)(a, b, w, x), step(a, b, w, x)
    for g, e, name in zip(got, want, ("ag then rs", "rs of x")):
        assert_close(g, e, f"compiled {name}, rank {rank}/{world}")
