"""A sequence-parallel norm feeding one collmm Colwise linear (torchtitan's pattern) at sequences that
torch's SequenceParallel mishandles, for test_short_sequence.py: compiled at a length that P does not
divide (issue 43 item 6), and shorter than P, a rank holding no rows (item 7). No pytest here."""
import time

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor
from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module

from dist_util import assert_close, seeded
from llama_block import RMSNorm


class NormLinear(nn.Module):
    def __init__(self, dim=12, out=8):
        super().__init__()
        self.norm = RMSNorm(dim, torch.float64)
        self.w = nn.Linear(dim, out, dtype=torch.float64)

    def forward(self, x):
        return self.w(self.norm(x))


def _model(mesh):
    from collmm.torch import ColwiseParallel

    torch.manual_seed(0)
    plain = NormLinear()
    model = NormLinear()
    model.load_state_dict(plain.state_dict())
    plan = {"norm": SequenceParallel(sequence_dim=1), "w": ColwiseParallel(input_layouts=Shard(1))}
    return plain, parallelize_module(model, mesh, plan)


def compiled_uneven_sequence(rank, world):
    """seq 15 at P = 2 (rows 8 and 7, torchtitan's local tensors): eager equals the unsharded model;
    compiled, torch's SequenceParallel claims 16 and 14 rows, and every rank raises collmm's ValueError
    with the remedies; the remedy of the message (gathered_size) then compiles and runs."""
    mesh = init_device_mesh("cpu", (world,))
    plain, model = _model(mesh)
    x_full = seeded(1, 2, 2 * world + 1, 12, dtype=torch.float64)
    x = x_full.tensor_split(world, dim=1)[rank].contiguous()
    want = plain(x_full)
    cols = slice(rank * 8 // world, (rank + 1) * 8 // world)
    assert_close(model(x), want[..., cols], "eager")
    try:
        torch.compile(model, fullgraph=True, backend="aot_eager")(x)
        raise AssertionError("a compiled uneven sequence through SequenceParallel was taken")
    except Exception as e:  # noqa: BLE001 - torch.compile may wrap collmm's ValueError
        for fragment in ("collmm", "gathered_size", "pad the sequence to a multiple of P",
                         "module(x, gathered_size=total)"):
            assert fragment in str(e), str(e)
    # The remedy: the true length given to the Colwise module (no SequenceParallel guess).
    torch._dynamo.reset()

    def forward(t):
        return model.w(model.norm(t).to_local(), gathered_size=x_full.shape[1])

    assert_close(torch.compile(forward, fullgraph=True, backend="aot_eager")(x), want[..., cols], "compiled, sized")


def rank_without_rows(rank, world, as_dtensor):
    """seq 3 at P = 4: the last rank holds no rows. It runs (a rank may own zero rows) and equals the
    unsharded model, forward and backward, within bounded time (collmm.set_timeout: no hang)."""
    import collmm

    collmm.set_timeout(20)
    mesh = init_device_mesh("cpu", (world,))
    plain, model = _model(mesh)
    x_full = seeded(2, 2, world - 1, 12, dtype=torch.float64)
    if as_dtensor:
        x = distribute_tensor(x_full, mesh, [Shard(1)])
        rows = x.to_local().shape[1]
    else:
        x = x_full.tensor_split(world, dim=1)[rank].contiguous()
        rows = x.shape[1]
    assert (rows == 0) == (rank == world - 1), rows
    t0 = time.monotonic()
    y = model(x)
    cols = slice(rank * 8 // world, (rank + 1) * 8 // world)
    want = plain(x_full)
    assert_close(y, want[..., cols], "a rank without rows: y")
    y.sum().backward()
    want[..., cols].sum().backward()  # this rank's columns only: the gradients of w's shard
    assert_close(model.w.weight.grad.to_local() if hasattr(model.w.weight.grad, "to_local") else model.w.weight.grad,
                 plain.w.weight.grad[cols], "dW")
    assert time.monotonic() - t0 < 60, "took too long"
