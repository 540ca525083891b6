"""torchtitan's pattern (a SequenceParallel norm, then a collmm Colwise linear) at sequences torch's
SequenceParallel mishandles (CPU, gloo, real processes): compiled at seq 15 on 2 ranks (refused on
every rank with the remedies, then compiled with the remedy), and seq 3 on 4 ranks (a rank with no
rows: runs, bounded in time)."""
import pytest

from dist_util import run_world
from short_seq_cases import compiled_uneven_sequence, rank_without_rows


def test_compiled_uneven_sequence():
    run_world(2, compiled_uneven_sequence, timeout=240)


@pytest.mark.parametrize("as_dtensor", [False, True], ids=["local", "dtensor"])
def test_rank_without_rows(as_dtensor):
    run_world(4, rank_without_rows, as_dtensor, timeout=90)
