"""PyTorch's AsyncTPTest (test/distributed/test_symmetric_memory.py, the fused ops without fp8) ported
onto collmm's ops, for test_symm_mem.py: torch's own reference (its _fallback functions, run on the
gloo group) against torch.ops.collmm with torch's arguments and assertions (values and strides), the
keyword names torch's op takes, gradients of the new dims against plain torch, and collmm's messages
for the dims and for a rank whose calls are out of step."""
import warnings

import torch
import torch.distributed as dist
from torch.distributed._symmetric_memory import (_fused_all_gather_matmul_fallback,
                                                 restride_A_for_fused_matmul_reduce_scatter,
                                                 restride_A_shard_for_fused_all_gather_matmul)

from dist_util import assert_close, seeded


def _reduce_scatter_reference(A, B, reduce_op, scatter_dim, world, rank):
    """torch's _fused_matmul_reduce_scatter_fallback (reduce_scatter_single(A @ B, ...), contiguous),
    computed from every rank's A @ B gathered: gloo's reduce_scatter takes no "avg"."""
    partial = (A @ B).contiguous()
    parts = [torch.empty_like(partial) for _ in range(world)]
    dist.all_gather(parts, partial)
    total = torch.stack(parts).sum(0)
    if reduce_op == "avg":
        total = total / world
    return total.chunk(world, dim=scatter_dim)[rank].contiguous()


def fused_all_gather_matmul_case(rank, world, gather_dim):
    """AsyncTPTest.test_fused_all_gather_matmul, gather_dim 0, 1, 2 (the last: K gathered)."""
    BATCH, M, N, K = 8, 64, 16, 32
    group = dist.group.WORLD
    torch.manual_seed(42 + rank)
    A_shard_shape = [BATCH, M, K]
    A_shard_shape[gather_dim] //= world
    A_shard = torch.rand(A_shard_shape)
    Bs = [torch.rand(K, N) for _ in range(3)]

    ag_output_0, mm_outputs_0 = _fused_all_gather_matmul_fallback(A_shard, Bs, gather_dim=gather_dim,
                                                                  group_name=group.group_name)
    ag_output_1, mm_outputs_1 = torch.ops.collmm.fused_all_gather_matmul(A_shard, Bs, gather_dim=gather_dim,
                                                                         group_name=group.group_name)
    assert torch.allclose(ag_output_0, ag_output_1)
    assert ag_output_0.stride() == ag_output_1.stride(), (ag_output_0.stride(), ag_output_1.stride())
    for mm_output_0, mm_output_1 in zip(mm_outputs_0, mm_outputs_1):
        assert torch.allclose(mm_output_0, mm_output_1)
        assert mm_output_0.stride(), mm_output_1.stride()
        assert mm_output_0.stride() == mm_output_1.stride(), (mm_output_0.stride(), mm_output_1.stride())
    # Keyword calls written for torch's op (its first argument is named A), and collmm's wrapper.
    import collmm

    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(A=A_shard, Bs=Bs[:1], gather_dim=gather_dim,
                                                       group_name=group.group_name, return_A=False)
    assert torch.allclose(c, mm_outputs_0[0])
    _, (c,) = collmm.fused_all_gather_matmul(A=A_shard, Bs=Bs[:1], gather_dim=gather_dim, return_A=False)
    assert torch.allclose(c, mm_outputs_0[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, (c,) = collmm.fused_all_gather_matmul(A_shard=A_shard, Bs=Bs[:1], gather_dim=gather_dim, return_A=False)
    assert torch.allclose(c, mm_outputs_0[0])
    assert any(w.category is FutureWarning and "A_shard= is deprecated" in str(w.message) for w in caught), caught


def fused_matmul_reduce_scatter_case(rank, world, scatter_dim):
    """AsyncTPTest.test_fused_matmul_reduce_scatter, scatter_dim 0, 1, 2 (the last: N scattered)."""
    BATCH, M, N, K = 8, 64, 16, 1024
    group = dist.group.WORLD
    torch.manual_seed(42 + rank)
    A = torch.rand(BATCH, M, K)
    B = torch.rand(K, N)

    output_0 = _reduce_scatter_reference(A, B, "avg", scatter_dim, world, rank)
    output_1 = torch.ops.collmm.fused_matmul_reduce_scatter(A, B, "avg", scatter_dim=scatter_dim,
                                                            group_name=group.group_name)
    assert torch.allclose(output_0, output_1)
    assert output_0.stride() == output_1.stride(), (output_0.stride(), output_1.stride())
    # Contiguous, so a view works as it does on torch's output (not strides (16, 128, 1)).
    assert output_1.view(-1, output_1.shape[-1]).shape[0] == output_1.numel() // output_1.shape[-1]


def bfloat16_reduce_case(rank, world):
    """AsyncTPTest.test_fused_matmul_reduce_scatter_bfloat16_custom_reduce (its eager half: the CUDA
    graph half has no CPU counterpart)."""
    M, N, K = 64, 32, 1024
    group = dist.group.WORLD
    torch.manual_seed(42 + rank)
    A = torch.rand(M, K, dtype=torch.bfloat16)
    B = torch.rand(K, N, dtype=torch.bfloat16)
    output_0 = _reduce_scatter_reference(A, B, "avg", 0, world, rank)
    output_1 = torch.ops.collmm.fused_matmul_reduce_scatter(A, B, "avg", scatter_dim=0, group_name=group.group_name)
    torch.testing.assert_close(output_0, output_1, rtol=1e-2, atol=1e-2)
    assert output_0.stride() == output_1.stride()


def strided_inputs_case(rank, world, dim):
    """AsyncTPTest.test_optimal_layout's restrided tensors (its assertions), then fed to collmm's ops:
    the same values and strides as torch's reference on the contiguous tensor."""
    group = dist.group.WORLD.group_name
    torch.manual_seed(42 + rank)
    t = torch.rand(8, 64, 32, 16)
    x = restride_A_shard_for_fused_all_gather_matmul(t, dim)
    assert x.movedim(dim, 0).is_contiguous()
    assert torch.allclose(x, t)
    Bs = [torch.rand(16, 8) for _ in range(2)]
    a0, cs0 = _fused_all_gather_matmul_fallback(t, Bs, gather_dim=dim, group_name=group)
    a1, cs1 = torch.ops.collmm.fused_all_gather_matmul(x, Bs, dim, group)
    assert torch.allclose(a0, a1) and a0.stride() == a1.stride(), (a0.stride(), a1.stride())
    for c0, c1 in zip(cs0, cs1):
        assert torch.allclose(c0, c1) and c0.stride() == c1.stride(), (c0.stride(), c1.stride())

    x = restride_A_for_fused_matmul_reduce_scatter(t, dim)
    assert x.movedim(dim, 0).is_contiguous()
    assert torch.allclose(x, t)
    out0 = _reduce_scatter_reference(t, Bs[0], "sum", dim, world, rank)
    out1 = torch.ops.collmm.fused_matmul_reduce_scatter(x, Bs[0], "sum", dim, group)
    assert torch.allclose(out0, out1, atol=1e-5) and out0.stride() == out1.stride(), (out0.stride(), out1.stride())


def last_dim_gradients_case(rank, world):
    """Gradients of the all-gather along K and the reduce-scatter along N against plain torch's
    autograd on the whole tensors (uneven shards: K 7 and N 9 over the ranks)."""
    group = dist.group.WORLD.group_name
    k_parts = [3 + q for q in range(world)]
    K = sum(k_parts)
    lo = sum(k_parts[:rank])
    A_full = seeded(1, 2, 5, K)
    Bs_of = [seeded(10 + q, K, 4) for q in range(world)]  # each rank's own B (not sharded)
    W_of = [seeded(20 + q, 2, 5, 4) for q in range(world)]
    V_of = [seeded(30 + q, 2, 5, K) for q in range(world)]

    a = A_full[..., lo:lo + k_parts[rank]].clone().requires_grad_()
    b = Bs_of[rank].clone().requires_grad_()
    g, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b], -1, group)
    assert_close(g, A_full, "the gathered A (K)")
    assert_close(c, A_full @ Bs_of[rank], "A @ B (K gathered)")
    ((c * W_of[rank]).sum() + (g * V_of[rank]).sum()).backward()
    ref_a = A_full.clone().requires_grad_()
    sum(((ref_a @ Bs_of[q]) * W_of[q]).sum() + (ref_a * V_of[q]).sum() for q in range(world)).backward()
    assert_close(a.grad, ref_a.grad[..., lo:lo + k_parts[rank]], "dA_shard (K gathered)")
    assert_close(b.grad, torch.einsum("bsk,bsn->kn", A_full, W_of[rank]), "dB (K gathered)")

    # The reduce-scatter of N (9 columns: 5, 4 at world 2), each rank's K_r its own.
    N = 9
    A_of = [seeded(40 + q, 2, 5, k_parts[q]) for q in range(world)]
    B_of = [seeded(50 + q, k_parts[q], N) for q in range(world)]
    G = seeded(60, 2, 5, N)
    sizes = [N // world + (1 if q < N % world else 0) for q in range(world)]
    n_lo = sum(sizes[:rank])
    a = A_of[rank].clone().requires_grad_()
    b = B_of[rank].clone().requires_grad_()
    y = torch.ops.collmm.fused_matmul_reduce_scatter(a, b, "sum", 2, group)
    S = sum(A_of[q] @ B_of[q] for q in range(world))
    assert_close(y, S[..., n_lo:n_lo + sizes[rank]], "the reduce-scatter of N")
    assert y.is_contiguous()
    (y * G[..., n_lo:n_lo + sizes[rank]]).sum().backward()
    assert_close(a.grad, G @ B_of[rank].t(), "dA (N scattered)")
    assert_close(b.grad, torch.einsum("bsk,bsn->kn", A_of[rank], G), "dB (N scattered)")


def dims_named_case(rank, world):
    """[batch, seq, dim] gathered on the sequence (dim 1), the ranks' batch differing: the message
    names the dims other than gather_dim and K (not "between": they are before it)."""
    group = dist.group.WORLD.group_name
    batch = 3 if rank == world - 1 else 2
    x = seeded(1, batch, 4, 8)
    for call, key in ((lambda: torch.ops.collmm.fused_all_gather_matmul(x, [seeded(2, 8, 3)], 1, group),
                       "A's dims other than gather_dim and K"),
                      (lambda: torch.ops.collmm.fused_matmul_reduce_scatter(x, seeded(2, 8, 3), "sum", 1, group),
                       "A's dims other than scatter_dim and K")):
        try:
            call()
            raise AssertionError("ranks that disagree on the batch: no error")
        except ValueError as e:
            assert f"disagree on {key}: rank 0 has [2], rank {world - 1} has [3]" in str(e), str(e)
            assert "between" not in str(e), str(e)


def skipped_call_case(rank, world):
    """check="every": the last rank's second call fails its own checks on that rank alone (an argument
    collmm's wrapper refuses before the op), caught; its third call meets the others' second. Every
    rank raises ValueError naming the calls out of step (it paired them silently: same shapes)."""
    import collmm

    collmm.set_check("every")
    group = dist.new_group(list(range(world)))
    a, b = seeded(1, 4, 8), seeded(2, 8, 3)
    collmm.fused_all_gather_matmul(a, [b], 0, group)
    if rank == world - 1:
        try:
            collmm.fused_all_gather_matmul(a, [b], 0, group, pieces=2, piece_sizes="thirds")
            raise AssertionError("a bad piece_sizes: no error")
        except ValueError as e:
            assert "piece_sizes" in str(e), str(e)
    try:
        collmm.fused_all_gather_matmul(a + rank, [b], 0, group)
        raise AssertionError("calls out of step: no error")
    except ValueError as e:
        assert "the number of collmm calls on this group so far" in str(e), str(e)
        assert f"rank {world - 1} has 3" in str(e) and "rank 0 has 2" in str(e), str(e)
