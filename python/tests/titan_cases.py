"""Cases of test_torchtitan.py, run on every rank of a gloo group (dist_util.run_world): collmm's
torchtitan Functions and modules against unsharded references, the ports of torchtitan 0.3.0's
tests/unit_tests test_distributed_linear.py and test_dist_gemm.py (whose numerics classes need two
GPUs there; collmm's CPU kernels run them here), with uneven splits, biases and separate QKV."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from dist_util import assert_close, block, chunk, seeded


def _tp_mesh(world):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))


def _leaf(t):
    return t.detach().clone().requires_grad_()


def linear_cases(rank, world):
    """The Functions of collmm.torchtitan.linear: outputs and every gradient equal F.linear's on the
    unsharded tensors (test_distributed_linear.py's assertions), with sequences and features that
    the group does not divide."""
    from collmm.torchtitan.linear import AllGatherLinear, AllGatherLinearMulti, LinearAllReduce, LinearReduceScatter

    group = dist.group.WORLD
    name = group.group_name
    M, N, K = 4 * world + 3, 6 * world + 1, 5 * world + 2  # no dim divides by world > 1
    rows, cols_n, cols_k = block(M, world, rank), chunk(N, world, rank), block(K, world, rank)

    # AllGatherLinear, with and without a bias: y = AG(x) @ w.T + b
    for with_bias in (False, True):
        x, w, dy = seeded(1, M, K), seeded(2, N, K), seeded(3, M, N)
        b = seeded(4, N) if with_bias else None
        xr, wr = _leaf(x), _leaf(w)
        br = _leaf(b) if with_bias else None
        F.linear(xr, wr, br).backward(dy)
        xs, ws = _leaf(x[rows]), _leaf(w[cols_n])
        bs = _leaf(b[cols_n]) if with_bias else None
        y = AllGatherLinear.apply(xs, ws, bs, group, name)
        y.backward(dy[:, cols_n])
        assert_close(y, F.linear(x, w, b)[:, cols_n], "AllGatherLinear y")
        assert_close(xs.grad, xr.grad[rows], "AllGatherLinear dx")
        assert_close(ws.grad, wr.grad[cols_n], "AllGatherLinear dw")
        if with_bias:
            assert_close(bs.grad, br.grad[cols_n], "AllGatherLinear db")

    # AllGatherLinearMulti: torchtitan's two weights (SwiGLU), then three with biases (q/k/v)
    for n_weights, with_bias in ((2, False), (3, True)):
        x = seeded(10, M, K)
        ws = [seeded(11 + i, N + i, K) for i in range(n_weights)]
        bs = [seeded(21 + i, N + i) if with_bias else None for i in range(n_weights)]
        dys = [seeded(31 + i, M, N + i) for i in range(n_weights)]
        xr = _leaf(x)
        wr = [_leaf(w) for w in ws]
        br = [_leaf(b) if with_bias else None for b in bs]
        torch.autograd.backward([F.linear(xr, w, b) for w, b in zip(wr, br)], dys)
        cols = [chunk(N + i, world, rank) for i in range(n_weights)]
        xs = _leaf(x[rows])
        wl = [_leaf(w[c]) for w, c in zip(ws, cols)]
        bl = [_leaf(b[c]) if with_bias else None for b, c in zip(bs, cols)]
        args = [xs, wl[0], wl[1], group, name]
        if n_weights == 3:
            args += [bl[0], bl[1], wl[2], bl[2]]
        ys = AllGatherLinearMulti.apply(*args)
        assert len(ys) == n_weights
        torch.autograd.backward(ys, [dy[:, c] for dy, c in zip(dys, cols)])
        for i in range(n_weights):
            assert_close(ys[i], F.linear(x, ws[i], bs[i])[:, cols[i]], f"Multi({n_weights}) y{i}")
            assert_close(wl[i].grad, wr[i].grad[cols[i]], f"Multi({n_weights}) dw{i}")
            if with_bias:
                assert_close(bl[i].grad, br[i].grad[cols[i]], f"Multi({n_weights}) db{i}")
        assert_close(xs.grad, xr.grad[rows], f"Multi({n_weights}) dx (sums every output's)")

    # LinearReduceScatter: y = block r of sum_q x_q @ w_q.T, + b once (not once per rank)
    x, w, b, dy = seeded(40, M, K), seeded(41, N, K), seeded(42, N), seeded(43, M, N)
    xr, wr, br = _leaf(x), _leaf(w), _leaf(b)
    F.linear(xr, wr, br).backward(dy)
    xs, ws, bs = _leaf(x[:, cols_k]), _leaf(w[:, cols_k]), _leaf(b)
    y = LinearReduceScatter.apply(xs, ws, bs, group, name)  # default split: collmm's block_size
    y.backward(dy[rows])
    want = F.linear(x, w, b)[rows]
    assert_close(y, want, "LinearReduceScatter y")
    if world > 1:
        twice = F.linear(x, w, b * world)[rows]
        assert (twice - want).abs().max().item() > 100 * 1e-4, "the bias check cannot fail"
    assert_close(xs.grad, xr.grad[:, cols_k], "LinearReduceScatter dx")
    assert_close(ws.grad, wr.grad[:, cols_k], "LinearReduceScatter dw")
    assert_close(bs.grad, br.grad, "LinearReduceScatter db (summed over the ranks' rows)")

    # scatter_size: any split of the rows, here every row on the last rank
    mine = M if rank == world - 1 else 0
    y = LinearReduceScatter.apply(x[:, cols_k].contiguous(), w[:, cols_k].contiguous(), None, group, name, mine)
    first = 0 if rank == world - 1 else M
    assert_close(y, F.linear(x, w)[first:first + mine], "LinearReduceScatter scatter_size")

    # LinearAllReduce (no SP): [B, S, K_r] -> [B, S, N] whole on every rank
    x, w, b, dy = seeded(50, 2, M, K), seeded(51, N, K), seeded(52, N), seeded(53, 2, M, N)
    xr, wr, br = _leaf(x), _leaf(w), _leaf(b)
    F.linear(xr, wr, br).backward(dy)
    xs, ws, bs = _leaf(x[..., cols_k]), _leaf(w[:, cols_k]), _leaf(b)
    y = LinearAllReduce.apply(xs, ws, bs, group, name)
    y.backward(dy)
    assert_close(y, F.linear(x, w, b), "LinearAllReduce y")
    assert_close(xs.grad, xr.grad[..., cols_k], "LinearAllReduce dx")
    assert_close(ws.grad, wr.grad[:, cols_k], "LinearAllReduce dw")
    assert_close(bs.grad, br.grad, "LinearAllReduce db")


def in_flight_case(rank, world):
    """Several collective matmuls in flight: two gathers issued before either result is read, then
    both backwards in one call. torchtitan's Functions carve every call from offset 0 of one
    workspace per group and may not overlap; collmm's calls own their buffers."""
    from collmm.torchtitan.linear import AllGatherLinear, LinearReduceScatter

    group = dist.group.WORLD
    M, N, K = 3 * world + 1, 4 * world, 2 * world + 1
    rows, cols = block(M, world, rank), chunk(N, world, rank)
    xs = [seeded(60 + i, M, K) for i in range(3)]
    w = seeded(70, N, K)
    mine = [_leaf(x[rows]) for x in xs]
    wl = _leaf(w[cols])
    ys = [AllGatherLinear.apply(x, wl, None, group, group.group_name) for x in mine]
    zs = [LinearReduceScatter.apply(y, seeded(80, K, N)[:, cols].contiguous(), None, group, group.group_name)
          for y in ys]
    for i, (x, y) in enumerate(zip(xs, ys)):
        assert_close(y, F.linear(x, w)[:, cols], f"call {i} of 3 in flight")
    torch.autograd.backward(zs, [torch.ones_like(z) for z in zs])
    for i, x in enumerate(xs):
        xr, wr = _leaf(x), _leaf(w)
        F.linear(F.linear(xr, wr), seeded(80, K, N)).sum().backward()
        assert_close(mine[i].grad, xr.grad[rows], f"call {i}: dx")


def _copy_params(dst, src, shard):
    """dst's parameters set to shard(name, src's full parameter)."""
    with torch.no_grad():
        full = dict(src.named_parameters())
        for name, p in list(dst.named_parameters()):
            owner = dst.get_submodule(name.rpartition(".")[0]) if "." in name else dst
            setattr(owner, name.rpartition(".")[2], torch.nn.Parameter(shard(name, full[name]).contiguous()))


def _grads_match(ours, stock, shard, what):
    full = dict(stock.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, shard(name, full[name].grad), f"{what}: grad of {name}")


def module_cases(rank, world):
    """collmm's modules against torchtitan's stock ones on the whole batch, [B, S, D] activations,
    S not divided by the group (test_dist_gemm.py's TestFusedFeedForwardNumerics, extended to QKV,
    wo and biases)."""
    from torchtitan.distributed.spmd_types import set_current_spmd_mesh
    from torchtitan.distributed.utils import set_spmd_backend
    from torchtitan.models.common.attention import FusedQKVLinear, QKVLinear
    from torchtitan.models.common.config_utils import make_ffn_config
    from torchtitan.models.common.linear import Linear

    from collmm.torchtitan.modules import FeedForward, FusedQKV, RowParallelLinear, SeparateQKV, retype

    set_spmd_backend("spmd_types")
    mesh = _tp_mesh(world)
    B, S, D, hidden = 2, 3 * world + 1, 16, 12 * world
    seq = block(S, world, rank)
    init = {"weight": torch.nn.init.normal_, "bias": torch.nn.init.normal_}

    def col(name, t):  # colwise parameters: output features chunked
        return t[chunk(t.shape[0], world, rank)]

    # FeedForward with biases on w1 and w3 (torchtitan's refuses them)
    cfg = make_ffn_config(dim=D, hidden_dim=hidden, w1_param_init=init, w2w3_param_init=init)
    cfg.w1.bias = cfg.w3.bias = True
    torch.manual_seed(0)
    stock = cfg.build()
    ours = retype(cfg, FeedForward.Config).build()
    x = seeded(90, B, S, D)

    def ffn_shard(name, t):
        return t[:, chunk(t.shape[1], world, rank)] if name == "w2.weight" else t if name == "w2.bias" else col(name, t)

    _copy_params(ours, stock, ffn_shard)
    xr, xs = _leaf(x), _leaf(x[:, seq])
    stock(xr).pow(2).sum().backward()
    with set_current_spmd_mesh(mesh):
        y = ours(xs)
    y.pow(2).sum().backward()
    assert_close(y, stock(x)[:, seq], "FeedForward y")
    assert_close(xs.grad, xr.grad[:, seq], "FeedForward dx")
    # each rank's loss covers its own rows; the group's losses add up to the stock one
    _grads_match(ours, stock, ffn_shard, "FeedForward")

    # QKV: fused wqkv and separate wq/wk/wv, with biases; heads split by kv group
    n_heads, n_kv, hd = 2 * world, world, 4
    for fused in (True, False):
        if fused:
            stock_cfg = FusedQKVLinear.Config(head_dim=hd, n_heads=n_heads, n_kv_heads=n_kv, wqkv=Linear.Config(
                in_features=D, out_features=(n_heads + 2 * n_kv) * hd, bias=True))
            ours_cls = FusedQKV.Config
        else:
            stock_cfg = QKVLinear.Config(head_dim=hd,
                                         wq=Linear.Config(in_features=D, out_features=n_heads * hd, bias=True),
                                         wkv=Linear.Config(in_features=D, out_features=n_kv * hd, bias=True))
            ours_cls = SeparateQKV.Config
        torch.manual_seed(1)
        stock = stock_cfg.build()
        ours = retype(stock_cfg, ours_cls).build()
        _copy_params(ours, stock, col)
        xr, xs = _leaf(x), _leaf(x[:, seq])
        ref = stock(xr)
        heads = [chunk(t.shape[2], world, rank) for t in ref]
        with set_current_spmd_mesh(mesh):
            got = ours(xs)
        what = "fused QKV" if fused else "separate QKV"
        for i, (g, r, h) in enumerate(zip(got, ref, heads)):
            assert_close(g, r[:, :, h].detach(), f"{what} output {'qkv'[i]}")
        torch.autograd.backward(ref, [seeded(100 + i, *r.shape) for i, r in enumerate(ref)])
        torch.autograd.backward(got, [seeded(100 + i, *r.shape)[:, :, h] for i, (r, h) in enumerate(zip(ref, heads))])
        assert_close(xs.grad, xr.grad[:, seq], f"{what} dx")
        _grads_match(ours, stock, col, what)

    # RowParallelLinear (wo): [B, S, K_r] -> this rank's [B, S_r, N]
    K = 4 * world + 1
    stock_cfg = Linear.Config(in_features=K, out_features=D, bias=True)
    torch.manual_seed(2)
    stock = stock_cfg.build()
    ours = retype(stock_cfg, RowParallelLinear.Config).build()
    cols = block(K, world, rank)
    _copy_params(ours, stock, lambda n, t: t[:, cols] if n == "weight" else t)
    h = seeded(110, B, S, K)
    hr, hs = _leaf(h), _leaf(h[..., cols])
    stock(hr).pow(2).sum().backward()
    with set_current_spmd_mesh(mesh):
        y = ours(hs)
    y.pow(2).sum().backward()  # this rank's rows: the group's losses add up to the stock one
    assert_close(y, stock(h)[:, seq], "RowParallelLinear y")
    assert_close(hs.grad, hr.grad[..., cols], "RowParallelLinear dx")
    assert_close(ours.weight.grad, stock.weight.grad[:, cols], "RowParallelLinear dw")
    assert_close(ours.bias.grad, stock.bias.grad, "RowParallelLinear db (summed over the ranks' rows)")

    # without a TP mesh: the stock forward
    assert_close(ours(h[..., cols]), F.linear(h[..., cols], ours.weight, ours.bias), "no mesh: stock forward")


def sharding_case(rank, world):
    """torchtitan's parallelize on a gloo TP mesh keeps collmm's contracts (test_dist_gemm.py's
    TestDistGemmAttentionSharding): no attention-boundary all-gather, wo declares its weight only."""
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.distributed.utils import set_spmd_backend
    from torchtitan.models.common.decoder_sharding import set_gqa_attention_sharding
    from unittest.mock import patch

    from collmm.torchtitan.config_registry import llama3_debugmodel_collmm
    from collmm.torchtitan.modules import RowParallelLinear

    parallel_dims = ParallelDims(dp_replicate=1, dp_shard=1, cp=1, tp=world, pp=1, ep=1, world_size=world)
    with patch("torchtitan.distributed.parallel_dims.device_type", "cpu"):
        parallel_dims.build_mesh()
    set_spmd_backend("spmd_types")
    attn_cfg = llama3_debugmodel_collmm().model_spec.model.layers[0].attention
    set_gqa_attention_sharding(attn_cfg, enable_sp=True)
    attn = attn_cfg.build()
    attn.parallelize(parallel_dims)
    assert isinstance(attn.wo, RowParallelLinear)
    assert attn._sharding_config is None
    assert attn.wo._sharding_config.out_src_shardings is None
    assert attn.wo._sharding_config.out_dst_shardings is None
    assert "weight" in attn.wo._sharding_config.state_shardings
    # the parameters hold this rank's shard: wqkv's rows, wo's columns
    assert attn.qkv_linear.wqkv.weight.shape[0] == attn_cfg.qkv_linear.wqkv.out_features // world
    assert attn.wo.weight.shape[1] == attn_cfg.wo.in_features // world


def trace_label_case(rank, world):
    """collmm.trace labels the calls of these Functions' backward "<module> backward", as the ops' own
    autograd does (their backward calls the ops directly), and so for fused_linear's row-wise linear
    with a bias."""
    import tempfile

    import collmm
    from collmm.fused_linear import rowwise_linear
    from collmm.torchtitan.linear import AllGatherLinear, LinearReduceScatter

    group = dist.group.WORLD
    M, N, K = 4 * world + 1, 3 * world, 2 * world + 1

    class Col(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(seeded(90, N, K)[chunk(N, world, rank)].clone())

        def forward(self, x):
            return AllGatherLinear.apply(x, self.w, None, group, group.group_name)

    class Row(torch.nn.Module):
        def __init__(self, rowwise):
            super().__init__()
            self.rowwise = rowwise
            self.w = torch.nn.Parameter(seeded(91, K, N)[:, chunk(N, world, rank)].clone())
            self.b = torch.nn.Parameter(seeded(92, K))

        def forward(self, h):
            if self.rowwise:
                return rowwise_linear(h, self.w, self.b, 0, group.group_name, "ring")
            return LinearReduceScatter.apply(h, self.w, self.b, group, group.group_name)

    for rowwise in (False, True):
        model = torch.nn.Sequential(Col(), Row(rowwise))
        x = _leaf(seeded(93, M, K)[block(M, world, rank)])
        with tempfile.TemporaryDirectory() as tmp, collmm.trace(f"{tmp}/step", model) as t:
            model(x).square().sum().backward()
        rows = [line.split(None, 14) for line in t.table.strip().splitlines()[1:]]
        got = [(row[1], row[14]) for row in rows]
        want = [("ag_gemm", "0 forward"), ("gemm_rs", "1 forward"), ("ag_gemm", "1 backward"),
                ("gemm_rs", "0 backward"), ("ag_gemm", "0 backward")]
        assert got == want, f"rowwise={rowwise}: {t.table}"


def all_cases(rank, world):
    """Every case above on one group (each process imports torchtitan once)."""
    linear_cases(rank, world)
    in_flight_case(rank, world)
    module_cases(rank, world)
    trace_label_case(rank, world)
    if world == 2:
        sharding_case(rank, world)
