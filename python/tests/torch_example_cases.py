"""PyTorch's test/distributed/tensor/parallel/test_tp_examples.py, ported onto collmm's styles (CPU,
gloo; for test_torch_ports.py, no pytest here). Its assertions are kept, the CommDebugMode counts of
forward, backward and the optimizer's step included: collmm's plan for torch's test Transformer
(common_dtensor.Transformer) moves as many collectives as torch's own.

Kept: test_mlp_training (sequence-parallel: collmm's fused pair; not: torch's Colwise and collmm's
GEMM + all-reduce), test_mlp_inference, test_transformer_training (sequence-parallel f32 and f64,
and not), test_transformer_req_grad (its requires_grad patterns), test_weight_tying.
The plan differs from torch's Transformer.parallelize in one place: where torch gathers the
attention's input (PrepareModuleInput), collmm's SharedGather makes wq, wk and wv share one fused
gather, which counts the same (one all_gather forward, one reduce_scatter backward).
On CPU the attention's q, k, v are local tensors in f32 too (torch's test, GPU-only, gives them as
DTensors there: DTensor has no CPU sharding rule for scaled_dot_product_attention).
Left out: test_loss_parallel and its multi-dim variants (torch's loss_parallel, no collmm style in
it), the input_reshard / checkpoint_wrapper variant (torch disables it too), the MoE experts.
"""
from copy import deepcopy

import torch
import torch.distributed as dist
from torch.distributed.tensor import DeviceMesh, DTensor, Replicate, Shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.experimental import implicit_replication
from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module
from torch_models import MLPModule, ModelArgs, Transformer

from collmm.torch import ColwiseParallel, RowwiseParallel, SharedGather
from torch_style_cases import expect_equal

funcol = torch.ops.c10d_functional
reduce_scatter, all_gather, all_reduce = funcol.reduce_scatter_tensor, funcol.all_gather_into_tensor, funcol.all_reduce


def _check_module(m1, m2, check_grad=False):
    named = dict(m1.named_parameters())
    for name, p2 in m2.named_parameters():
        assert name in named, name
        p1 = named[name]
        if check_grad:
            p1, p2 = p1.grad, p2.grad
        if isinstance(p2, DTensor):
            p2 = p2.redistribute(p2.device_mesh, [Replicate()]).to_local()
        expect_equal(p2, p1, f"{name}{' grad' if check_grad else ''}")


def mlp_training(rank, world, is_seq_parallel):
    torch.manual_seed(rank if is_seq_parallel else 0)
    inp = torch.rand(8, 10)
    model = MLPModule("cpu")
    model_tp = deepcopy(model)
    _check_module(model, model_tp)
    mesh = DeviceMesh("cpu", torch.arange(world))
    plan = {"net1": ColwiseParallel(input_layouts=Shard(0)) if is_seq_parallel else ColwiseParallel(),
            "net2": RowwiseParallel(output_layouts=Shard(0)) if is_seq_parallel else RowwiseParallel()}
    model_tp = parallelize_module(model_tp, mesh, plan)
    optim = torch.optim.SGD(model.parameters(), lr=0.25)
    optim_tp = torch.optim.SGD(model_tp.parameters(), lr=0.25)
    output = model(inp)
    output.sum().backward()
    comm_mode = CommDebugMode()
    with comm_mode:
        output_tp = model_tp(inp)
        output_tp.sum().backward()
    expect_equal(output_tp, output, "mlp output")
    if is_seq_parallel:
        expect_equal(comm_mode.get_comm_counts()[all_gather], 2, "mlp all_gather")
        expect_equal(comm_mode.get_comm_counts()[reduce_scatter], 1, "mlp reduce_scatter")
        for p in model.parameters():  # each rank's input differs: the unsharded gradients summed
            dist.all_reduce(p.grad)
    else:
        expect_equal(comm_mode.get_comm_counts()[all_reduce], 1, "mlp all_reduce")
    _check_module(model, model_tp, check_grad=True)
    optim.step()
    optim_tp.step()
    _check_module(model, model_tp)
    inp = torch.rand(8, 10)
    expect_equal(model_tp(inp), model(inp), "mlp output after a step")


def mlp_inference(rank, world):
    torch.manual_seed(0)
    inp = torch.rand(8, 10)
    model = MLPModule("cpu")
    model_tp = parallelize_module(deepcopy(model), DeviceMesh("cpu", torch.arange(world)),
                                  {"net1": ColwiseParallel(), "net2": RowwiseParallel()})
    with torch.inference_mode():
        expect_equal(model_tp(inp), model(inp), "mlp inference")


def parallelize_transformer(module: Transformer, mesh, use_seq_parallel: bool, local_output_for_attn: bool):
    """torch's Transformer.parallelize with collmm's styles (and SharedGather where torch gathers)."""
    if use_seq_parallel:
        root = {"tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
                "pos_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(0)),
                "norm": SequenceParallel()}
    else:
        root = {"tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
                "pos_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())}
    parallelize_module(module, mesh, root)
    seq = Shard(1) if use_seq_parallel else None
    for layer in module.layers:
        plan = {"attention.wq": ColwiseParallel(input_layouts=seq, use_local_output=local_output_for_attn),
                "attention.wk": ColwiseParallel(input_layouts=seq, use_local_output=local_output_for_attn),
                "attention.wv": ColwiseParallel(input_layouts=seq, use_local_output=local_output_for_attn),
                "attention.wo": RowwiseParallel(output_layouts=Shard(1)) if use_seq_parallel else RowwiseParallel(),
                "feed_forward.w1": ColwiseParallel(input_layouts=seq),
                "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)) if use_seq_parallel else RowwiseParallel()}
        if use_seq_parallel:
            plan.update({"attention": SharedGather("wq", "wk", "wv"), "attention_norm": SequenceParallel(),
                         "ffn_norm": SequenceParallel()})
        parallelize_module(layer, mesh, plan)
    parallelize_module(module.output, mesh, ColwiseParallel(input_layouts=seq, output_layouts=Replicate()))
    if local_output_for_attn:
        for layer in module.layers:
            layer.attention.n_heads = module.model_args.n_heads // mesh.size()
    if module.model_args.weight_tying:
        module.output.weight = module.tok_embeddings.weight
    return module


def _tp_transformer(model, world, is_seq_parallel, dtype):
    model_tp = deepcopy(model)
    _check_module(model, model_tp)
    # torch's test gives f32 attention DTensors; DTensor has no CPU rule for scaled_dot_product_attention
    return parallelize_transformer(model_tp, DeviceMesh("cpu", torch.arange(world)), is_seq_parallel,
                                   local_output_for_attn=True)


def _validate(model, model_tp, optim, optim_tp, inp, fwd, bwd, optim_counts, check_fwd=True):
    output = model(inp)
    with CommDebugMode() as mode:
        output_tp = model_tp(inp)
    expect_equal(output_tp, output, "transformer output")
    if check_fwd:
        expect_equal(dict(mode.get_comm_counts()), fwd or {}, "forward collectives")
    output.sum().backward()
    with CommDebugMode() as mode:
        output_tp.sum().backward()
    _check_module(model, model_tp, check_grad=True)
    expect_equal(dict(mode.get_comm_counts()), bwd or {}, "backward collectives")
    optim.step()
    with implicit_replication():
        with CommDebugMode() as mode:
            optim_tp.step()
    _check_module(model, model_tp)
    expect_equal(dict(mode.get_comm_counts()), optim_counts or {}, "optimizer collectives")


def transformer_training(rank, world, is_seq_parallel, dtype):
    torch.manual_seed(0)
    model = Transformer(ModelArgs(dropout_p=0.0)).to(dtype=dtype)
    model_tp = _tp_transformer(model, world, is_seq_parallel, dtype)
    optim, optim_tp = torch.optim.Adam(model.parameters(), lr=0.25), torch.optim.Adam(model_tp.parameters(), lr=0.25)
    torch.manual_seed(0)
    inp = torch.randint(ModelArgs.vocab_size, (8, 8))
    if is_seq_parallel:
        _validate(model, model_tp, optim, optim_tp, inp, {reduce_scatter: 6, all_gather: 6},
                  {reduce_scatter: 5, all_gather: 6}, {all_reduce: 30})
    else:
        _validate(model, model_tp, optim, optim_tp, inp, {all_reduce: 6, all_gather: 1}, {all_reduce: 9}, None)


REQ_GRAD_CASES = [  # (params that train, sequence-parallel, dtype, backward counts, optimizer counts)
    (None, False, torch.float64, {all_reduce: 9}, None),
    (("output.weight", "norm.weight", "norm.bias"), True, torch.float32, {reduce_scatter: 1}, {all_reduce: 6}),
    (("tok_embeddings.weight", "output.weight"), True, torch.float32, {reduce_scatter: 5, all_gather: 5}, None),
    (("tok_embeddings.weight", "layers.0.attention.wv.weight", "layers.0.feed_forward.w1.bias",
      "layers.1.ffn_norm.bias", "layers.1.feed_forward.w2.weight", "output.weight"), True, torch.float32,
     {reduce_scatter: 5, all_gather: 5}, {all_reduce: 3}),
]


def transformer_req_grad(rank, world):
    for thaw, is_seq_parallel, dtype, bwd, optim_counts in REQ_GRAD_CASES:
        torch.manual_seed(0)
        model = Transformer(ModelArgs(dropout_p=0.0, weight_tying=False)).to(dtype=dtype)
        model_tp = _tp_transformer(model, world, is_seq_parallel, dtype)
        optim, optim_tp = torch.optim.Adam(model.parameters(), lr=0.25), \
            torch.optim.Adam(model_tp.parameters(), lr=0.25)
        if thaw:
            for m in (model, model_tp):
                for n, p in m.named_parameters():
                    if n not in thaw:
                        p.requires_grad_(False)
        torch.manual_seed(0)
        inp = torch.randint(ModelArgs.vocab_size, (8, 8))
        _validate(model, model_tp, optim, optim_tp, inp, None, bwd, optim_counts, check_fwd=False)


def weight_tying(rank, world):
    class TestModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(1)
            self.embedding = torch.nn.Embedding(16, 8)
            torch.manual_seed(2)
            self.fc = torch.nn.Linear(8, 16)

        def forward(self, x):
            return self.fc(self.embedding(x))

    model = TestModule()
    parallelize_module(model, DeviceMesh("cpu", list(range(world))),
                       {"embedding": ColwiseParallel(), "fc": RowwiseParallel()})
    torch.manual_seed(0)
    inp = torch.randint(16, [5])
    assert not torch.equal(model.embedding.weight.to_local(), model.fc.weight.to_local())
    model(inp).sum().backward()
    assert not torch.equal(model.embedding.weight.grad.to_local(), model.fc.weight.grad.to_local())
    model.zero_grad()
    model.fc.weight = model.embedding.weight
    assert model.fc.weight is model.embedding.weight
    model(inp).sum().backward()
    assert model.embedding.weight.grad is model.fc.weight.grad
