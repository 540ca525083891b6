"""The ops and layers on CUDA tensors with NCCL groups (the ATen executor): the CPU suites' cases
(every op x algo, the all-reduce's autograd, uneven splits, both B layouts, several Bs, forward + backward against the plain
computation). Skipped without a GPU.

- One GPU, world sizes 1..4: several NCCL ranks share it (device-notes.md: NCCL_HOSTID per rank,
  sockets over loopback); right for correctness, not for timings.
- A group with both backends ("cpu:gloo,cuda:nccl"): the agreement checks go over gloo.
- Several GPUs (one per rank): skipped below 2 GPUs.
"""
import pytest
import torch

from dist_util import run_world
from gpu_cases import (capture_case, gpu_cases, host_bounded_case, no_host_sync_case, shared_gather_case,
                       stopped_peer_case)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_one_gpu_nccl(world):
    run_world(world, gpu_cases, True, backend="nccl", share_gpu=True, timeout=900)


def test_one_gpu_gloo_and_nccl_no_host_sync():
    run_world(2, no_host_sync_case, True, backend="cpu:gloo,cuda:nccl", share_gpu=True)


@pytest.mark.parametrize("world", [2, 4])
def test_one_gpu_nccl_only_no_host_sync(world):
    run_world(world, no_host_sync_case, True, backend="nccl", share_gpu=True)


@pytest.mark.parametrize("world", [2, 4])
def test_one_gpu_nccl_only_host_bounded(world):
    run_world(world, host_bounded_case, True, backend="nccl", share_gpu=True, timeout=150)


def test_one_gpu_stopped_peer_watchdog():
    run_world(2, stopped_peer_case, True, backend="nccl", share_gpu=True, timeout=150)


def test_one_gpu_shared_gather():
    run_world(2, shared_gather_case, True, backend="nccl", share_gpu=True, timeout=300)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_one_gpu_capture(world):
    run_world(world, capture_case, True, backend="nccl", share_gpu=True, timeout=600)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")
@pytest.mark.parametrize("world", [2, 4])
def test_multi_gpu_capture(world):
    if torch.cuda.device_count() < world:
        pytest.skip(f"fewer than {world} GPUs")
    run_world(world, capture_case, False, backend="nccl", timeout=600)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")
@pytest.mark.parametrize("world", [2, 4, 8])
def test_multi_gpu_nccl(world):
    if torch.cuda.device_count() < world:
        pytest.skip(f"fewer than {world} GPUs")
    run_world(world, gpu_cases, False, backend="nccl", timeout=900)
