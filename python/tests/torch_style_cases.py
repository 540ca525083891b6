"""PyTorch's own tests of the tensor-parallel styles and of parallelize_module, ported onto collmm's
styles (collmm.torch.ColwiseParallel / RowwiseParallel), CPU, gloo; for test_torch_ports.py, no
pytest here. Their assertions are kept, the communication counts of torch's CommDebugMode included
(collmm's fused ops count as the collective each performs: collmm/comm_debug.py).

From test/distributed/tensor/parallel/test_tp_style.py: the Colwise and Rowwise styles (default
layouts: torch's style runs; sequence-sharded: collmm's fused ops), on nn.Linear and nn.Embedding,
requires_grad kept, PrepareModuleInput with collmm's Colwise inside (several inputs, kwargs).
Left out: test_sequence_parallel_style and test_prepare_module_output (torch's SequenceParallel and
PrepareModuleOutput alone: no collmm style in them, nothing of collmm's to test), the LocalTensor
variants (torch's single-process LocalTensor mode, which does not run custom ops' kernels per rank).
From test_parallelize_api.py: every case (MLP with the module API, nested, row- and col-wise
linears, the fnmatch plans *, ?, [1-2], layers.*.net[1], the root module with
PrepareModuleInputOutput and collmm's sequence-parallel pair, a plan entry that matches nothing,
the DeviceMesh context, an empty plan, src_data_rank), with collmm's styles where torch's are.
Left out: test_prepare_module_input / _output / _input_output alone (torch's styles only).
"""
from collections import OrderedDict
from copy import deepcopy
import warnings

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import PrepareModuleInput, PrepareModuleInputOutput, parallelize_module
from torch_models import MLPModule, MLPStacked

from collmm.torch import ColwiseParallel, RowwiseParallel

funcol = torch.ops.c10d_functional


def expect_equal(got, want, what: str) -> None:
    if isinstance(got, torch.Tensor) or isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want, msg=lambda m: f"{what}: {m}")
    else:
        assert got == want, f"{what}: {got!r}, want {want!r}"


def expect_raises(exc, fragment: str, fn) -> None:
    try:
        fn()
    except exc as e:
        assert fragment in str(e), f"{str(e)!r} lacks {fragment!r}"
        return
    raise AssertionError(f"no {exc.__name__} ({fragment!r})")


# ---- test_tp_style.py ----------------------------------------------------------------------------

def colwise_parallel_style(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    comm_mode = CommDebugMode()
    tensor = torch.rand(8, 16, requires_grad=True)
    model = nn.Linear(16, 16)
    colwise_mod = parallelize_module(deepcopy(model), mesh, ColwiseParallel())
    with comm_mode:
        out = colwise_mod(tensor)
        expect_equal(out.shape, (8, 16 // world), "colwise out shape")
        expect_equal(comm_mode.get_total_counts(), 0, "colwise forward collectives")
        out.sum().backward()
        expect_equal(comm_mode.get_comm_counts()[funcol.all_reduce], 1, "colwise backward all_reduce")
        expect_equal(comm_mode.get_total_counts(), 1, "colwise collectives")
    # sequence-sharded input: collmm's all-gather + GEMM forward, its reduce-scatter backward
    tensor.grad = None
    sharded_mod = parallelize_module(deepcopy(model), mesh, ColwiseParallel(input_layouts=Shard(0)))
    with comm_mode:
        out = sharded_mod(tensor)
        expect_equal(out.shape, (8 * world, 16 // world), "sharded colwise out shape")
        expect_equal(comm_mode.get_comm_counts()[funcol.all_gather_into_tensor], 1, "colwise Shard(0) all_gather")
        expect_equal(comm_mode.get_total_counts(), 1, "colwise Shard(0) forward collectives")
        out.sum().backward()
        expect_equal(comm_mode.get_comm_counts()[funcol.reduce_scatter_tensor], 1, "colwise Shard(0) reduce_scatter")
        expect_equal(comm_mode.get_total_counts(), 2, "colwise Shard(0) collectives")
    # (collmm's addition) the values of torch's own style
    from torch.distributed.tensor.parallel import ColwiseParallel as TorchColwise

    theirs = parallelize_module(deepcopy(model), mesh, TorchColwise(input_layouts=Shard(0)))
    x = tensor.detach().clone().requires_grad_()
    want = theirs(x)
    want.sum().backward()
    expect_equal(out, want, "colwise Shard(0) vs torch's")
    expect_equal(tensor.grad, x.grad, "colwise Shard(0) input grad vs torch's")
    expect_equal(sharded_mod.weight.grad.full_tensor(), theirs.weight.grad.full_tensor(), "colwise weight grad")


def colwise_parallel_embedding(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    comm_mode = CommDebugMode()
    tensor = torch.arange(8).reshape(4, 2)
    colwise_mod = parallelize_module(nn.Embedding(16, 16), mesh, ColwiseParallel())
    with comm_mode:
        out = colwise_mod(tensor)
        expect_equal(out.shape, (4, 2, 16 // world), "embedding colwise out shape")
        expect_equal(comm_mode.get_total_counts(), 0, "embedding colwise forward collectives")
        out.sum().backward()
        expect_equal(comm_mode.get_total_counts(), 0, "embedding colwise collectives")


def preserves_requires_grad(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    for style in (ColwiseParallel(), ColwiseParallel(input_layouts=Shard(0)), RowwiseParallel(),
                  RowwiseParallel(output_layouts=Shard(0))):
        model = nn.Linear(16, 16)
        model.weight.requires_grad = False
        model.bias.requires_grad = True
        mod = parallelize_module(deepcopy(model), mesh, style)
        assert not mod.weight.requires_grad, style
        assert mod.bias.requires_grad, style


def rowwise_parallel_style(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    comm_mode = CommDebugMode()
    tensor = torch.rand(8, 16 // world, requires_grad=True)
    model = nn.Linear(16, 16)
    rowwise_mod = parallelize_module(deepcopy(model), mesh, RowwiseParallel())
    with comm_mode:
        out = rowwise_mod(tensor)
        expect_equal(out.shape, (8, 16), "rowwise out shape")
        expect_equal(comm_mode.get_comm_counts()[funcol.all_reduce], 1, "rowwise all_reduce")
        expect_equal(comm_mode.get_total_counts(), 1, "rowwise forward collectives")
        out.sum().backward()
        expect_equal(comm_mode.get_total_counts(), 1, "rowwise collectives")
    tensor.grad = None
    sharded_mod = parallelize_module(deepcopy(model), mesh, RowwiseParallel(output_layouts=Shard(0)))
    with comm_mode:
        out = sharded_mod(tensor)
        expect_equal(out.shape, (8 // world, 16), "rowwise Shard(0) out shape")
        expect_equal(comm_mode.get_comm_counts()[funcol.reduce_scatter_tensor], 1, "rowwise reduce_scatter")
        expect_equal(comm_mode.get_total_counts(), 1, "rowwise Shard(0) forward collectives")
        out.sum().backward()
        expect_equal(comm_mode.get_comm_counts()[funcol.all_gather_into_tensor], 1, "rowwise backward all_gather")
        expect_equal(comm_mode.get_total_counts(), 2, "rowwise Shard(0) collectives")
    # (collmm's addition) torch's values and placements: the bias gradient Replicate(), as torch's
    from torch.distributed.tensor.parallel import RowwiseParallel as TorchRowwise

    theirs = parallelize_module(deepcopy(model), mesh, TorchRowwise(output_layouts=Shard(0)))
    x = tensor.detach().clone().requires_grad_()
    want = theirs(x)
    want.sum().backward()
    expect_equal(out, want, "rowwise Shard(0) vs torch's")
    expect_equal(tensor.grad, x.grad, "rowwise Shard(0) input grad vs torch's")
    for name in ("weight", "bias"):
        ours, ref = getattr(sharded_mod, name).grad, getattr(theirs, name).grad
        expect_equal(ours.placements, ref.placements, f"rowwise {name}.grad placements")
        expect_equal(ours.to_local(), ref.to_local(), f"rowwise {name}.grad local")


def rowwise_parallel_embedding(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    comm_mode = CommDebugMode()
    tensor = torch.arange(8).reshape(4, 2)
    model = nn.Embedding(16, 16)
    rowwise_mod = parallelize_module(deepcopy(model), mesh, RowwiseParallel(input_layouts=Replicate()))
    with comm_mode:
        out = rowwise_mod(tensor)
        expect_equal(out.shape, (4, 2, 16), "embedding rowwise out shape")
        expect_equal(comm_mode.get_total_counts(), 1, "embedding rowwise forward collectives")
        expect_equal(comm_mode.get_comm_counts()[funcol.all_reduce], 1, "embedding rowwise all_reduce")
        out.sum().backward()
        expect_equal(comm_mode.get_total_counts(), 1, "embedding rowwise collectives")
    sharded = parallelize_module(deepcopy(model), mesh, RowwiseParallel(input_layouts=Replicate(),
                                                                        output_layouts=Shard(1)))
    with comm_mode:
        out = sharded(torch.arange(8))
        expect_equal(out.shape, (8, 16 // world), "embedding rowwise Shard(1) out shape")
        expect_equal(comm_mode.get_total_counts(), 1, "embedding rowwise Shard(1) forward collectives")
        expect_equal(comm_mode.get_comm_counts()[funcol.reduce_scatter_tensor], 1, "embedding reduce_scatter")
        out.sum().backward()
        expect_equal(comm_mode.get_total_counts(), 2, "embedding rowwise Shard(1) collectives")
        expect_equal(comm_mode.get_comm_counts()[funcol.all_gather_into_tensor], 1, "embedding all_gather")


class _TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x, y):
        return self.linear(x) + y


def prepare_module_input_multiple_inputs(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    expect_raises(AssertionError, "input_layouts and desired_input_layouts should have same length!",
                  lambda: PrepareModuleInput(input_layouts=Shard(0), desired_input_layouts=(Replicate(), None)))
    mod = _TwoInputs()
    parallelize_module(mod.linear, mesh, ColwiseParallel())
    parallelize_module(mod, mesh, PrepareModuleInput(input_layouts=Shard(0), desired_input_layouts=Replicate()))
    expect_raises(ValueError, "module inputs and input_layouts should have same length!",
                  lambda: mod(torch.randn(2, 8), torch.ones(world * 2, 8 // world)))
    mod = _TwoInputs()
    parallelize_module(mod.linear, mesh, ColwiseParallel())
    parallelize_module(mod, mesh, PrepareModuleInput(input_layouts=(Shard(0), None),
                                                     desired_input_layouts=(Replicate(), None)))
    output = mod(torch.randn(2, 8), torch.ones(world * 2, 8 // world))
    expect_equal(output.shape, (world * 2, 8 // world), "two inputs out shape")


class _Kwargs(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x, *, y, z=2):
        return self.linear(x) + y + z


class _KwargsOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, *, x, y=2, z=None):
        return self.linear(x) + y + z


def prepare_module_kwargs_input(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    mod = _Kwargs()
    parallelize_module(mod.linear, mesh, ColwiseParallel(use_local_output=False))
    parallelize_module(mod, mesh, PrepareModuleInput(input_kwarg_layouts={"y": Shard(0)},
                                                     desired_input_kwarg_layouts={"y": Replicate()}))
    comm_mode = CommDebugMode()
    with comm_mode:
        output = mod(torch.randn(1 * world, 8), y=torch.ones(1, 8))
    expect_equal(comm_mode.get_total_counts(), 1, "kwargs collectives")
    expect_equal(output.shape, (1 * world, 8), "kwargs out shape")
    mod = _KwargsOnly()
    parallelize_module(mod.linear, mesh, ColwiseParallel(use_local_output=False))
    parallelize_module(mod, mesh, PrepareModuleInput(input_kwarg_layouts={"x": Shard(0), "z": Shard(0)},
                                                     desired_input_kwarg_layouts={"x": Replicate(), "z": Replicate()}))
    with comm_mode:
        output = mod(x=torch.randn(1, 8), z=torch.ones(1, 8))
    expect_equal(comm_mode.get_total_counts(), 2, "kwargs-only collectives")
    expect_equal(output.shape, (1 * world, 8), "kwargs-only out shape")
    x_dt = DTensor.from_local(torch.randn(1, 8), mesh, [Shard(0)])
    with comm_mode:
        output = mod(x=x_dt, z=torch.ones(1, 8))
    expect_equal(comm_mode.get_total_counts(), 2, "kwargs-only DTensor collectives")
    expect_equal(output.shape, (1 * world, 8), "kwargs-only DTensor out shape")


# ---- test_parallelize_api.py ---------------------------------------------------------------------

def _compare_params(rank, local_module, dist_module, rank0_only, skip_rowwise_bias=False, compare_grad=False):
    for name, param in local_module.named_parameters():
        dist_param = dist_module.get_parameter(name)
        param = param.grad if compare_grad else param
        dist_param = dist_param.grad if compare_grad else dist_param
        if (not rank0_only) or rank == 0 or (name not in ["net2.bias"] and not skip_rowwise_bias
                                             or name not in ["bias", "net2.bias"]):
            expect_equal(param, dist_param.redistribute(dist_param.device_mesh, [Replicate()]).to_local(),
                         f"{name} not equal between dist and non-dist")


def _compare_module(rank, world, local_module, dist_module, inp_size, rank0_only=True, rowwise=False):
    local_optim = torch.optim.SGD(local_module.parameters(), lr=0.25)
    dist_optim = torch.optim.SGD(dist_module.parameters(), lr=0.25)
    torch.manual_seed(0)
    inp = torch.rand(*inp_size)
    _compare_params(rank, local_module, dist_module, rank0_only)
    local_output = local_module(inp)
    inp = inp.chunk(world, dim=-1)[rank] if rowwise else inp
    dist_output = dist_module(inp)
    if isinstance(dist_output, DTensor):
        dist_output = dist_output.redistribute(dist_output.device_mesh, [Replicate()]).to_local()
    expect_equal(dist_output, local_output, "forward")
    local_output.sum().backward()
    dist_output.sum().backward()
    _compare_params(rank, local_module, dist_module, rank0_only, rowwise, True)
    local_optim.step()
    dist_optim.step()
    _compare_params(rank, local_module, dist_module, rank0_only, rowwise)


def parallelize_api(rank, world):
    mesh = DeviceMesh("cpu", torch.arange(world))
    col_rep = ColwiseParallel(output_layouts=Replicate())
    # test_parallelize_mlp_with_module_api, _nested, _with_star, _with_question, _with_digit
    model = MLPModule("cpu")
    _compare_module(rank, world, model, parallelize_module(deepcopy(model), mesh, {"net1": col_rep, "net2": col_rep}),
                    [12, 10], rank0_only=False)
    nested = nn.Sequential(OrderedDict([("dummy_encoder", MLPModule("cpu"))]))
    _compare_module(rank, world, nested, parallelize_module(deepcopy(nested), mesh, {
        "dummy_encoder.net1": col_rep, "dummy_encoder.net2": col_rep}), [12, 10], rank0_only=False)
    for pattern in ("net*", "net?", "net[1-2]"):
        model = MLPModule("cpu")
        _compare_module(rank, world, model, parallelize_module(deepcopy(model), mesh, {pattern: col_rep}),
                        [12, 10], rank0_only=False)
    # test_linear_row_wise_parallel (collmm's GEMM + all-reduce), test_linear_col_wise_parallel
    torch.manual_seed(5)
    model = nn.Linear(16, 10)
    tp = parallelize_module(deepcopy(model), mesh, RowwiseParallel())
    torch.manual_seed(rank)
    _compare_module(rank, world, model, tp, [9, 16], rowwise=True)
    torch.manual_seed(5)
    model = nn.Linear(10, 16)
    _compare_module(rank, world, model, parallelize_module(deepcopy(model), mesh, col_rep), [8, 10])
    # test_parallelize_module_multi_wildcard
    model = MLPStacked("cpu", n_layers=2)
    _compare_module(rank, world, model, parallelize_module(deepcopy(model), mesh, {
        "layers.*.net[1]": ColwiseParallel(), "layers.*.net[2]": RowwiseParallel()}), [12, 10], rank0_only=False)
    # test_parallelize_module_with_root_module: collmm's sequence-parallel pair inside
    model = MLPModule("cpu")
    _compare_module(rank, world, model, parallelize_module(deepcopy(model), mesh, {
        "": PrepareModuleInputOutput(input_layouts=Replicate(), desired_input_layouts=Shard(0),
                                     output_layouts=Shard(0), desired_output_layouts=Replicate()),
        "net1": ColwiseParallel(input_layouts=Shard(0)),
        "net2": RowwiseParallel(output_layouts=Shard(0))}), [16, 10], rank0_only=False)
    # test_parallelize_module_with_no_match
    model = MLPModule("cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tp = parallelize_module(deepcopy(model), mesh, {"net0.hello.world": ColwiseParallel(),
                                                        "net1": ColwiseParallel(), "net2": RowwiseParallel(),
                                                        "net3": ColwiseParallel()})
    assert any(issubclass(w.category, UserWarning) for w in caught), [str(w.message) for w in caught]
    _compare_module(rank, world, model, tp, [16, 10], rank0_only=False)
    # test_under_devicemesh_context
    torch.manual_seed(5)
    model = nn.Linear(10, 16)
    with mesh:
        tp = parallelize_module(deepcopy(model), parallelize_plan=ColwiseParallel(output_layouts=Replicate()))
    _compare_module(rank, world, model, tp, [8, 10])
    # test_empty_plan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallelize_module(nn.Linear(10, 16), mesh)
    assert any(issubclass(w.category, UserWarning) for w in caught), "no warning for an empty plan"


def parallelize_module_src_data_rank(rank, world):
    torch.manual_seed(rank)  # a different model on each rank
    model = MLPModule("cpu")
    mesh = DeviceMesh("cpu", torch.arange(world))
    comm_mode = CommDebugMode()
    with comm_mode:
        tp = parallelize_module(deepcopy(model), mesh, {"net*": ColwiseParallel(output_layouts=Replicate())},
                                src_data_rank=1)
    assert comm_mode.get_total_counts() > 0
    full = [p.full_tensor() for p in tp.parameters()]
    if rank == 1:
        for got, want in zip(full, model.parameters()):
            expect_equal(got, want, "src_data_rank 1")
    with comm_mode:
        parallelize_module(deepcopy(model), mesh, {"net1": ColwiseParallel(input_layouts=Shard(0)),
                                                   "net2": RowwiseParallel(output_layouts=Shard(0))},
                           src_data_rank=None)
        expect_equal(comm_mode.get_total_counts(), 0, "src_data_rank None collectives")
