"""Cases of ranks that stop, die or lie, for test_faults.py. Each runs in a process of its own
(launch(), below, starts them with `python -c`), so that a case may stop or kill a rank and the
test can time each process to its exit. A case raises AssertionError where collmm misbehaves; a
rank that passes prints its figures as "name=value" words on its last line."""
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))


def _shards(rank, world, rows=8, k=16, n=8):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(rows * world, k, generator=g)[rank * rows:(rank + 1) * rows].contiguous()
    return a, torch.randn(k, n, generator=g)


def _pids():
    pids = [None] * dist.get_world_size()
    dist.all_gather_object(pids, os.getpid())
    return pids


def _expect_raise(call, bound, *words):
    """Runs call(); it must raise DistBackendError within `bound` s whose message holds every word.
    Returns the seconds it took."""
    t0 = time.monotonic()
    try:
        call()
    except dist.DistBackendError as e:
        took = time.monotonic() - t0
        assert all(w in str(e) for w in words), f"{words} not in: {e}"
        assert took < bound, f"raised after {took:.1f} s, bound {bound} s: {e}"
        return took
    raise AssertionError(f"no error within {time.monotonic() - t0:.1f} s")


def stopped_store_host(rank, world, channel):
    """Rank 1 stops rank 0 (the TCPStore's host) and calls: it raises within set_timeout + 1 s
    + slack naming the Store. With "store", after one call that set the channel up; with "shm",
    at the group's first call (the shared-memory setup)."""
    import collmm

    collmm.set_channel(channel)
    group = dist.new_group(backend="gloo")
    a, b = _shards(rank, world)
    if channel == "store":
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group.group_name, algo="ring")
    collmm.set_timeout(3)
    pids = _pids()
    dist.barrier()
    if rank == 0:
        time.sleep(8)  # stopped in here; resumed after rank 1 raised (about 4 s)
        return "stopped=1"
    os.kill(pids[0], signal.SIGSTOP)
    try:
        took = _expect_raise(lambda: torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group.group_name, algo="ring"),
                             3 + 4, "Store did not answer")
    finally:
        os.kill(pids[0], signal.SIGCONT)
    return f"raised_s={took:.2f}"


def stopped_in_transfer(rank, world, op, algo):
    """Rank 0 stops rank 1 while both are inside a run's transfers (a call known to both, check
    "first": nothing is exchanged before the run), then raises within set_timeout + slack; it
    survives rank 1's late transfers after it resumes it (its call's memory freed and reused
    meanwhile), and every later call on the group raises at once."""
    import threading

    import collmm

    collmm.set_check("first")
    group = dist.group.WORLD.group_name
    rows, k, n = 512, 512, 256
    a = torch.randn(rows, k)
    if op == "ag":
        b = torch.randn(k, n)
        call = lambda: torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group, algo=algo)  # noqa: E731
    else:
        b = torch.randn(k, n * 4)
        call = lambda: torch.ops.collmm.fused_matmul_reduce_scatter(a, b, "sum", 0, group, algo=algo)  # noqa: E731
    call()
    call()
    pids = _pids()
    collmm.set_timeout(3)
    dist.barrier()
    if rank == 1:
        try:
            for _ in range(100000):  # stopped in one of these; after SIGCONT its peer has given up
                call()
        except dist.DistBackendError as e:
            return f"peer_raised=1 msg={str(e)[:60]!r}"
        raise AssertionError("rank 1: its peer gave up, yet every call went through")
    stop = threading.Timer(0.3, os.kill, (pids[1], signal.SIGSTOP))
    stop.start()

    def many():
        for _ in range(100000):
            call()

    # A ring's transfers wait on their peer: the message names it (the collectives' cannot).
    took = _expect_raise(many, 0.3 + 3 + 5, "rank 0 of 2", *(["no answer from rank 1"] if algo == "ring" else []))
    stop.join()
    for _ in range(20):  # the call's memory goes back and is handed out again
        torch.randn(rows, n * 4).sum()
    os.kill(pids[1], signal.SIGCONT)
    time.sleep(2)  # rank 1's late transfers, if any, land now
    for _ in range(20):
        torch.randn(rows, n * 4).sum()
    _expect_raise(call, 1, "given up")
    return f"raised_s={took:.2f}"


def timeout_then_exit(rank, world, channel, peer):
    """Rank 1 skips a call (it sleeps, or sits in a plain all_reduce); rank 0 raises within the
    timeout, then returns: main() destroys the group and the process exits (the test times it)."""
    import collmm

    collmm.set_channel(channel)
    group = dist.new_group(backend="gloo")
    a, b = _shards(rank, world)
    torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group.group_name)
    collmm.set_timeout(2)
    if rank == 1:
        if peer == "all_reduce":
            dist.all_reduce(torch.ones(4), group=group)
        time.sleep(20)
        return "late=1"
    a6, b6 = _shards(rank, world, rows=6)
    took = _expect_raise(lambda: torch.ops.collmm.fused_all_gather_matmul(a6, [b6], 0, group.group_name), 2 + 5,
                         "within 2 s")
    print(f"raised_at={time.time():.3f}", flush=True)
    return f"raised_s={took:.2f}"


class _DyingStore(dist.Store):
    """A FileStore, but this process dies (SIGKILL) as it sets its key of collmm's setup round
    `round` (.../collmm/<group>/<device>/<generation>/<round>/<rank>)."""

    def __init__(self, path, world, rank, round_):
        super().__init__()
        self.inner, self.rank, self.round = dist.FileStore(path, world), rank, round_

    def set(self, key, value):
        if "collmm/" in key and key.endswith(f"/{self.round}/{self.rank}"):
            os.kill(os.getpid(), signal.SIGKILL)
        self.inner.set(key, value)

    def get(self, key):
        return self.inner.get(key)

    def add(self, key, value):
        return self.inner.add(key, value)

    def check(self, keys):
        return self.inner.check(keys)

    def delete_key(self, key):
        return self.inner.delete_key(key)

    def wait(self, keys, timeout=None):
        return self.inner.wait(keys) if timeout is None else self.inner.wait(keys, timeout)

    def num_keys(self):
        return self.inner.num_keys()


def killed_in_shm_setup(rank, world, dying, round_):
    """Rank `dying` dies as it sets its key of the shared-memory setup's round `round_` (1: before
    rank 0 makes the segment; 2 and 3: after); the other ranks raise, and no segment of this job is
    left in /dev/shm."""
    import collmm

    collmm.set_channel("shm")
    collmm.set_timeout(3)
    pids = _pids()
    a, b = _shards(rank, world)
    _expect_raise(lambda: torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, dist.group.WORLD.group_name), 3 + 5,
                  "rank")
    left = [f for f in os.listdir("/dev/shm") if any(f.startswith(f"collmm-{p}-") for p in pids)]
    assert not left, f"left in /dev/shm: {left}"
    return "left=0"


def _shm_mappings():
    return [line for line in open("/proc/self/maps") if "/dev/shm/collmm-" in line]


def shm_groups_case(rank, world):
    """24 groups made, used on the shared-memory channel and destroyed: the mappings stay at one
    or none (each was kept for good before)."""
    import gc

    import collmm

    collmm.set_channel("shm")
    a, b = _shards(rank, world)
    counts = []
    for _ in range(24):
        group = dist.new_group(backend="gloo")
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group.group_name, algo="ring")
        dist.destroy_process_group(group)
        del group
        gc.collect()
        counts.append(len(_shm_mappings()))
    assert max(counts) <= 2, f"mappings after each group's destruction: {counts}"
    collmm.set_channel("auto")


def forged_shm_case(rank, world, field):
    """Rank 1 writes into its own slot of the segment (as a rank gone wrong would) while rank 0
    calls: a length past the slot, a stale stamp, or a NaN among the agreed numbers. Rank 0 raises
    DistBackendError naming rank 1, no undefined behaviour."""
    import struct

    import collmm

    slot_bytes = 1024
    os.environ["COLLMM_SHM_SLOT_BYTES"] = str(slot_bytes)
    collmm.set_channel("shm")
    group = dist.new_group(backend="gloo")
    a, b = _shards(rank, world)
    for _ in range(3):
        torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group.group_name, algo="ring")
    dist.barrier()
    if rank == 1:  # the layout of shm_slots.hpp: nonce[P] | slot[P][2], each slot 64-byte aligned
        (line,) = _shm_mappings()
        base = int(line.split("-")[0], 16)
        up = lambda n: (n + 63) // 64 * 64  # noqa: E731
        slot = lambda q, s: base + up(8 * world) + (2 * q + s % 2) * up(24 + slot_bytes)  # noqa: E731
        mine = [struct.unpack("q", ctypes.string_at(slot(1, s), 8))[0] for s in (0, 1)]
        s = max(mine)  # the next round (the last one this rank stamped is s - 1)
        length = struct.unpack("q", ctypes.string_at(slot(1, s - 1) + 8, 8))[0]
        payload = bytearray(ctypes.string_at(slot(1, s - 1) + 24, length))
        stamp = s + 1
        if field == "length":
            length = 1 << 40
        elif field == "stamp":
            stamp = 1  # a round long past
        else:
            payload[0:8] = struct.pack("d", float("nan"))
        ctypes.memmove(slot(1, s) + 24, bytes(payload), len(payload))
        ctypes.memmove(slot(1, s) + 8, struct.pack("qq", length, 0), 16)
        ctypes.memmove(slot(1, s), struct.pack("q", stamp), 8)
    dist.barrier()
    if rank == 0:
        want = {"length": "length 1099511627776", "stamp": "stamp 1 in round", "nan": "the number nan"}[field]
        _expect_raise(lambda: torch.ops.collmm.fused_all_gather_matmul(a, [b], 0, group.group_name, algo="ring"),
                      10, "rank 1", want)
    dist.barrier()
    collmm.set_channel("auto")
    del os.environ["COLLMM_SHM_SLOT_BYTES"]


def _run(case, args):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    init = os.environ["INIT"]
    if case == "killed_in_shm_setup":
        store = _DyingStore(init[len("file://"):] + ".store", world, rank, args[1] if rank == args[0] else -1)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timedelta(seconds=60))
    else:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world, timeout=timedelta(seconds=60))
    import collmm  # noqa: F401

    t0 = time.monotonic()
    try:
        print(globals()[case](rank, world, *args), flush=True)
    finally:
        t1 = time.monotonic()
        dist.destroy_process_group()
        print(f"destroy_s={time.monotonic() - t1:.2f} case_s={t1 - t0:.2f}", flush=True)


def launch(world, case, *args, init="file", timeout=90, env=None):
    """case(rank, world, *args) on `world` fresh processes (a gloo group over a FileStore, or with
    init="tcp" a TCPStore hosted by rank 0). Returns per rank (returncode, output, the time.time() of
    its exit). Processes still there after `timeout` are killed (returncode None)."""
    with tempfile.TemporaryDirectory() as d:
        if init == "tcp":
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            method = f"tcp://127.0.0.1:{port}"
        else:
            method = f"file://{d}/init"
        code = (f"import json, sys; sys.path.insert(0, {HERE!r}); import fault_cases; "
                f"fault_cases._run({case!r}, json.loads({json.dumps(args)!r}))")
        t0 = time.monotonic()
        procs = []
        for r in range(world):
            e = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), INIT=method, OMP_NUM_THREADS="1", **(env or {}))
            procs.append(subprocess.Popen([sys.executable, "-c", code], env=e, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        ended = [None] * world
        while None in ended and time.monotonic() - t0 < timeout:
            for r, p in enumerate(procs):
                if ended[r] is None and p.poll() is not None:
                    ended[r] = time.time()
            time.sleep(0.05)
        results = []
        for r, p in enumerate(procs):
            if p.poll() is None:
                p.kill()
            out = p.communicate()[0]
            results.append((p.returncode if ended[r] is not None else None, out, ended[r]))
        return results
