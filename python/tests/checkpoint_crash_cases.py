"""A rank killed in the middle of a checkpoint's save, for test_checkpoint_crash.py. Each rank runs
in a process of its own (`python -c`, started by the test), so that one can be killed (SIGKILL)
while the others go on. The model: an MLP parallelized with collmm's styles over a gloo group."""
import os
import signal
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import parallelize_module


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1, self.w2 = nn.Linear(16, 64), nn.Linear(64, 16)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(x)))


def model(world: int, seed: int):
    from collmm.torch import ColwiseParallel, RowwiseParallel

    torch.manual_seed(seed)
    return parallelize_module(MLP(), init_device_mesh("cpu", (world,)),
                              {"w1": ColwiseParallel(), "w2": RowwiseParallel()})


def full_state(m) -> dict:
    return {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().clone() for k, v in m.state_dict().items()}


def die_in_writes(rank: int, after: bool) -> None:
    """This rank's process is killed inside DCP's writing of its shards: before it writes them, or
    after (its files there, the metadata not)."""
    from torch.distributed.checkpoint.filesystem import FileSystemWriter

    write = FileSystemWriter.write_data

    def dying(self, plan, planner):
        if after:
            result = write(self, plan, planner)
            result.wait()
        print(f"rank {rank}: killed inside the save", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    FileSystemWriter.write_data = dying


def save_then_die(rank: int, world: int, root: str, dying: int, after: bool, in_place: bool) -> None:
    """Step 1 saved whole; the weights changed; the save of step 2 killed on rank `dying`. in_place:
    DCP's own save over step 1's directory (what the README did), for comparison."""
    from collmm.torch import save_checkpoint

    m = model(world, seed=0)
    save_checkpoint(m.state_dict(), root, step=1)
    want = full_state(m)
    if rank == 0:
        torch.save(want, os.path.join(root, "want.pt"))
    with torch.no_grad():
        for p in m.parameters():
            p.add_(1.0)
    dist.barrier()
    if rank == dying:
        die_in_writes(rank, after)
    try:
        if in_place:
            dcp.save(m.state_dict(), checkpoint_id=os.path.join(root, "step-00000001"))
        else:
            save_checkpoint(m.state_dict(), root, step=2)
    except Exception as e:  # the peer died: gloo's connection closed
        print(f"rank {rank}: the save failed: {type(e).__name__}", flush=True)
        os._exit(0)
    print(f"rank {rank}: the save finished", flush=True)


def load(rank: int, world: int, root: str, in_place: bool) -> None:
    """A fresh model (other weights) loads the checkpoint: every weight equal to step 1's."""
    from collmm.torch import load_checkpoint

    m = model(world, seed=1)
    state = m.state_dict()
    if in_place:
        dcp.load(state, checkpoint_id=os.path.join(root, "step-00000001"))
        step = 1
    else:
        step = load_checkpoint(state, root)
    m.load_state_dict(state)
    want = torch.load(os.path.join(root, "want.pt"))
    got = full_state(m)
    same = all(torch.equal(got[k], want[k]) for k in want)
    print(f"rank {rank}: loaded step {step}, equal to step 1: {same}", flush=True)


if __name__ == "__main__":
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=os.environ["INIT"], rank=rank, world_size=world,
                            timeout=timedelta(seconds=30))
    import collmm  # noqa: F401

    case, args = sys.argv[1], sys.argv[2:]
    root = args[0]
    if case == "save":
        save_then_die(rank, world, root, int(args[1]), args[2] == "after", args[3] == "in_place")
    else:
        load(rank, world, root, args[1] == "in_place")
    dist.destroy_process_group()
