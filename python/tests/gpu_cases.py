"""The GPU cases (CUDA tensors, NCCL groups), for test_gpu.py and for machines without pytest:

    PYTHONPATH=python python python/tests/gpu_cases.py     # every GPU case; exit code 1 on a failure
"""
import sys

import torch

from dist_util import run_world


def gpu_cases(rank, world, share_gpu):
    from layer_cases import mlp_cases
    from op_cases import ag_cases, pieces_cases, rs_cases

    device = torch.device("cuda", 0 if share_gpu else rank)
    if torch.distributed.get_backend() == "nccl":  # CPU tensors on an NCCL-only group: collmm's error, at once
        try:
            torch.ops.collmm.fused_all_gather_matmul(torch.ones(2, 2), [torch.ones(2, 2)], 0,
                                                     torch.distributed.group.WORLD.group_name)
            raise AssertionError("CPU tensors on an NCCL-only group: no error")
        except ValueError as e:
            assert "has no backend for cpu" in str(e), str(e)
    ag_cases(rank, world, device)
    rs_cases(rank, world, device)
    pieces_cases(rank, world, device)
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
    a, b_dev = a_full[block(64 * world, world, rank)].to(device), b.to(device)  # copies from pageable memory wait
    torch.ops.collmm.fused_all_gather_matmul(a, [b_dev], 0, group, algo="ring")  # plan prepared
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    busy = big @ big @ big  # ~ms of work queued on the current stream
    _, (c,) = torch.ops.collmm.fused_all_gather_matmul(a, [b_dev], 0, group, algo="ring")
    issued = time.perf_counter() - t0
    torch.cuda.synchronize()
    done = time.perf_counter() - t0
    assert issued < 0.5 * done, f"the op waited for the device: issued after {issued:.4f} s, done after {done:.4f} s"
    assert_close(c, (a_full.double() @ b.double()).float(), "ring on CUDA")
    del busy


def main() -> int:
    """Runs what test_gpu.py runs, without pytest: one GPU at world 1..4, the no-host-sync check, and
    one GPU per rank where there are several. Prints one line per case."""
    runs = [(f"one GPU, NCCL, world {w}", lambda w=w: run_world(w, gpu_cases, True, backend="nccl", share_gpu=True,
                                                                 timeout=900)) for w in (1, 2, 3, 4)]
    runs.append(("one GPU, gloo + NCCL, world 2, no host sync",
                 lambda: run_world(2, no_host_sync_case, True, backend="cpu:gloo,cuda:nccl", share_gpu=True)))
    for w in (2, 4, 8):
        if torch.cuda.device_count() >= w:
            runs.append((f"{w} GPUs, NCCL", lambda w=w: run_world(w, gpu_cases, False, backend="nccl", timeout=900)))
    failed = 0
    for name, run in runs:
        try:
            run()
            print(f"PASS {name}", flush=True)
        except AssertionError as e:
            failed += 1
            print(f"FAIL {name}\n{e}", flush=True)
    print(f"{len(runs) - failed} of {len(runs)} passed (torch {torch.__version__}, {torch.cuda.device_count()} GPUs)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
