"""The ops as a training step uses them (CPU, gloo, real processes): the agreement over the group's
Store and over its collectives, check="first", a skipped call ending in a named error within
collmm.set_timeout, torch.profiler ranges per step, collmm.trace's files."""
import pytest

from dist_util import run_world
from runtime_cases import channel_case, memo_case, profiler_case, timeout_case, trace_case


@pytest.mark.parametrize("world,channel,check", [(3, "store", "every"), (2, "store", "first"), (2, "group", "first")])
def test_channel(world, channel, check):
    run_world(world, channel_case, channel, check)


def test_memo_follows_agreement():
    run_world(2, memo_case)


@pytest.mark.parametrize("channel", ["store", "group"])
def test_skipped_call_times_out(channel):
    run_world(2, timeout_case, channel, timeout=120)


def test_profiler_ranges():
    run_world(2, profiler_case)


def test_trace(tmp_path):
    run_world(2, trace_case, str(tmp_path / "step"))
