"""The ops and layers on CUDA tensors with NCCL groups (the ATen executor): the CPU suites' cases
(every op x algo, uneven splits, both B layouts, several Bs, forward + backward against the plain
computation). Skipped without a GPU.

- One GPU, world sizes 1..4: several NCCL ranks share it (device-notes.md: NCCL_HOSTID per rank,
  sockets over loopback); right for correctness, not for timings.
- A group with both backends ("cpu:gloo,cuda:nccl"): the agreement checks go over gloo.
- Several GPUs (one per rank): skipped below 2 GPUs.
"""
import pytest
import torch

from dist_util import run_world

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")


def gpu_cases(rank, world, share_gpu):
    from test_layers import mlp_cases
    from test_ops import ag_cases, rs_cases

    device = torch.device("cuda", 0 if share_gpu else rank)
    ag_cases(rank, world, device)
    rs_cases(rank, world, device)
    mlp_cases(rank, world, device)


def no_host_sync_case(rank, world, share_gpu):
    """With a gloo side for the agreement, the op only enqueues work: it returns while a long GEMM
    queued before it is still running, and the result is right afterwards."""
    import time

    from dist_util import assert_close, block, seeded

    device = torch.device("cuda", 0 if share_gpu else rank)
    group = torch.distributed.group.WORLD.group_name
    big = torch.randn(8192, 8192, device=device)
    a_full, b = seeded(30, 64 * world, 256), seeded(31, 256, 128)
    a = a_full[block(64 * world, world, rank)].to(device)
    torch.ops.collmm.fused_all_gather_matmul(a, [b.to(device)], 0, group, algo="ring")  # plan prepared
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    busy = big @ big @ big  # ~ms of work queued on the current stream
    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b.to(device)], 0, group, algo="ring")
    issued = time.perf_counter() - t0
    torch.cuda.synchronize()
    done = time.perf_counter() - t0
    assert issued < 0.5 * done, f"the op waited for the device: issued after {issued:.4f} s, done after {done:.4f} s"
    assert_close(c, (a_full.double() @ b.double()).float(), "ring on CUDA")
    del busy


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_one_gpu_nccl(world):
    run_world(world, gpu_cases, True, backend="nccl", share_gpu=True, timeout=900)


def test_one_gpu_gloo_and_nccl_no_host_sync():
    run_world(2, no_host_sync_case, True, backend="cpu:gloo,cuda:nccl", share_gpu=True)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")
@pytest.mark.parametrize("world", [2, 4, 8])
def test_multi_gpu_nccl(world):
    if torch.cuda.device_count() < world:
        pytest.skip(f"fewer than {world} GPUs")
    run_world(world, gpu_cases, False, backend="nccl", timeout=900)
