"""The README's PyTorch example runs as written (torchrun, 2 processes, gloo) and its loss equals
the unsharded one (the script asserts it)."""
import os
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "tp_mlp.py")


def torchrun(script: str, world: int) -> str:
    return torchrun_args(script, world, [])


def torchrun_args(script: str, world: int, args: list) -> str:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world), script, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_tp_mlp_example_under_torchrun_world_3():
    """World 3: the sequence of 8 splits 3, 3, 2 with a batch of 2 (rows 6, 6, 4)."""
    out = torchrun(EXAMPLE, 3)
    assert all(f"rank {r}: loss" in out for r in range(3)), out


def test_llama_tp_example_under_torchrun():
    """python/examples/llama_tp.py at small sizes: world 2 at an even length (collmm's plan beside
    torch's, the losses asserted equal by the script, as many collectives), world 3 at an uneven one."""
    llama = os.path.join(os.path.dirname(__file__), "..", "examples", "llama_tp.py")
    small = ["--dim", "48", "--heads", "6", "--hidden", "48", "--vocab", "64", "--steps", "2", "--warmup", "1"]
    for world, seq in ((2, 16), (3, 17)):
        out = torchrun_args(llama, world, ["--seq", str(seq)] + small)
        counts = [line.split("forward+backward: ")[1] for line in out.splitlines() if "forward+backward" in line]
        assert len(counts) == (2 if world == 2 else 1), out
        assert len(set(counts)) == 1, out  # collmm's plan moves as many collectives as torch's


def readme_snippets() -> list:
    """The ```python blocks of the README's PyTorch section, as written."""
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    section = text[text.index("## PyTorch"):text.index("## The C++ API")]
    return [part.split("```", 1)[0] for part in section.split("```python\n")[1:]]


def test_readme_snippets_run_as_written(tmp_path):
    snippets = readme_snippets()
    assert len(snippets) >= 2
    for i, code in enumerate(snippets):
        script = tmp_path / f"snippet{i}.py"
        script.write_text(code)
        torchrun(str(script), 2)


def test_bench_table_under_torchrun(tmp_path):
    """python/bench/bench.py runs (2 processes, gloo, small sizes) and every collmm row agrees with
    the torch baseline row of its op."""
    import json

    from collmm import ALGOS  # "auto" and every algorithm the extension has

    bench = os.path.join(os.path.dirname(__file__), "..", "bench", "bench.py")
    out_json = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", bench,
           "-m", "64", "-n", "32", "-k", "48", "--iters", "2", "--warmup", "1", "--json", str(out_json)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads(out_json.read_text())
    impls = {(r["op"], r["impl"]) for r in rows}
    for op in ("ag_gemm", "gemm_rs"):
        for algo in ALGOS:
            assert (op, f"collmm:{algo}") in impls, (op, algo, out.stdout)
    assert all(r["max_err"] < 1e-4 for r in rows), out.stdout
