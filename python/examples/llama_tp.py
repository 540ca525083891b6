"""A torchtitan-style Llama (RoPE, SwiGLU, RMSNorm) trained with tensor and sequence parallelism on
collmm's styles, beside torch's own plan (CPU with gloo, or CUDA with NCCL).

    torchrun --nproc-per-node 2 python/examples/llama_tp.py [--seq 512] [--dim 512] [--layers 2]
             [--heads 8] [--hidden 1536] [--vocab 2048] [--batch 1] [--steps 10] [--warmup 2]
             [--device cpu|cuda] [--dtype f32|bf16]

--device cuda puts rank r on GPU LOCAL_RANK % device_count() with an NCCL group. Ranks that share a
GPU must each be an NCCL node of their own (NCCL_HOSTID=h<rank> per process, docs/device-notes.md).
--dtype bf16 casts the model to bf16 (the loss is computed in f32).

The model's layout is torchtitan's (separate wq, wk, wv, wo, w1, w2, w3 nn.Linear modules, their
state_dict keys unchanged). apply_tp parallelizes it with collmm's styles: one fused all-gather per
sub-block (SharedGather: q, k and v in one, w1 and w3 in one), a fused reduce-scatter after wo and
w2, any sequence length that leaves every rank a row (others are refused on every rank). Each step
prints the loss and the step time; the first step the collectives of a forward and backward
(torch's CommDebugMode). At a sequence length the TP degree divides, torch's plan runs beside it on
the same weights and data: the losses agree, and the step times (median over steps, the steps
alternating) are printed side by side.
"""
import argparse
import copy
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import parallelize_module

import collmm.torch as ctp


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_frequencies(head_dim: int, max_seq: int, theta: float = 10000.0) -> torch.Tensor:
    """[max_seq, head_dim / 2, 2]: the rotations (cos, sin) of torchtitan's precompute_freqs_cis, as
    real numbers, so that the model's .to(dtype) casts them."""
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(max_seq).float(), freqs)
    return torch.stack((angles.cos(), angles.sin()), -1)


def apply_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """x [b, s, heads, head_dim] rotated by freqs [s, head_dim / 2, 2]."""
    real = x if x.dtype in (torch.float32, torch.float64) else x.float()
    xc = torch.view_as_complex(real.reshape(*x.shape[:-1], -1, 2))
    rotated = xc * torch.view_as_complex(freqs.to(real.dtype).contiguous())[None, :, None, :]
    return torch.view_as_real(rotated).flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.head_dim = dim // n_heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x, freqs):
        # Under TP each rank holds its heads: n_heads / P of them (-1 below), the whole sequence.
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        b, s = q.shape[0], q.shape[1]
        q, k, v = (t.view(b, s, -1, self.head_dim) for t in (q, k, v))
        q, k = apply_rope(q, freqs[:s]), apply_rope(k, freqs[:s])
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, hidden_dim: int):
        super().__init__()
        self.attention_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)
        self.attention, self.feed_forward = Attention(dim, n_heads), FeedForward(dim, hidden_dim)

    def forward(self, x, freqs):
        h = x + self.attention(self.attention_norm(x), freqs)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, vocab_size: int, dim: int, n_layers: int, n_heads: int, hidden_dim: int, max_seq: int = 4096):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(dim, n_heads, hidden_dim) for i in range(n_layers)})
        self.norm, self.output = RMSNorm(dim), nn.Linear(dim, vocab_size, bias=False)
        self.register_buffer("freqs", rope_frequencies(dim // n_heads, max_seq), persistent=False)

    def forward(self, tokens):  # [batch, seq] -> logits [batch, seq, vocab]
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.freqs)
        return self.output(self.norm(h))


def build_model(vocab_size: int, dim: int, n_layers: int, n_heads: int, hidden_dim: int) -> nn.Module:
    return Transformer(vocab_size, dim, n_layers, n_heads, hidden_dim)


def apply_tp(model: Transformer, tp_mesh) -> Transformer:
    """Tensor and sequence parallelism with collmm's styles (sequence dim 1, any length whose torch.chunk
    split leaves every rank a row; others raise ValueError on every rank): torchtitan's plan with
    SharedGather in place of its PrepareModuleInput. Full logits on every rank."""
    from torch.distributed.tensor.parallel import SequenceParallel

    parallelize_module(model, tp_mesh, {
        "tok_embeddings": ctp.RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ctp.ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    col, row = ctp.ColwiseParallel(input_layouts=Shard(1)), ctp.RowwiseParallel(output_layouts=Shard(1))
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(), "ffn_norm": SequenceParallel(),
            "attention": ctp.SharedGather("wq", "wk", "wv"),
            "attention.wq": col, "attention.wk": col, "attention.wv": col, "attention.wo": row,
            "feed_forward": ctp.SharedGather("w1", "w3"),
            "feed_forward.w1": col, "feed_forward.w3": col, "feed_forward.w2": row,
        })
    return model


def apply_torch_tp(model: Transformer, tp_mesh) -> Transformer:
    """The same parallelism with torch's styles, as torchtitan writes it (a sequence length that the
    TP degree divides)."""
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)

    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(), "ffn_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
            "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        })
    return model


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def step(model, opt, tokens, targets) -> float:
    logits = full(model(tokens)).float()
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.item()


def count_collectives(model, tokens, targets) -> dict:
    """The collectives of one forward and backward, by kind (CommDebugMode), summed over all kinds
    under "total"."""
    with CommDebugMode() as mode:
        F.cross_entropy(full(model(tokens)).float().flatten(0, 1), targets.flatten()).backward()
    model.zero_grad()
    counts = {str(op).split(".")[-1]: n for op, n in mode.get_comm_counts().items()}
    return {**counts, "total": mode.get_total_counts()}


def init(device_type: str) -> torch.device:
    """Joins the torchrun job's group: gloo on CPU; on CUDA an NCCL group, rank r on GPU
    LOCAL_RANK % device_count()."""
    if device_type == "cpu":
        dist.init_process_group("gloo")
        return torch.device("cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group("nccl")
    return device


def main() -> None:
    p = argparse.ArgumentParser()
    for name, default in (("seq", 512), ("dim", 512), ("layers", 2), ("heads", 8), ("hidden", 1536),
                          ("vocab", 2048), ("batch", 1), ("steps", 10), ("warmup", 2)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    args = p.parse_args()
    device = init(args.device)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh(device.type, (world,))
    torch.manual_seed(0)  # the same model and data on every rank
    base = build_model(args.vocab, args.dim, args.layers, args.heads, args.hidden).to(device, dtype)
    models = {"collmm": apply_tp(copy.deepcopy(base), mesh)}
    if args.seq % world == 0:
        models["torch"] = apply_torch_tp(copy.deepcopy(base), mesh)
    opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-3) for k, m in models.items()}
    data = torch.randint(args.vocab, (args.steps + args.warmup, args.batch, args.seq + 1)).to(device)
    counts = {k: count_collectives(m, data[0, :, :-1], data[0, :, 1:]) for k, m in models.items()}
    # The two plans sum in different orders: their losses agree to the dtype's precision.
    tol = {torch.float32: 1e-3, torch.bfloat16: 3e-2}[dtype]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = {k: [] for k in models}
    for i in range(args.steps + args.warmup):
        tokens, targets = data[i, :, :-1], data[i, :, 1:]
        losses = {}
        for k, m in models.items():
            dist.barrier()
            sync()
            start = time.perf_counter()
            losses[k] = step(m, opts[k], tokens, targets)
            sync()
            took = torch.tensor(time.perf_counter() - start, device=device)
            dist.all_reduce(took, op=dist.ReduceOp.MAX)  # the slowest rank's
            if i >= args.warmup:
                times[k].append(took.item())
        if "torch" in losses:
            assert abs(losses["collmm"] - losses["torch"]) < tol * max(1.0, abs(losses["torch"])), losses
        if rank == 0:
            print(f"step {i}: " + ", ".join(f"{k} loss {v:.4f}" for k, v in losses.items()), flush=True)
    if rank == 0:
        print(f"world {world}, seq {args.seq}, dim {args.dim}, layers {args.layers}, batch {args.batch}, "
              f"{device.type} {args.dtype}:")
        for k in models:
            print(f"  {k:6s} step {statistics.median(times[k]) * 1e3:8.1f} ms (median of {args.steps}), "
                  f"collectives per forward+backward: {counts[k]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
