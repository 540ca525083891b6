"""collmm inside PyTorch's tensor parallelism (CPU, gloo, real processes): parallelize_module with
collmm's styles (tp_cases.py: training, torch's styles, init, RNG, DTensors through the ops,
checkpoint_cases.py: DCP at the same and another world size, FSDP2 x TP, torch.compile), grouped
so that each world starts its processes once."""
import pytest

import checkpoint_cases as ckpt
import tp_cases as tp
from dist_util import run_world


def styles(rank, world):
    tp.train_uneven_block(rank, world)
    tp.same_as_torch_styles(rank, world)
    tp.layers_init_as_linear(rank, world)
    tp.rng_untouched(rank, world)
    tp.dtensors_through_ops(rank, world)
    tp.misuse_errors(rank, world)


@pytest.mark.parametrize("world", [2, 3])
def test_styles(world):
    run_world(world, styles)


def test_checkpoint_across_world_sizes(tmp_path):
    """DCP: saved at 2, loaded at 2 and 3; saved at 3, loaded at 3 and 2."""
    two, three = str(tmp_path / "two"), str(tmp_path / "three")
    run_world(2, ckpt.save_then_load, "", two)
    run_world(3, ckpt.save_then_load, two, three)
    run_world(2, ckpt.save_then_load, three, "")


def test_fsdp_times_tp(tmp_path):
    run_world(4, ckpt.fsdp_times_tp, str(tmp_path / "fsdp_tp"))


def test_compile_uneven_dtensor_input():
    run_world(2, ckpt.compiled_block)


def zero_rows(rank, world):
    import zero_rows_cases as zr

    zr.true_sizes_run_with_empty_rank(rank, world)
    zr.llama_refuses_empty_rank(rank, world)


def test_sequence_leaving_a_rank_no_rows():
    """Seq 3 at P = 4: refused on every rank where the split is lost (a local tensor), run where a
    DTensor carries it. Bounded: a rank that hangs fails the test within the timeout."""
    run_world(4, zero_rows, timeout=240)
