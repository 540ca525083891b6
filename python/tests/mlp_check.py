"""The check both the layers' cases and the shard-and-train cases make (no pytest here): the unsharded
fc1 -> GELU -> fc2 against ColumnParallelLinear -> GELU -> RowParallelLinear built from them, on this
rank's rows of the input: the output, the input gradient and every weight and bias gradient."""
from torch import nn

from dist_util import assert_close, chunk, local


def shard_of(grad, param):
    """This rank's part of a parameter's gradient, in the parameter's own placement. torch 2.11's
    AccumulateGrad leaves an uneven Shard(1) weight's gradient Replicate() (its strides, computed
    for an even split, differ from the weight's); torch 2.15 keeps the Shard. The values agree."""
    if hasattr(grad, "placements") and grad.placements != param.placements:
        grad = grad.redistribute(placements=param.placements)
    return local(grad)


def check_mlp(fc1: nn.Linear, fc2: nn.Linear, x_full, target, mine: slice, rank: int, world: int, algo: str,
              what: str, scatter_size=None) -> None:
    """x_full and target are the whole input and the loss's weights; `mine` is this rank's rows of
    them (scatter_size: their count, where the split is not collmm's)."""
    from collmm.torch import ColumnParallelLinear, RowParallelLinear

    x_full = x_full.detach().requires_grad_()
    y_full = fc2(nn.functional.gelu(fc1(x_full)))
    (y_full * target).sum().backward()

    col, row = ColumnParallelLinear.from_linear(fc1, algo=algo), RowParallelLinear.from_linear(fc2, algo=algo)
    x = x_full.detach()[mine].clone().requires_grad_()
    y = row(nn.functional.gelu(col(x)), scatter_size=scatter_size)
    (y * target[mine]).sum().backward()

    hid = chunk(fc1.out_features, world, rank)  # the weights' shards: DTensor's split
    assert_close(y, y_full.detach()[mine], what + " y")
    assert_close(x.grad, x_full.grad[mine], what + " dx")
    assert_close(shard_of(col.weight.grad, col.weight), fc1.weight.grad[hid], what + " d col.weight")
    assert_close(shard_of(col.bias.grad, col.bias), fc1.bias.grad[hid], what + " d col.bias")
    assert_close(shard_of(row.weight.grad, row.weight), fc2.weight.grad[:, hid], what + " d row.weight")
    if fc2.bias is not None:
        assert_close(local(row.bias.grad), fc2.bias.grad, what + " d row.bias (all-reduced)")
