"""A sequence-parallel norm feeding one collmm Colwise linear (torchtitan's pattern), compiled at a
sequence length that P does not divide, for test_compile_uneven_sequence.py. No pytest here."""
import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
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
