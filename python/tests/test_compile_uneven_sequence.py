"""torchtitan's pattern (a SequenceParallel norm, then a collmm Colwise linear) compiled at seq 15 on
2 ranks (CPU, gloo, real processes): torch's SequenceParallel claims P times each rank's rows, so
every rank refuses with the remedies; the remedy (gathered_size) then compiles and runs."""
from dist_util import run_world
from compile_seq_cases import compiled_uneven_sequence


def test_compiled_uneven_sequence():
    run_world(2, compiled_uneven_sequence, timeout=240)
