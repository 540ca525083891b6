"""The llama3 debug model trained at TP 2 through torchtitan 0.3.0's trainer on CPU (gloo), with
``--module collmm.torchtitan --config llama3_debugmodel_collmm`` and with torchtitan's own
non-fused path, on the same data and seed (titan_train.py: CPU, SDPA attention, random tokens).
The losses and gradient norms of every step agree, at an even sequence length (both sequence-
parallel, collmm's under spmd_types' type checker) and an uneven one (torchtitan refuses it with
sequence parallelism: its path runs without, collmm's with and without). TP alone: FSDP over gloo
fails inside torchtitan (PREMUL_SUM). Skipped where torchtitan is not installed."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torchtitan", reason="torchtitan is not installed (pip install 'collmm[torchtitan]')")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 2


def train(tmp_path, name, *flags):
    out = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           os.path.join(HERE, "titan_train.py"), str(out), *flags, "--parallelism.tensor_parallel_degree", "2",
           "--training.steps", str(STEPS), "--training.local_batch_size", "2", "--debug.seed", "42",
           "--dump_folder", str(tmp_path / name)]
    cmd.sort(key=lambda arg: arg.startswith("activation-checkpoint:"))  # tyro's subcommands come last
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, f"{name}: exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    return json.loads(out.read_text())


def stock(tmp_path, name, *flags):
    return train(tmp_path, name, "--module", "llama3", "--config", "llama3_debugmodel",
                 "--parallelism.spmd_backend", "spmd_types", *flags)


def collmm(tmp_path, name, *flags):
    return train(tmp_path, name, "--module", "collmm.torchtitan", "--config", "llama3_debugmodel_collmm", *flags)


def assert_same_losses(got, want, what, rel=1e-4):
    assert len(got["losses"]) == len(want["losses"]) == STEPS, f"{what}: {got} {want}"
    for g, w in zip(got["losses"], want["losses"]):
        for key in ("loss", "grad_norm"):
            assert g[key] == pytest.approx(w[key], rel=rel), f"{what}: step {g['step']} {key} {g[key]}, want {w[key]}"


def test_even_sequence(tmp_path):
    flags = ("--training.seq_len", "32")
    want = stock(tmp_path, "stock", *flags)
    # with spmd_types' type checker on (it refuses torchtitan's selective AC there: none)
    got = collmm(tmp_path, "collmm", *flags, "--debug.spmd_typechecking", "activation-checkpoint:none")
    assert (got["model"], got["wo"]) == ("Llama3Config", "RowParallelLinear")
    assert want["wo"] == "Linear"
    assert_same_losses(got, want, "seq 32, sequence-parallel")


def test_uneven_sequence(tmp_path):
    flags = ("--training.seq_len", "31", "--loss.num-chunks", "1")  # torchtitan's chunked loss needs seq % chunks == 0
    want = stock(tmp_path, "stock", "--parallelism.no-enable-sequence-parallel", *flags)
    got = collmm(tmp_path, "collmm", "--collmm.trace_step", str(STEPS), *flags)
    assert got["wo"] == "RowParallelLinear"
    assert_same_losses(got, want, "seq 31 at TP 2, collmm's sequence-parallel")
    # collmm's trace of the step, each call labelled with its module and pass: forward, the QKV and
    # FFN gathers and the wo and w2 reduce-scatters; backward, each one's other op (the gathers'
    # backward a reduce-scatter and a gather for the weights' gradients)
    table = (tmp_path / "collmm" / "collmm_trace" / f"step{STEPS}.txt").read_text().splitlines()
    calls = [(line.split()[1], " ".join(line.split()[14:])) for line in table[1:]]
    expected = [("ag_gemm", "attention.qkv_linear forward"), ("gemm_rs", "attention.wo forward"),
                ("ag_gemm", "feed_forward forward"), ("gemm_rs", "feed_forward forward"),
                ("gemm_rs", "attention.qkv_linear backward"), ("ag_gemm", "attention.qkv_linear backward"),
                ("ag_gemm", "attention.wo backward"),
                ("gemm_rs", "feed_forward backward"), ("ag_gemm", "feed_forward backward")]
    for layer in range(6):
        for op, module in expected:
            assert any(o == op and f"layers.{layer}." in label and label.endswith(module)
                       for o, label in calls), f"no {op} of layers.{layer}.{module} in the trace: {calls}"
    assert not any(label.startswith("(no module)") for _, label in calls), calls
    assert len(calls) >= 6 * (4 + 6), f"forward 4 and backward 6 calls per layer: {len(calls)} calls"
    got = collmm(tmp_path, "collmm_nosp", "--parallelism.no-enable-sequence-parallel", *flags)
    assert got["wo"] == "AllReduceLinear"
    assert_same_losses(got, want, "seq 31 at TP 2, collmm's GEMM + all-reduce")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_cuda(tmp_path):
    """On 2 GPUs (NCCL): collmm's path against torchtitan's unfused path and its own dist_gemm
    (torch.ops.symm_mem) at an even sequence, and against the unfused path without sequence
    parallelism at an uneven one. bf16 GEMMs reduce in other orders: a looser tolerance."""
    even = ("--cuda", "--training.seq_len", "64")
    want = stock(tmp_path, "stock", *even)
    for name, got in (("collmm", collmm(tmp_path, "collmm", *even, "--collmm.trace_step", str(STEPS))),
                      ("dist_gemm", train(tmp_path, "dist_gemm", "--module", "llama3", "--config",
                                          "llama3_debugmodel_dist_gemm", *even))):
        assert_same_losses(got, want, f"cuda seq 64: {name}", rel=2e-3)
    assert (tmp_path / "collmm" / "collmm_trace" / f"step{STEPS}.txt").exists()
    uneven = ("--cuda", "--training.seq_len", "63", "--loss.num-chunks", "1")
    want = stock(tmp_path, "stock63", "--parallelism.no-enable-sequence-parallel", *uneven)
    assert_same_losses(collmm(tmp_path, "collmm63", *uneven), want, "cuda seq 63", rel=2e-3)
