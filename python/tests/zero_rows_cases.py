"""Cases of a sequence that leaves a rank no rows (for test_parallel.py, no pytest here): the
torchtitan-style Llama of python/examples/llama_tp.py refuses it on every rank before data moves and
runs the next call; a DTensor with the true sizes runs through a SequenceParallel norm and a collmm
Colwise with a rank of zero rows, equal to the unsharded layers."""
import copy
import os
import sys

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor
from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module

from dist_util import assert_close
from tp_cases import expect_value_error

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import llama_tp  # noqa: E402


def llama_refuses_empty_rank(rank, world):
    """Sequences whose torch.chunk split leaves a rank no rows (3 and 9 at P = 4: 1, 1, 1, 0 and
    3, 3, 3, 0) are refused on every rank; the model then runs a sequence of 7 as the unsharded one."""
    import collmm.torch as ctp  # noqa: F401  (the styles apply_tp uses)

    torch.manual_seed(0)
    ref = llama_tp.build_model(vocab_size=32, dim=16, n_layers=1, n_heads=4, hidden_dim=24).to(torch.float64)
    model = llama_tp.apply_tp(copy.deepcopy(ref), init_device_mesh("cpu", (world,)))
    for seq in (3, 9):
        tokens = torch.randint(32, (2, seq), generator=torch.Generator().manual_seed(seq))
        expect_value_error(lambda: model(tokens), f"a sequence of {seq}", "hold no rows", "use_local_output=False")
    tokens = torch.randint(32, (2, 7), generator=torch.Generator().manual_seed(7))
    assert_close(model(tokens), ref(tokens), "logits at seq 7 after the refusals")


class _NormLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.wq = llama_tp.RMSNorm(12), nn.Linear(12, 8, bias=False)

    def forward(self, x):
        return self.wq(self.norm(x))


def true_sizes_run_with_empty_rank(rank, world):
    """Seq 3 at P = 4 as a DTensor with the true sizes (rows 1, 1, 1, 0): a SequenceParallel norm and
    a collmm Colwise give the unsharded output's columns of this rank, and the input's gradient."""
    import collmm.torch as ctp

    torch.manual_seed(0)
    ref = _NormLinear().double()
    model = parallelize_module(copy.deepcopy(ref), init_device_mesh("cpu", (world,)), {
        "norm": SequenceParallel(), "wq": ctp.ColwiseParallel(input_layouts=Shard(1))})
    full = torch.randn(2, 3, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x = distribute_tensor(full, model.norm.weight.device_mesh, [Shard(1)]).requires_grad_()
    y = model(x)
    want = ref(full.requires_grad_())
    cols = 8 // world
    assert_close(y, want[..., rank * cols:(rank + 1) * cols], "output columns")
    y.sum().backward()
    want.sum().backward()
    assert_close(x.grad.full_tensor(), full.grad, "input gradient")
