"""The ops as a training step uses them (CPU, gloo, real processes): the agreement over the group's
Store, through shared memory and over its collectives, check="first", a skipped call ending in a named error within
collmm.set_timeout, torch.profiler ranges per step, collmm.trace's files (and its error on a full disk), more shapes than
a session keeps plans for."""
import pytest

from dist_util import run_world
from runtime_cases import (channel_case, comm_path_case, memo_case, mixed_channel_case, plan_cache_case, profiler_case, shm_case,
                           timeout_case, trace_case)


@pytest.mark.parametrize("world,channel,check", [(3, "store", "every"), (2, "store", "first"), (2, "group", "first"),
                                                 (3, "shm", "every"), (2, "shm", "first")])
def test_channel(world, channel, check):
    run_world(world, channel_case, channel, check)


def test_memo_follows_agreement():
    run_world(2, memo_case)


def test_dropped_plans_forget_their_memos():
    run_world(2, plan_cache_case)


@pytest.mark.parametrize("env", [{"COLLMM_SHM_SLOT_BYTES": "8"}, {"COLLMM_SHM_SLOT_BYTES": "{rank}00"},
                                 {"COLLMM_SHM_HOST": "host{rank}"}],
                         ids=["long strings through the store", "slot sizes set apart", "ranks on different hosts"])
def test_shm_channel(env):
    """Shared memory with every string longer than its slots (through the store, signalled in shared
    memory), with slot sizes set differently per rank (rank 0's counts: the segment is one), and
    refused on every rank where the ranks say they are on different hosts."""
    run_world(3, shm_case, env)


def test_ranks_on_different_channels():
    run_world(3, mixed_channel_case)


@pytest.mark.parametrize("channel", ["store", "shm", "group"])
def test_skipped_call_times_out(channel):
    run_world(2, timeout_case, channel, timeout=120)


def test_profiler_ranges():
    run_world(2, profiler_case)


def test_trace(tmp_path):
    run_world(2, trace_case, str(tmp_path / "step"))


def test_trace_on_a_full_disk(tmp_path):
    """collmm.trace on a full file system (a 64 KiB tmpfs): RuntimeError naming the file, nothing
    truncated left (it reported success and left invalid JSON)."""
    import os
    import subprocess

    import collmm
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass
        os.close(fd)
        with pytest.raises(RuntimeError, match=r"cannot write .*step\.json' \(No space left on device\)"):
            with collmm.trace(str(mnt / "step")):
                pass
        assert os.listdir(mnt) == ["fill"]
    finally:
        subprocess.run(["umount", str(mnt)])


@pytest.mark.parametrize("world", [1, 2])
def test_comm_path(world):
    run_world(world, comm_path_case)
