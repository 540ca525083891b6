"""A rank killed in the middle of a checkpoint's save (CPU, gloo, real processes, one SIGKILLed):
collmm.torch.save_checkpoint leaves the previous complete checkpoint, and load_checkpoint loads
it, every weight bit-exact. DCP's own save in place over the previous checkpoint is run beside it
for comparison: it tears that checkpoint (the load fails, or mixes old and new weights)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _world(tmp, world, *args, timeout=120):
    """checkpoint_crash_cases.py on `world` fresh processes over a FileStore; their outputs."""
    init = f"file://{tmp}/init-{args[0]}-{os.urandom(4).hex()}"
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), INIT=init, OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "checkpoint_crash_cases.py"), *map(str, args)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    for p in procs:
        try:
            outs.append((p.wait(timeout=timeout), p.communicate()[0]))
        except subprocess.TimeoutExpired:
            p.kill()
            outs.append((None, p.communicate()[0]))
    return outs


@pytest.mark.parametrize("dying,when", [(1, "before"), (1, "after"), (0, "after")])
def test_a_save_killed_midway_loads_the_previous_checkpoint(tmp_path, dying, when):
    root = str(tmp_path / "ckpt")
    saved = _world(tmp_path, 2, "save", root, dying, when, "new_dir")
    assert saved[dying][0] == -9, f"rank {dying} was not killed:\n{saved[dying][1]}"
    assert "killed inside the save" in saved[dying][1]
    assert not os.path.exists(os.path.join(root, "step-00000002", "COMPLETE"))
    assert open(os.path.join(root, "latest")).read() == "step-00000001\n"
    loaded = _world(tmp_path, 2, "load", root, "new_dir")
    for r, (code, out) in enumerate(loaded):
        assert code == 0, f"rank {r}: exit {code}\n{out}"
        assert f"rank {r}: loaded step 1, equal to step 1: True" in out, out


def test_dcp_in_place_is_torn_by_the_same_kill(tmp_path):
    """What the README's fixed path invited: rank 1 killed after writing its shards over step 1's."""
    root = str(tmp_path / "ckpt")
    saved = _world(tmp_path, 2, "save", root, 1, "after", "in_place")
    assert saved[1][0] == -9, saved[1][1]
    loaded = _world(tmp_path, 2, "load", root, "in_place")
    intact = all(code == 0 and "equal to step 1: True" in out for code, out in loaded)
    assert not intact, "DCP's save in place left the previous checkpoint whole: the comparison shows nothing"
