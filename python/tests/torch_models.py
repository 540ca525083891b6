"""The small models of PyTorch's tensor-parallel tests (torch.testing._internal's common_dtensor:
MLPModule, MLPStacked, ModelArgs, Transformer), restated here with the same layers, names, sizes and
seeds, so that the ported tests need not import torch's internal test utilities (which need the
expecttest package). No pytest here."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


class MLPModule(nn.Module):
    def __init__(self, device, bias: bool = True):
        super().__init__()
        torch.manual_seed(5)
        self.net1 = nn.Linear(10, 16, bias=bias, device=device)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(16, 10, bias=bias, device=device)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


class MLPStacked(nn.Module):
    def __init__(self, device, n_layers: int = 2):
        super().__init__()
        self.layers = nn.ModuleList(MLPModule(device) for _ in range(n_layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@dataclass
class ModelArgs:
    n_layers: int = 2
    vocab_size: int = 8
    max_seq_len: int = 16
    dim: int = 16
    n_heads: int = 4
    dropout_p: float = 0.1
    use_attn_mask: bool = True
    weight_tying: bool = True


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.head_dim, self.n_heads = args.dim // args.n_heads, args.n_heads
        self.dropout_p, self.use_attn_mask = args.dropout_p, args.use_attn_mask
        self.resid_dropout = nn.Dropout(args.dropout_p)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(args.dim, args.dim, bias=False) for _ in range(4))

    def forward(self, x):
        b, s, _ = x.size()
        q, k, v = (t.view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
                   for t in (self.wq(x), self.wk(x), self.wv(x)))
        o = F.scaled_dot_product_attention(q, k, v, None, self.dropout_p if self.training else 0, self.use_attn_mask)
        return self.resid_dropout(self.wo(o.transpose(1, 2).reshape(b, s, -1)))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, dropout_p):
        super().__init__()
        self.w1, self.gelu, self.w2 = nn.Linear(dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, dim)
        self.resid_dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        return self.resid_dropout(self.w2(self.gelu(self.w1(x))))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attention_norm, self.attention = nn.LayerNorm(args.dim), Attention(args)
        self.ffn_norm = nn.LayerNorm(args.dim)
        self.feed_forward = FeedForward(args.dim, 4 * args.dim, args.dropout_p)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.model_args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.pos_embeddings = nn.Embedding(args.max_seq_len, args.dim)
        self.dropout = nn.Dropout(args.dropout_p)
        self.layers = nn.ModuleList(TransformerBlock(args) for _ in range(args.n_layers))
        self.norm = nn.LayerNorm(args.dim)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        if args.weight_tying:
            self.output.weight = self.tok_embeddings.weight

    def forward(self, tokens):
        h = self.tok_embeddings(tokens) + self.pos_embeddings(torch.arange(tokens.shape[1], device=tokens.device))
        h = self.dropout(h)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h)).float()
