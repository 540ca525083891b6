"""A torchtitan-style Llama block on [seq, batch, hidden] activations (attention with q/k/v/o,
SwiGLU feed-forward, RMSNorm) and its tensor-parallel plans for parallelize_module: collmm's styles
and torch's own, with SequenceParallel on the norms (sequence dim 0). No pytest here."""
import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, dtype=None):
        super().__init__()
        self.head_dim = dim // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False, dtype=dtype) for _ in range(4))

    def forward(self, x):  # [s, b, dim]; under TP each rank holds dim / P of q, k, v: its heads
        def heads(t):
            return t.view(t.shape[0], t.shape[1], -1, self.head_dim).permute(1, 2, 0, 3)

        o = F.scaled_dot_product_attention(heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x)), is_causal=True)
        o = o.permute(2, 0, 1, 3)
        return self.wo(o.reshape(o.shape[0], o.shape[1], -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int, dtype=None):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False, dtype=dtype)
        self.w2 = nn.Linear(hidden, dim, bias=True, dtype=dtype)  # a bias: the Rowwise bias's gradient
        self.w3 = nn.Linear(dim, hidden, bias=False, dtype=dtype)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim: int = 12, heads: int = 6, hidden: int = 7, dtype=torch.float64, checkpoint_ffn=False):
        super().__init__()
        self.attention_norm, self.ffn_norm = RMSNorm(dim, dtype), RMSNorm(dim, dtype)
        self.attention = Attention(dim, heads, dtype)
        self.feed_forward = FeedForward(dim, hidden, dtype)
        self.checkpoint_ffn = checkpoint_ffn

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        if self.checkpoint_ffn:
            return h + torch.utils.checkpoint.checkpoint(lambda t: self.feed_forward(self.ffn_norm(t)), h,
                                                         use_reentrant=False)
        return h + self.feed_forward(self.ffn_norm(h))


def collmm_plan(local_output: bool = True, algo: str = "auto") -> dict:
    """collmm's styles: every linear on a sequence-sharded activation fused."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import SequenceParallel

    from collmm.torch import ColwiseParallel, RowwiseParallel

    col = ColwiseParallel(input_layouts=Shard(0), algo=algo)
    row = RowwiseParallel(output_layouts=Shard(0), use_local_output=local_output, algo=algo)
    return {"attention_norm": SequenceParallel(sequence_dim=0), "ffn_norm": SequenceParallel(sequence_dim=0),
            "attention.wq": col, "attention.wk": col, "attention.wv": col, "attention.wo": row,
            "feed_forward.w1": col, "feed_forward.w3": col, "feed_forward.w2": row}


def torch_plan() -> dict:
    """torch's own styles for the same block (as torchtitan writes them, sequence dim 0)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)

    gather = PrepareModuleInput(input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),))
    row = RowwiseParallel(output_layouts=Shard(0))
    return {"attention_norm": SequenceParallel(sequence_dim=0), "ffn_norm": SequenceParallel(sequence_dim=0),
            "attention": gather, "feed_forward": gather,
            "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
            "attention.wo": row, "feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),
            "feed_forward.w2": row}
