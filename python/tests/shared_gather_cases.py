"""Cases of collmm's styles against torch's plans (CPU, gloo; for test_torch_ports.py, no pytest
here): the torchtitan-style Llama of python/examples/llama_tp.py with SharedGather trains as the
unsharded model at an uneven sequence and moves no more collectives than torch's plan at an even one;
a split that a DTensor cannot hold is refused on every rank; an algo the style's op does not take is
refused when the style is built; torch's profiler sees collmm's ops."""
import copy
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import parallelize_module
from torch import nn

from dist_util import assert_close, seeded
from tp_cases import expect_value_error

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import llama_tp  # noqa: E402

funcol = torch.ops.c10d_functional


def _model(dtype=torch.float64, layers=2, device="cpu"):
    torch.manual_seed(0)
    return llama_tp.build_model(vocab_size=32, dim=16, n_layers=layers, n_heads=4, hidden_dim=24).to(device, dtype)


def _full(t):
    return t.full_tensor() if isinstance(t, DTensor) else t


def llama_trains_as_unsharded(rank, world, seq, device="cpu"):
    """apply_tp at any sequence length: 3 AdamW steps give the unsharded model's loss and parameters;
    the state_dict keys are the unsharded model's (on `device`: CPU with gloo, CUDA with NCCL)."""
    device = torch.device(device)
    ref = _model(device=device)
    model = llama_tp.apply_tp(copy.deepcopy(ref), init_device_mesh(device.type, (world,)))
    assert list(model.state_dict()) == list(ref.state_dict()), "state_dict keys changed"
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, ref)]
    for step in range(3):
        tokens = torch.randint(32, (2, seq + 1), generator=torch.Generator().manual_seed(step)).to(device)
        losses = []
        for m, opt in zip((model, ref), opts):
            loss = F.cross_entropy(_full(m(tokens[:, :-1])).flatten(0, 1), tokens[:, 1:].flatten())
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.detach())
        assert_close(losses[0], losses[1], f"llama loss step {step} seq {seq} rank {rank}/{world}")
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert_close(_full(p.detach()), q.detach(), f"llama {name} seq {seq} rank {rank}/{world}")


def _collectives(model, tokens):
    with CommDebugMode() as mode:
        F.cross_entropy(_full(model(tokens)).flatten(0, 1), tokens.flatten()).backward()
    return dict(mode.get_comm_counts()), mode.get_total_counts()


def llama_collectives_vs_torch(rank, world, device="cpu"):
    """At an even length, one forward and backward of collmm's plan runs as many collectives of each
    kind as torch's plan (per block: 2 all-gathers and 2 reduce-scatters forward, as many backward),
    with the same loss and gradients; without SharedGather, more (on `device`: CPU with gloo, CUDA
    with NCCL)."""
    device = torch.device(device)
    base = _model(layers=2, device=device)
    mesh = init_device_mesh(device.type, (world,))
    ours = llama_tp.apply_tp(copy.deepcopy(base), mesh)
    theirs = llama_tp.apply_torch_tp(copy.deepcopy(base), mesh)
    tokens = torch.randint(32, (2, 4 * world), generator=torch.Generator().manual_seed(1)).to(device)
    (our_counts, our_total), (their_counts, their_total) = _collectives(ours, tokens), _collectives(theirs, tokens)
    assert our_counts == their_counts, (our_counts, their_counts)
    per_block = {funcol.all_gather_into_tensor: 4, funcol.reduce_scatter_tensor: 4}  # forward + backward
    model_level = {funcol.all_gather_into_tensor: 3, funcol.reduce_scatter_tensor: 2}  # embedding, output
    want = {k: 2 * per_block[k] + model_level[k] for k in per_block}
    assert our_counts == want, (our_counts, want)
    assert our_total == their_total == sum(want.values())
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        assert p.grad.placements == q.grad.placements, (name, p.grad.placements, q.grad.placements)
        assert_close(_full(p.grad), _full(q.grad), f"llama grad {name} vs torch's rank {rank}")
    # each linear gathering its own input: wq, wk, wv and w1, w3 gather 3 + 2 times per block
    from collmm.torch import ColwiseParallel, RowwiseParallel
    from torch.distributed.tensor.parallel import SequenceParallel

    separate = copy.deepcopy(base)
    parallelize_module(separate, mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(), "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())})
    col, row = ColwiseParallel(input_layouts=Shard(1)), RowwiseParallel(output_layouts=Shard(1))
    for block in separate.layers.values():
        parallelize_module(block, mesh, {"attention_norm": SequenceParallel(), "ffn_norm": SequenceParallel(),
                                         "attention.wq": col, "attention.wk": col, "attention.wv": col,
                                         "attention.wo": row, "feed_forward.w1": col, "feed_forward.w3": col,
                                         "feed_forward.w2": row})
    _, separate_total = _collectives(separate, tokens)
    assert separate_total == our_total + 2 * 3 * 2, (separate_total, our_total)  # 3 more each way per block


class _Reader(nn.Module):
    """wq and wk read x; wq reads it twice."""

    def __init__(self, world):
        super().__init__()
        self.wq, self.wk = nn.Linear(16, 2 * world, dtype=torch.float64), nn.Linear(16, 3 * world, dtype=torch.float64)

    def forward(self, x):
        return self.wq(x), self.wk(x), self.wq(x)


def shared_gather_misuse(rank, world):
    """SharedGather names direct nn.Linear children; a child called outside the parent's forward, or
    twice on one input, runs alone (correct, its own gather)."""
    from collmm.torch import ColwiseParallel, SharedGather

    expect_value_error(lambda: SharedGather("attention.wq"), "direct children")
    mesh = init_device_mesh("cpu", (world,))
    model = _model(layers=1)
    expect_value_error(lambda: parallelize_module(model.layers["0"], mesh, {"attention": SharedGather("wz")}),
                       "no nn.Linear child 'wz'")
    torch.manual_seed(0)
    reader = _Reader(world)
    plain = copy.deepcopy(reader)
    parallelize_module(reader, mesh, {"": SharedGather("wq", "wk"), "wq": ColwiseParallel(input_layouts=Shard(1)),
                                      "wk": ColwiseParallel(input_layouts=Shard(1))})
    x = seeded(3, 2, 4 * world, 16, dtype=torch.float64)
    mine = x.chunk(world, dim=1)[rank]
    with CommDebugMode() as mode:
        q, k, q_again = reader(mine)
    assert mode.get_comm_counts()[funcol.all_gather_into_tensor] == 2, mode.get_comm_counts()  # wq+wk, wq again
    want = plain(x)
    for got, ref, name in zip((q, k, q_again), want, ("wq", "wk", "wq again")):
        assert_close(got, ref.chunk(world, dim=-1)[rank], f"shared {name} rank {rank}")
    assert_close(reader.wq(mine), want[0].chunk(world, dim=-1)[rank], "wq outside the parent's forward")


def uneven_dtensor_refused(rank, world):
    """tensor_split rows (2, 2, 1, 1) at P = 4, seq 6 into a Rowwise with a DTensor output: ValueError
    on every rank (a DTensor holds torch.chunk's split only); a DTensor input (torch.chunk's split)
    gives the right full_tensor()."""
    from collmm.torch import ColwiseParallel, RowwiseParallel

    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(8, 2 * world), nn.Linear(2 * world, 8))
    model = parallelize_module(copy.deepcopy(ref), mesh, {
        "0": ColwiseParallel(input_layouts=Shard(0)),
        "1": RowwiseParallel(output_layouts=Shard(0), use_local_output=False)})
    x = seeded(4, 6, 8)
    local = x.tensor_split(world)[rank]
    expect_value_error(lambda: model(local), "a DTensor Shard holds torch.chunk's split",
                       "use_local_output=True")
    y = model(distribute_tensor(x, mesh, [Shard(0)]))
    assert isinstance(y, DTensor) and y.placements == (Shard(0),), y
    assert_close(y.full_tensor(), ref(x), f"full_tensor of a chunk-split output rank {rank}")


def algo_refused_when_built(rank, world):
    """An option only the all-reduce takes ("ring:stages2") is refused by the styles whose op is not
    the all-reduce, when they are built; the all-reduce's Rowwise takes it."""
    from collmm.torch import ColwiseParallel, RowwiseParallel

    expect_value_error(lambda: ColwiseParallel(input_layouts=Shard(0), algo="ring:stages2"), "ColwiseParallel")
    expect_value_error(lambda: RowwiseParallel(output_layouts=Shard(0), algo="ring:stages2"), "RowwiseParallel")
    assert RowwiseParallel(algo="ring:stages2").algo == "ring:stages2"
    assert ColwiseParallel(algo="ring:merge2").algo == "ring:merge2"


def profiler_sees_ops(rank, world):
    """torch's profiler records collmm's fused ops by name, forward and backward."""
    from collmm.torch import ColwiseParallel, RowwiseParallel

    mesh = init_device_mesh("cpu", (world,))
    model = parallelize_module(nn.Sequential(nn.Linear(8, 2 * world), nn.Linear(2 * world, 8)), mesh, {
        "0": ColwiseParallel(input_layouts=Shard(0)), "1": RowwiseParallel(output_layouts=Shard(0))})
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model(seeded(5, 3, 8)).sum().backward()
    names = {e.name for e in prof.events()}
    for op in ("collmm::fused_all_gather_matmul", "collmm::fused_matmul_reduce_scatter"):
        assert op in names, (op, sorted(n for n in names if "collmm" in n))
    dist.barrier()
