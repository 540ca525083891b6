"""The README's PyTorch example runs as written (torchrun, 2 processes, gloo) and its loss equals
the unsharded one (the script asserts it)."""
import os
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "tp_mlp.py")


def test_tp_mlp_example_under_torchrun():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", EXAMPLE]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "rank 0: loss" in out.stdout and "rank 1: loss" in out.stdout, out.stdout + out.stderr
