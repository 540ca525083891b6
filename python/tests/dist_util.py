"""Runs a test function on `world` real processes joined by a gloo group (torch.multiprocessing,
spawn), and fails the calling test with every rank's traceback when any rank raised, died or did
not finish within the timeout (then every rank is killed: nothing hangs)."""
import faulthandler
import os
import tempfile
import threading
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(rank, world, fn, init_file, result_dir, args, backend, share_gpu, timeout):
    torch.set_num_threads(1)
    # Where the rank is, shortly before the parent gives up on it: every thread's stack on stderr.
    faulthandler.dump_traceback_later(max(5.0, timeout - 15.0))
    if share_gpu:  # several NCCL ranks on one GPU: each its own "host", NCCL over loopback sockets
        os.environ.update(NCCL_HOSTID=f"h{rank}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")
    if "nccl" in backend:
        torch.cuda.set_device(0 if share_gpu else rank)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        import collmm  # noqa: F401  (registers the ops)

        fn(rank, world, *args)
        err = ""
    except BaseException:  # noqa: BLE001 - reported to the parent
        err = traceback.format_exc()
    faulthandler.cancel_dump_traceback_later()
    with open(os.path.join(result_dir, f"rank{rank}.txt"), "w") as f:
        f.write(err)
    # The result is written. NCCL's teardown can wait forever where CUDA graphs captured its kernels
    # (seen with the captured MLP at world 2 on one GPU): bounded here, then the process ends.
    teardown = threading.Thread(target=dist.destroy_process_group, daemon=True)
    teardown.start()
    teardown.join(30)
    if teardown.is_alive():
        print(f"rank {rank}: destroy_process_group did not return within 30 s; exiting without it", flush=True)
        os._exit(0)


def run_world(world: int, fn, *args, backend: str = "gloo", share_gpu: bool = False, timeout: float = 300.0) -> None:
    """fn(rank, world, *args) on `world` processes of a `backend` group. With NCCL, rank r drives
    GPU r, or every rank GPU 0 when share_gpu (device-notes.md: NCCL_HOSTID per rank)."""
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.start_processes(
            _worker, args=(world, fn, os.path.join(d, "init"), d, args, backend, share_gpu, timeout), nprocs=world,
            join=False,
            start_method="spawn",
        )
        deadline = time.monotonic() + timeout
        try:
            while not ctx.join(timeout=1.0):
                if time.monotonic() > deadline:
                    done = [f"rank {r}: " + (open(p).read() or "finished")
                            for r, p in ((r, os.path.join(d, f"rank{r}.txt")) for r in range(world)) if os.path.exists(p)]
                    raise AssertionError(f"world {world}: not done after {timeout} s (a rank hangs; every rank's "
                                         f"stacks are on stderr)\n" + "\n".join(done))
        except mp.ProcessRaisedException as e:  # not expected: _worker catches
            raise AssertionError(str(e)) from None
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
        errors = []
        for r in range(world):
            path = os.path.join(d, f"rank{r}.txt")
            if not os.path.exists(path):
                errors.append(f"rank {r}: no result (the process died)")
            elif open(path).read():
                errors.append(f"rank {r}:\n{open(path).read()}")
        assert not errors, f"world {world}:\n" + "\n".join(errors)


def block(total: int, world: int, q: int) -> slice:
    """Rank q's block of a dimension of `total` (collmm's split: the first total % world ranks one more)."""
    start = sum(total // world + (1 if i < total % world else 0) for i in range(q))
    return slice(start, start + total // world + (1 if q < total % world else 0))


def chunk(total: int, world: int, q: int) -> slice:
    """Rank q's part of a dimension of `total` as torch.chunk and DTensor's Shard split it (a parallel
    layer's weight shards)."""
    each = -(-total // world)
    return slice(min(total, q * each), min(total, (q + 1) * each))


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of a DTensor (a parallel layer's parameter or gradient; a Partial gradient of
    a replicated parameter summed over the ranks first: collective), or `t`."""
    if not hasattr(t, "to_local"):
        return t
    if any(p.is_partial() for p in t.placements):
        from torch.distributed.tensor import Replicate

        t = t.redistribute(placements=[Replicate()] * len(t.placements))
    return t.to_local()


def seeded(seed: int, *shape, dtype=torch.float32) -> torch.Tensor:
    """The same random tensor on every rank."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


TOL = {torch.float64: 1e-10, torch.float32: 1e-4, torch.bfloat16: 3e-2}


def assert_close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, want {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, want {want.dtype}"
    got, want = got.detach().cpu(), want.detach().cpu()
    tol = TOL[want.dtype]
    scale = want.double().abs().max().item() if want.numel() else 0.0
    torch.testing.assert_close(got.double(), want.double(), rtol=tol, atol=tol * max(1.0, scale),
                               msg=lambda m: f"{what}: {m}")
