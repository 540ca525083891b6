"""Checkpoints of models parallelized with collmm's styles (torch.distributed.checkpoint, CPU, gloo;
for test_parallel.py, no pytest here): saved at one world size, loaded at the same and at another,
every parameter equal to the saved one; FSDP2 x collmm TP on a 2 x 2 mesh trains as the unsharded
block and its checkpoint loads back; torch.compile(fullgraph=True) of the parallelized block."""
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor
from torch.distributed.tensor.parallel import parallelize_module

from dist_util import assert_close, seeded
from llama_block import Block, collmm_plan
from shard_cases import slice_of, uneven_split

F64 = torch.float64


def full_state(model) -> dict:
    return {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().clone() for k, v in model.state_dict().items()}


def tp_block(world: int, seed: int):
    torch.manual_seed(seed)
    return parallelize_module(Block(), init_device_mesh("cpu", (world,)), collmm_plan())


def one_step(model, rank, world):
    seq = 2 * world + 1
    mine = slice_of(uneven_split(seq, world), rank)
    y = model(seeded(110, seq, 2, 12, dtype=F64)[mine].clone())
    y.square().sum().backward()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt.step()


def check_loaded(model, want: dict, what: str) -> None:
    got = full_state(model)
    assert got.keys() == want.keys(), (got.keys(), want.keys())
    for k, v in want.items():
        assert torch.equal(got[k], v), f"{what}: {k} differs after load (max {(got[k] - v).abs().max()})"


def load_into_fresh(path: str, rank: int, world: int, what: str) -> None:
    model = tp_block(world, seed=1)  # other weights than those saved
    state = model.state_dict()
    dcp.load(state, checkpoint_id=path)
    model.load_state_dict(state)
    check_loaded(model, torch.load(os.path.join(path, "full.pt")), f"{what} rank {rank}/{world}")


def save_after_a_step(path: str, rank: int, world: int) -> None:
    model = tp_block(world, seed=0)
    one_step(model, rank, world)
    dcp.save(model.state_dict(), checkpoint_id=path)
    want = full_state(model)
    if rank == 0:
        torch.save(want, os.path.join(path, "full.pt"))
    dist.barrier()


def save_then_load(rank, world, saved: str, to_save: str) -> None:
    """Loads `saved` (when given) into a fresh world-`world` model, then saves one of its own to `to_save`
    and loads that back at this world size."""
    if saved:
        load_into_fresh(saved, rank, world, f"saved at another world, loaded at {world}")
    if to_save:
        save_after_a_step(to_save, rank, world)
        load_into_fresh(to_save, rank, world, "saved and loaded at the same world")


def fsdp_times_tp(rank, world, path: str):
    """World 4 as a (dp 2, tp 2) mesh: collmm TP inside, FSDP2's fully_shard on dp over it. Three AdamW
    steps equal the unsharded block's (each dp rank its half of the batch, the sequence split
    unevenly over tp); the DCP checkpoint loads back into a fresh 2-D model exactly."""
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh["dp"].get_local_rank(), mesh["tp"].get_local_rank()

    def build(seed):
        torch.manual_seed(seed)
        model = parallelize_module(Block(), mesh["tp"], collmm_plan())
        return fully_shard(model, mesh=mesh["dp"])

    torch.manual_seed(0)
    ref = Block()
    model = build(0)
    seq = 5
    sizes = uneven_split(seq, 2)
    x, target = seeded(111, seq, 2, 12, dtype=F64), seeded(112, seq, 2, 12, dtype=F64)
    opt, ref_opt = torch.optim.AdamW(model.parameters(), lr=1e-2), torch.optim.AdamW(ref.parameters(), lr=1e-2)
    for step in range(3):
        rows = slice_of(sizes, tp)
        y = model(x[rows, dp:dp + 1].clone())
        (y * target[rows, dp:dp + 1]).sum().backward()
        ((ref(x) * target).sum() / 2).backward()  # FSDP2 averages the gradients over dp
        for o in (opt, ref_opt):
            o.step()
            o.zero_grad()
    want = full_state(model)
    for k, v in ref.state_dict().items():
        assert_close(want[k], v, f"FSDP2 x TP {k} after 3 steps rank {rank}")
    dcp.save(model.state_dict(), checkpoint_id=path)
    fresh = build(1)
    state = fresh.state_dict()
    dcp.load(state, checkpoint_id=path)
    fresh.load_state_dict(state)
    check_loaded(fresh, want, f"FSDP2 x TP checkpoint rank {rank}")


def compiled_block(rank, world):
    """torch.compile(fullgraph=True) of the block parallelized with collmm's styles, its input a
    DTensor sharded at an uneven sequence (torch.chunk's split), no size argument anywhere: inductor's
    output (forward) and aot_eager's gradients (forward and backward traced) equal the eager ones."""
    seq = 2 * world + 1
    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (world,))
    model = parallelize_module(Block(), mesh, collmm_plan(local_output=False))
    x_full, t_full = seeded(113, seq, 2, 12, dtype=F64), seeded(114, seq, 2, 12, dtype=F64)

    def step(run):
        x = distribute_tensor(x_full, mesh, [Shard(0)]).requires_grad_()
        y = run(x)
        assert isinstance(y, DTensor) and y.shape == x_full.shape, (type(y), y.shape)
        (y.to_local() * t_full.chunk(world)[rank]).sum().backward()
        grads = [x.grad.to_local()] + [p.grad.to_local() for p in model.parameters()]
        model.zero_grad()
        return y.to_local().detach(), grads

    y0, g0 = step(model)
    with torch.no_grad():
        y1 = torch.compile(model, fullgraph=True, backend="inductor")(distribute_tensor(x_full, mesh, [Shard(0)]))
    assert_close(y1.to_local(), y0, f"inductor y rank {rank}")
    y2, g2 = step(torch.compile(model, fullgraph=True, backend="aot_eager"))
    assert_close(y2, y0, f"aot_eager y rank {rank}")
    for name, a, b in zip(["x"] + [n for n, _ in model.named_parameters()], g2, g0):
        assert_close(a, b, f"compiled d{name} rank {rank}")
    # A local input of uneven rows: under torch.compile the gathered size is taken as P times this
    # rank's rows, and the kernel refuses it naming gathered_size (not inductor's size assertion).
    x = x_full.tensor_split(world)[rank].clone()
    local_model = parallelize_module(Block(), mesh, collmm_plan())  # local tensors in and out
    try:
        torch.compile(local_model, fullgraph=True, backend="aot_eager")(x)
        raise AssertionError("an uneven local input under torch.compile was taken")
    except Exception as e:  # noqa: BLE001 - torch.compile may wrap collmm's ValueError
        assert "collmm" in str(e) and "gathered_size" in str(e), str(e)
