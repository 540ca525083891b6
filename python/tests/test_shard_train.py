"""A PyTorch user shards and trains (CPU, gloo, real processes): the cases of shard_cases.py at
world 1..4, grouped per world size so that each world starts its processes once."""
import pytest

import shard_cases as c
from dist_util import run_world


def training_cases(rank, world):
    c.seq_parallel_mlp(rank, world)
    c.other_dims(rank, world)
    c.raw_ops_autograd(rank, world)
    c.state_dict_round_trip(rank, world)
    c.shard_helper(rank, world)
    if world == 4:
        c.one_wide_shard(rank, world)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shard_and_train(world):
    run_world(world, training_cases)


def test_inductor_uneven_shards():
    run_world(2, c.inductor_uneven)
